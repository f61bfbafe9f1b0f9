"""The benchmark harness on a tiny model: every method runs, outputs match HF greedy, rows add up."""

from __future__ import annotations

import pytest
import torch

from lade.bench import build_methods, format_table, load_prompts, parse_config, run, summarize
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
    rows = summarize(run(methods, prompts, "tiny"))
    by_name = {row["method"]: row for row in rows}
    assert all(row["identical_to_hf"] == 2 and row["new_tokens"] == 40 for row in rows)
    assert by_name["hf_greedy"]["compression"] == 1.0 and by_name["plain_loop"]["compression"] == 1.0
    assert "| auto |" in format_table(rows)


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown methods"):
        build_methods(load_model("tiny-random-llama")[0], ["nope"], [], [], 4)
    with pytest.raises(ValueError, match="unknown dataset"):
        load_prompts("poetry", None, 1, "x")
    with pytest.raises(Exception, match="W,N,G"):
        parse_config("7,5")
