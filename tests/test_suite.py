"""Paired, resumable benchmark runs (``lade.suite``), their summaries with bootstrap intervals
(``lade.suite_report``) and the draft-source ablation built on them (experiments/draft_ablation.py)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from lade import LookaheadDecoder
from lade.bench_methods import greedy_options
from lade.suite import REFERENCE, Outcome, decoder_call, done_prompts, hf_call, run_suite
from lade.suite_report import (
    bootstrap_ratio,
    bootstrap_throughput_ratio,
    dev_summary,
    markdown,
    summarize,
    tuned_lookup_ks,
    versus,
    versus_markdown,
)
from tests.conftest import prompt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
LABELS = {"model": "tiny-random-llama", "dtype": "float32", "split": "test"}


def test_bootstrap_interval_of_a_ratio_of_sums():
    rng = np.random.default_rng(3)
    base = rng.uniform(1.0, 2.0, 40)
    constant = bootstrap_ratio(base * 1.5, base)  # every pair has ratio 1.5: no spread at all
    assert constant == pytest.approx((1.5, 1.5))
    noisy = base * 1.5 * rng.uniform(0.8, 1.2, 40)
    low, high = bootstrap_ratio(noisy, base)
    assert low < noisy.sum() / base.sum() < high and high - low < 0.3
    wider = bootstrap_ratio(noisy[:8], base[:8])  # fewer prompts: a wider interval
    assert wider[1] - wider[0] > high - low
    assert all(math.isnan(v) for v in bootstrap_ratio([1.0], [2.0]))


def test_a_speedup_is_a_ratio_of_throughputs_so_outputs_of_other_lengths_compare_fairly():
    seconds = np.array([2.0, 4.0, 3.0])
    # a method that writes half the tokens in half the time is exactly as fast: an interval at 1
    interval = bootstrap_throughput_ratio([4, 8, 6], seconds / 2, [8, 16, 12], seconds)
    assert interval == pytest.approx((1.0, 1.0))
    records = pd.DataFrame(
        {
            "model": "m",
            "dtype": "float32",
            "dataset": "d",
            "prompt": [0, 0, 1, 1],
            "method": ["hf_sampling_t1.0", "auto_t1.0"] * 2,
            "seconds": [2.0, 2.0, 4.0, 1.0],
            "new_tokens": [8, 4, 16, 4],
            "steps": [8, 4, 16, 2],
            "tokens_fed": [8, 8, 16, 6],
            "identical": [None] * 4,
            "near_tie": [None] * 4,
        }
    )
    summary = summarize(records, {"auto_t1.0": "hf_sampling_t1.0"}).set_index("method")
    assert summary.loc["auto_t1.0"].speedup == pytest.approx((8 / 3) / (24 / 6))  # tokens/s over tokens/s
    assert summary.loc["auto_t1.0"].baseline == "hf_sampling_t1.0"
    assert math.isnan(summary.loc["auto_t1.0"].identical)  # not compared: sampled outputs are draws
    assert "| - |" in markdown(summary.reset_index())


def test_versus_pairs_one_method_against_each_other_library_method_per_prompt():
    seconds = {
        "hf_greedy": [4.0, 8.0],
        "auto": [2.0, 4.0],
        "auto_only_a": [1.0, 4.0],
        "auto_only_b": [4.0, 2.0],
    }
    records = pd.DataFrame(
        [
            {
                "model": "m",
                "dtype": "float32",
                "dataset": d,
                "prompt": p,
                "method": m,
                "seconds": s[p],
                "new_tokens": 8,
                "steps": 4,
                "tokens_fed": 8,
                "identical": True,
                "near_tie": False,
            }
            for d in ("x", "y")
            for p in (0, 1)
            for m, s in seconds.items()
        ]
    )
    table = versus(records, "auto")
    assert list(zip(table.dataset, table.baseline, strict=True)) == [
        ("x", "auto_only_a"),
        ("x", "auto_only_b"),
        ("y", "auto_only_a"),
        ("y", "auto_only_b"),
    ]  # HF's methods are left out: the summary already pairs every method against HF greedy
    assert (table.method == "auto").all()
    assert table.speedup.tolist() == pytest.approx([5 / 6, 1.0] * 2)  # summed seconds 5 vs 6, 6 vs 6
    assert table.median_speedup.tolist() == pytest.approx([0.75, 1.25] * 2)  # ratios (1/2, 1) and (2, 1/2)
    assert "| m | float32 | x | auto | auto_only_a | 0.83x [" in versus_markdown(table)


@pytest.fixture()
def methods(tiny_models):
    model = tiny_models("llama", "sdpa")
    options = greedy_options(model, 16, [])
    return {
        REFERENCE: hf_call(model, options, keep_logits=True),
        "lookahead": decoder_call(LookaheadDecoder(model, 3, 3, 3), options),
    }


def test_a_suite_records_every_prompt_once_and_resumes_where_it_died(methods, tmp_path):
    prompts = {"a": [prompt("repetitive", s, length=16) for s in (1, 2)], "b": [prompt("random", 3)]}
    path = tmp_path / "records.csv"
    calls = []

    def dies_on_the_second_prompt(ids):
        calls.append(ids)
        if len(calls) == 3:  # warm-up, prompt 0 of "a", then prompt 0 of "b" (index-major)
            raise KeyboardInterrupt
        return methods["lookahead"](ids)

    dying = {REFERENCE: methods[REFERENCE], "lookahead": dies_on_the_second_prompt}
    with pytest.raises(KeyboardInterrupt):
        run_suite({"a": dying, "b": dying}, prompts, path, LABELS, prompt("random", 9))
    assert done_prompts(path) == {
        ("tiny-random-llama", "float32", "a", "test", "0"): {REFERENCE, "lookahead"}
    }
    per_dataset = {"a": methods, "b": methods}
    assert run_suite(per_dataset, prompts, path, LABELS, prompt("random", 9)) == 2  # resumes at prompt 1
    assert run_suite(per_dataset, prompts, path, LABELS, prompt("random", 9)) == 0  # nothing left
    records = pd.read_csv(path)
    assert len(records) == 6 and set(records.method) == {REFERENCE, "lookahead"}
    assert records.identical.all() and records.near_tie.all()  # fp32: exactly HF greedy
    lookahead = records[records.method == "lookahead"]
    assert (lookahead.tokens_fed > lookahead.steps).all()  # steps fed more than the root
    summary = summarize(records)
    reference = summary[summary.method == REFERENCE]
    assert (reference.speedup == 1.0).all() and (reference.compression == 1.0).all()
    assert list(summary.identical) == [2, 2, 1, 1]
    assert "| tiny-random-llama | float32 | a |" in markdown(summary)


def test_deleted_rows_of_some_methods_are_measured_again_and_only_those(tmp_path):
    runs = []

    def method(name):
        def call(ids):
            runs.append(name)
            return Outcome([1, 2], 2, 2)

        return call

    named = {"hf_sampling": method("hf_sampling"), "auto": method("auto"), "other": method("other")}
    prompts, path, warmup = (
        {"a": [torch.ones(1, 4, dtype=torch.long)] * 2},
        tmp_path / "r.csv",
        torch.ones(1, 2),
    )
    assert run_suite({"a": named}, prompts, path, LABELS, warmup, reference=None) == 2
    records = pd.read_csv(path)
    for kept in (path, tmp_path / "g.csv"):
        records[records.method == "other"].to_csv(kept, index=False)  # re-measure the paired two
    runs.clear()
    assert run_suite({"a": named}, prompts, path, LABELS, warmup, reference=None) == 2
    assert sorted(runs) == ["auto"] * 3 + ["hf_sampling"] * 3  # a warm-up each, then the two prompts
    assert sorted(pd.read_csv(path).method) == sorted(records.method)
    # with a reference, outputs are compared in one pass: a prompt is measured whole or not at all
    with pytest.raises(ValueError, match="delete the prompt's rows"):
        run_suite({"a": named}, prompts, tmp_path / "g.csv", LABELS, warmup, reference="other")


def test_a_wrong_token_is_counted_as_neither_identical_nor_near_tie(methods, tmp_path):
    def wrong(ids):
        right = methods["lookahead"](ids)
        return Outcome([right.tokens[0], (right.tokens[1] + 1) % 128, *right.tokens[2:]], right.steps)

    path = tmp_path / "records.csv"
    named = {REFERENCE: methods[REFERENCE], "wrong": wrong}
    run_suite({"a": named}, {"a": [prompt("random", 4)]}, path, LABELS, prompt("random", 9))
    row = pd.read_csv(path).set_index("method").loc["wrong"]
    assert not row.identical and not row.near_tie and row.margin > 0.0


# a tiny model, the synthetic prompts, 2 of them, 12 tokens: the experiment scripts' quick run
QUICK = ["--model", "tiny-random-llama", "--datasets", "synthetic", "--limit", "2", "--max-new-tokens", "12"]


def test_the_draft_ablation_runs_a_method_on_a_second_attention_implementation(tmp_path):
    import draft_ablation

    methods = "hf_greedy,auto,auto@sdpa_gqa,hf_prompt_lookup@sdpa_gqa"
    argv = [*QUICK, "--attn", "sdpa", "--methods", methods, "--versus", "auto@sdpa_gqa"]
    table = draft_ablation.main([*argv, "--out", str(tmp_path)])
    assert set(table.method) == set(methods.split(",")) and (table.identical == 2).all()
    pairs = pd.read_csv(tmp_path / "versus.csv")
    assert set(pairs[pairs.method == "auto@sdpa_gqa"].baseline) == {"auto"}
    with pytest.raises(SystemExit):  # the reference runs on --attn's model; refused before any load
        draft_ablation.main([*QUICK, "--methods", "hf_greedy@sdpa_gqa,auto", "--out", str(tmp_path)])


def test_the_draft_ablation_runs_and_tunes_prompt_lookup_on_a_dev_summary(tmp_path):
    import draft_ablation

    dev_methods = "hf_greedy,hf_prompt_lookup_k2,hf_prompt_lookup"
    dev = draft_ablation.main(
        [*QUICK, "--methods", dev_methods, "--split", "dev", "--out", str(tmp_path / "dev")]
    )
    best = dev[dev.method.str.startswith("hf_prompt")].sort_values("speedup").method.iloc[-1]
    expected_k = 10 if best == "hf_prompt_lookup" else 2
    assert tuned_lookup_ks(pd.read_csv(tmp_path / "dev" / "summary.csv")) == {"synthetic": expected_k}
    methods = (
        "hf_greedy,hf_prompt_lookup_tuned,jacobi,token_recycling,token_recycling_likeliest12,suffix_tree,"
        "combined,auto,auto_combined,auto_combined_likeliest8,auto_only_suffix_tree,auto_only_token_recycling,"
        "auto_with_frequent_tokens"
    )
    tuned = ["--tuned-lookup", str(tmp_path / "dev" / "summary.csv")]
    paired = ["--versus", "auto_combined,auto"]
    test = draft_ablation.main(
        [*QUICK, "--methods", methods, *tuned, *paired, "--out", str(tmp_path / "test")]
    )
    assert len(test) == 13 and (test.identical == 2).all()
    text = (tmp_path / "test" / "summary.md").read_text()
    assert f"synthetic={expected_k}" in text and "Token Recycling 2.22x" in text
    assert "## auto_combined against each other method" in text and "## auto against each other" in text
    pairs = pd.read_csv(tmp_path / "test" / "versus.csv")
    library = set(methods.split(",")[2:])
    assert set(pairs[pairs.method == "auto_combined"].baseline) == library - {"auto_combined"}
    assert set(pairs[pairs.method == "auto"].baseline) == library - {"auto"}
    with pytest.raises(SystemExit):  # refused before any model is loaded
        draft_ablation.main([*QUICK, "--methods", "hf_greedy,auto", "--versus", "jacobi"])
    dev_records = tmp_path / "dev" / "records.csv"  # records tune K as their summary does
    assert draft_ablation.tuned_ks(dev_records, "tiny-random-llama", "float32") == (
        {"synthetic": expected_k},
        "tiny-random-llama float32",
    )
    assert (
        draft_ablation.tuned_ks(dev_records, "tiny-random-llama", "bfloat16")[1]
        == "tiny-random-llama float32"
    )  # other dtype: K kept
    strict = dev_summary(dev_records, "tiny-random-llama", "bfloat16")  # the benchmark's rule: none
    assert strict.empty and len(dev_summary(dev_records, "tiny-random-llama", "float32")) > 0
    with pytest.raises(ValueError, match="no dev rows of 'smollm2'"):
        draft_ablation.tuned_ks(dev_records, "smollm2", "float32")
    with pytest.raises(ValueError, match="needs --tuned-lookup"):
        draft_ablation.build("hf_prompt_lookup_tuned", None, {}, None)
    with pytest.raises(ValueError, match="unknown method 'auto_combined_x'"):
        draft_ablation.build("auto_combined_x", None, {}, None)
    with pytest.raises(ValueError, match="unknown draft source 'ngram'"):
        draft_ablation.every_source(6, 7, auto=True, only="ngram")
    assert list(draft_ablation.every_source(6, 7, auto=True, only="suffix_tree").names) == ["suffix_tree"]


def test_the_token_recycling_shapes_run_reports_each_shape(tmp_path):
    import token_recycling_shapes

    methods = ["--methods", "jacobi,uniform,likeliest8", "--out", str(tmp_path)]
    table = token_recycling_shapes.main([*QUICK, *methods])
    assert list(table.method) == ["jacobi", "uniform", "likeliest8"] and (table.identical == 2).all()
    assert table.rank_acceptance.isna().tolist() == [True, False, False]  # Token Recycling's counts only
    assert "likeliest8" in (tmp_path / "shapes.md").read_text()


def test_source_subset_pools_keep_the_named_sources():
    """``auto_only_{source}`` keeps that source, ``auto_without_{source}`` every other one (and the
    merged candidates of two or more); other names give None, an unknown source an error."""
    from lade.bench_methods import source_subset_pool
    from lade.options import DRAFT_SOURCES

    for source in DRAFT_SOURCES:
        assert list(source_subset_pool(f"auto_only_{source}").sources) == [source]
        without = source_subset_pool(f"auto_without_{source}")
        assert list(without.sources) == [s for s in DRAFT_SOURCES if s != source] and without.merged
    assert source_subset_pool("auto_only_token_recycling", persistent=True).persistent
    assert not source_subset_pool("auto_only_token_recycling").persistent
    assert source_subset_pool("auto") is None and source_subset_pool("fixed_7_5_7") is None
    with pytest.raises(ValueError, match="unknown draft source"):
        source_subset_pool("auto_without_prompt_lookup")
