"""The benchmark's table (``lade.benchmark_table``, experiments/benchmark.py): method names split into
columns, speedups over the right baseline, the rendered Markdown, figure and README block, and the
committed README table matching the committed benchmark.csv."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from lade.benchmark_table import (
    README_END,
    README_START,
    describe,
    headline,
    read_table,
    render_all,
    render_readme,
)
from lade.suite import COLUMNS

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "experiments" / "results" / "benchmark" / "benchmark.csv"
ISSUE_COLUMNS = ["model", "dtype", "dataset", "method", "tuned", "prompts", "speedup", "speedup_ci_low"]
ISSUE_COLUMNS += ["speedup_ci_high", "compression", "identical", "near_tie"]


def test_method_names_are_split_into_method_tuned_temperature_and_baseline():
    assert describe("auto") == {
        "method": "auto",
        "tuned": False,
        "temperature": 0.0,
        "setting": "",
        "baseline": "hf_greedy",
    }
    default_k = {**describe("auto"), "method": "hf_prompt_lookup", "setting": "K=10"}
    assert describe("hf_prompt_lookup") == default_k
    tuned = describe("hf_prompt_lookup_tuned_k5")
    assert (tuned["method"], tuned["tuned"], tuned["setting"]) == ("hf_prompt_lookup", True, "K=5")
    sampled = describe("auto_t0.7")
    assert (sampled["method"], sampled["temperature"], sampled["baseline"]) == ("auto", 0.7, "hf_sampling")
    assert describe("hf_sampling_t1.0")["method"] == "hf_sampling"


def _records(rows: list[tuple]) -> pd.DataFrame:
    """Records (``lade.suite.COLUMNS``) from (dataset, prompt, method, seconds, new_tokens, steps)."""
    out = []
    for dataset, prompt, method, seconds, tokens, steps in rows:
        compared = not method.endswith(("_t0.7", "_t1.0"))
        out.append(
            {
                "model": "tiny",
                "dtype": "float32",
                "dataset": dataset,
                "split": "test",
                "prompt": prompt,
                "method": method,
                "seconds": seconds,
                "new_tokens": tokens,
                "steps": steps,
                "tokens_fed": steps * 2,
                "identical": True if compared else None,
                "near_tie": True if compared else None,
                "margin": None,
                "sources": "",
            }
        )
    return pd.DataFrame(out, columns=COLUMNS)


@pytest.fixture()
def results(tmp_path) -> Path:
    """A benchmark folder with one setting's greedy and sampling records (known ratios)."""
    folder = tmp_path / "records" / "tiny-float32-8"
    folder.mkdir(parents=True)
    greedy = []
    for dataset in ("mt_bench", "humaneval"):  # out of the table's order on purpose
        for prompt in range(3):
            greedy += [
                (dataset, prompt, "hf_greedy", 2.0, 8, 8),
                (dataset, prompt, "hf_prompt_lookup", 2.5, 8, math.nan),
                (dataset, prompt, "hf_prompt_lookup_tuned_k3", 1.6, 8, math.nan),
                (dataset, prompt, "auto", 1.0 + 0.1 * prompt, 8, 4),
            ]
    _records(greedy).to_csv(folder / "greedy.csv", index=False)
    sampling = []
    for prompt in range(3):
        sampling += [
            ("humaneval", prompt, "hf_sampling_t0.7", 2.0, 8, 8),
            ("humaneval", prompt, "auto_t0.7", 4.0, 4, 4),  # half the tokens in twice the time: 0.25x
        ]
    _records(sampling).to_csv(folder / "sampling.csv", index=False)
    run = {"started": "now", "command": "python experiments/benchmark.py", "commit": "abc"}
    run["machine"] = "Test CPU"
    (folder / "runs.jsonl").write_text(json.dumps(run) + "\n")
    return tmp_path


def test_the_table_has_the_issue_columns_and_each_speedup_is_over_its_baseline(results, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{README_START}\nstale\n{README_END}\nrest\n")
    table = render_all(results, readme)
    assert set(ISSUE_COLUMNS) <= set(table.columns)
    assert list(dict.fromkeys(table.dataset)) == ["humaneval", "mt_bench"]  # the benchmark's order
    row = table.set_index(["dataset", "method", "tuned", "temperature"])
    assert row.loc[("humaneval", "auto", False, 0.0)].speedup == pytest.approx(6.0 / 3.3)
    assert row.loc[("humaneval", "auto", False, 0.0)].compression == pytest.approx(2.0)
    assert row.loc[("humaneval", "hf_prompt_lookup", True, 0.0)].setting == "K=3"
    assert row.loc[("humaneval", "hf_prompt_lookup", False, 0.0)].speedup == pytest.approx(0.8)
    sampled = row.loc[("humaneval", "auto", False, 0.7)]
    assert sampled.speedup == pytest.approx(0.25) and sampled.baseline == "hf_sampling"
    assert math.isnan(sampled.identical)  # sampled outputs are draws: not compared
    assert row.loc[("humaneval", "hf_greedy", False, 0.0)].identical == 3
    assert (results / "benchmark.png").exists()
    markdown = (results / "benchmark.md").read_text()
    assert "Test CPU" in markdown and "HF prompt lookup K=3 (tuned)" in markdown
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("\nrest\n") and "stale" not in text
    assert "| humaneval | 0.80x [0.80, 0.80] | 1.25x [1.25, 1.25] |" in text
    render_readme(readme, read_table(results / "benchmark.csv"))
    assert readme.read_text() == text  # rendering again changes nothing


def test_the_benchmark_script_measures_renders_and_resumes(tmp_path):
    sys.path.insert(0, str(REPO / "experiments"))
    import benchmark

    readme = tmp_path / "README.md"
    readme.write_text(f"{README_START}\n{README_END}\n")
    quick = ["--model", "tiny-random-llama", "--datasets", "synthetic", "--limit", "2", "--dev-limit", "1"]
    quick += ["--max-new-tokens", "8", "--out", str(tmp_path), "--readme", str(readme)]
    quick += ["--calibration-dir", str(tmp_path / "calibration")]
    table = benchmark.main(quick)
    greedy = table[table.temperature == 0]
    assert set(greedy.method) == {"hf_greedy", "hf_prompt_lookup", "plain_loop", "auto"}
    assert (greedy.identical == 2).all() and greedy.tuned.sum() == 1
    assert set(table[table.temperature > 0].temperature) == set(benchmark.TEMPERATURES)
    folder = tmp_path / "records" / "tiny-random-llama-float32-8"
    assert {p.name for p in folder.iterdir()} == {"dev.csv", "greedy.csv", "sampling.csv", "runs.jsonl"}
    assert list((tmp_path / "calibration").glob("*.json"))  # auto's curve: not in the user's home
    rows = len(pd.read_csv(folder / "greedy.csv"))
    benchmark.main(quick)  # everything is recorded: nothing is run again
    assert len(pd.read_csv(folder / "greedy.csv")) == rows
    runs = [json.loads(line) for line in (folder / "runs.jsonl").read_text().splitlines()]
    assert len(runs) == 2
    assert runs[0]["latency"]["relative"]["1"] == 1.0  # the curve auto planned with, each run
    assert runs[0]["attn"] == "sdpa_gqa"  # the default
    with pytest.raises(ValueError, match="measured with attn"):  # one folder's records, one attention
        benchmark.main([*quick, "--attn", "sdpa"])
    (folder / "runs.jsonl").write_text('{"command": "before attn was logged"}\n')
    with pytest.raises(ValueError, match=r"\['sdpa'\]"):  # those runs used sdpa
        benchmark.check_attention(folder / "runs.jsonl", "sdpa_gqa")
    benchmark.check_attention(folder / "runs.jsonl", "sdpa")
    with pytest.raises(SystemExit):
        benchmark.main([*quick, "--phases", "greedy,beam"])
    with pytest.raises(SystemExit):
        benchmark.main([*quick, "--temperatures", "0.7,0"])
    k = int(table[table.tuned].setting.iloc[0].removeprefix("K="))
    with pytest.raises(ValueError, match="K is tuned to"):  # resuming at another K is refused
        benchmark.check_tuned(folder / "greedy.csv", {"synthetic": k + 1})


@pytest.mark.skipif(not COMMITTED.exists(), reason="no committed benchmark yet")
def test_the_readme_table_is_rendered_from_the_committed_benchmark():
    text = (REPO / "README.md").read_text()
    assert README_START in text and README_END in text
    block = text.split(README_START, 1)[1].split(README_END, 1)[0].strip()
    assert block == headline(read_table(COMMITTED)).strip()
