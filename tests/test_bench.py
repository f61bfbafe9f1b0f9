"""The benchmark harness on a tiny model: every method runs, outputs match HF greedy, rows add up."""

from __future__ import annotations

import math

import pytest
import torch

from lade.bench import build_methods, format_table, run, summarize
from lade.bench_setup import load_prompts, parse_config, parse_ints
from lade.calibration import LatencyModel
from lade.model import load_model


def test_every_method_runs_and_matches_hf_greedy(capsys):
    model, _ = load_model("tiny-random-llama")
    torch.manual_seed(0)
    prompts = [torch.randint(1, 128, (1, 12)), torch.randint(1, 10, (1, 6)).repeat(1, 3)]
    flat = LatencyModel((1, 64), (1.0, 1.01))
    methods = build_methods(
        model,
        ["hf_prompt_lookup", "auto"],
        [(0, 3, 2), (2, 3, 2)],
        [],
        20,
        prompt_lookup_tokens=3,
        latency=flat,
    )
    assert list(methods) == [
        "hf_greedy",
        "plain_loop",
        "hf_prompt_lookup",
        "auto",
        "lookahead W=0 N=3 G=2",
        "lookahead W=2 N=3 G=2",
    ]

    def wrong_from_the_third_token(ids):  # a control: the 3rd new token replaced
        new, steps, overhead, _ = methods["plain_loop"](ids)
        return new[:2] + [(new[2] + 1) % 128] + new[3:], steps, overhead, None

    methods["wrong"] = wrong_from_the_third_token
    rows = summarize(run(methods, prompts, "tiny"))
    by_name = {row["method"]: row for row in rows}
    wrong = by_name.pop("wrong")
    assert wrong["identical_to_hf"] == 0 and wrong["worst_margin"] > 0
    rows = list(by_name.values())
    assert all(row["identical_to_hf"] == 2 and row["new_tokens"] == 40 for row in rows)
    assert all(row["near_tie"] == 0 and math.isnan(row["worst_margin"]) for row in rows)
    assert by_name["hf_greedy"]["compression"] == 1.0 and by_name["plain_loop"]["compression"] == 1.0
    assert "| auto |" in format_table(rows)


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown methods"):
        build_methods(load_model("tiny-random-llama")[0], ["nope"], [], [], 4)
    with pytest.raises(ValueError, match="unknown dataset"):
        load_prompts("poetry", None, 1, "x")
    with pytest.raises(Exception, match="W,N,G"):
        parse_config("7,5")
    with pytest.raises(ValueError, match="prompt lookup K"):
        build_methods(
            load_model("tiny-random-llama")[0], ["hf_prompt_lookup"], [], [], 4, prompt_lookup_tokens=[3, 0]
        )
    with pytest.raises(Exception, match="comma list of integers"):
        parse_ints("3,ten")


def test_prompt_lookup_at_several_k_is_one_method_per_k():
    model, _ = load_model("tiny-random-llama")
    methods = build_methods(model, ["hf_prompt_lookup"], [], [], 8, prompt_lookup_tokens=parse_ints("2,5"))
    assert list(methods) == ["hf_greedy", "plain_loop", "hf_prompt_lookup K=2", "hf_prompt_lookup K=5"]
    prompt = torch.randint(1, 10, (1, 6)).repeat(1, 3)
    reference = methods["hf_greedy"](prompt)[0]
    assert (
        methods["hf_prompt_lookup K=2"](prompt)[0] == reference == methods["hf_prompt_lookup K=5"](prompt)[0]
    )


def test_batch_benchmark_runs_every_method_at_every_batch_size():
    from lade import bench_batch

    model, _ = load_model("tiny-random-llama")
    generator = torch.Generator().manual_seed(0)
    prompts = [torch.randint(1, 128, (1, n), generator=generator) for n in (12, 5, 9, 7)]
    flat = LatencyModel((1, 64), (1.0, 1.01))
    methods = bench_batch.build_methods(model, ["auto"], [(0, 3, 2)], [], 0, 12, latency=flat)
    assert list(methods) == ["hf_greedy", "plain_loop", "auto", "lookahead W=0 N=3 G=2"]

    def wrong_from_the_fifth_token(ids, mask):  # a control: each row's 5th token replaced
        outputs, steps, overhead, _ = methods["plain_loop"](ids, mask)
        return [row[:4] + [(row[4] + 1) % 128] + row[5:] for row in outputs], steps, overhead, None

    methods["wrong"] = wrong_from_the_fifth_token
    rows = bench_batch.summarize(bench_batch.run(methods, prompts, [1, 2, 4], pad=0))
    wrong = [row for row in rows if row["method"] == "wrong"]
    rows = [row for row in rows if row["method"] != "wrong"]
    assert len(rows) == 12
    assert all(row["identical_to_hf"] == 4 and row["new_tokens"] == 48 for row in rows)
    assert all(row["near_tie"] == 0 and math.isnan(row["worst_margin"]) for row in rows)
    assert all(row["identical_to_hf"] == 0 and row["worst_margin"] > 0 for row in wrong)
    assert set(bench_batch.crossovers(rows)) == {"auto", "lookahead W=0 N=3 G=2"}
    assert "| 4 | auto |" in bench_batch.format_table(rows)
    with pytest.raises(ValueError, match="unknown methods"):
        bench_batch.build_methods(model, ["hf_prompt_lookup"], [], [], 0, 4)
