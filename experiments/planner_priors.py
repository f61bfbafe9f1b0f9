"""Tuning auto's planner priors on dev-split prompts (issue 18: planner priors are tuned on the
development split, never on the prompts reported).

Auto credits the lookahead branch with a prior gain (``PlannerPriors.branch`` x log2(1 + W) tokens per
step) until the branch has run ``PlannerPriors.trial`` steps and its measured gain replaces it. Where a
wide step costs little (a flat latency curve) and answers are short, a long trial runs whole calls on
the prior.
Until a call's first offers have been scored, it predicts the candidates' acceptance from
``PlannerPriors.candidate`` (the chance that each next token of a candidate holds). This script times auto at
several (branch prior, trial, candidate prior) triples against HF greedy, paired per prompt with the
methods alternating, on the dev split of HumanEval and the six Spec-Bench categories:

    python experiments/planner_priors.py --model qwen2.5-coder-1.5b --dtype bfloat16 --max-new-tokens 64 \
        --variants 0.25:8:0,0.25:8:0.3,0.25:8:0.6 --out experiments/results/planner_priors/candidate_prior

It writes ``{out}/{model}-{dtype}-{tokens}.csv`` (one row per prompt and method, ``lade.suite``; a
rerun resumes, and refuses new variants beside recorded ones: give those another ``--out``) and
``.md`` (speedups over HF greedy with 95% bootstrap intervals, ``lade.suite_report``, then each
variant's geometric mean speedup over the datasets).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

from lade import LookaheadDecoder
from lade.bench_methods import greedy_options
from lade.bench_setup import (
    SPEC_BENCH,
    SUITE_DATASETS,
    add_model_flags,
    eos_ids,
    load_bench_model,
    load_prompts,
    warmup_ids,
)
from lade.priors import PlannerPriors
from lade.suite import decoder_call, hf_call, run_suite
from lade.suite_report import markdown, summarize

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "planner_priors"
# branch prior:trial:candidate prior; 0.25:32:0 was the default before this tuning, 0.25:8:0 after the first
VARIANTS = "0.25:8:0,0.25:8:0.3,0.25:8:0.6"


def variant_name(prior: float, trial: int, candidate: float) -> str:
    return f"auto_prior{prior:g}_trial{trial}_candidate{candidate:g}"


def parse_variants(text: str) -> list[tuple[float, int, float]]:
    """``--variants``: comma-separated ``branch:trial:candidate`` triples (``PlannerPriors``)."""
    try:
        triples = [item.split(":") for item in text.split(",")]
        return [(float(prior), int(trial), float(candidate)) for prior, trial, candidate in triples]
    except ValueError as error:
        example = "prior:trial:candidate triples, e.g. 0.25:8:0.6"
        raise argparse.ArgumentTypeError(f"{example}; got {text!r}") from error


def geometric_means(summary: pd.DataFrame) -> pd.Series:
    """Each method's geometric mean speedup over the datasets."""
    return summary.groupby("method").speedup.apply(lambda s: math.exp(s.map(math.log).mean()))


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_model_flags(parser)
    parser.add_argument("--datasets", default=SUITE_DATASETS)
    parser.add_argument("--limit", type=int, default=3, help="dev-split prompts per dataset")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--variants", type=parse_variants, default=parse_variants(VARIANTS))
    parser.add_argument("--spec-bench", default=str(ROOT / SPEC_BENCH))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    model, tokenizer = load_bench_model(args)
    dtype = str(model.dtype).removeprefix("torch.")
    name = Path(args.model).name
    options = greedy_options(model, args.max_new_tokens, eos_ids(model))
    curve = LookaheadDecoder(model).calibrate()  # one curve for every variant (cached per machine)
    methods = {"hf_greedy": hf_call(model, options, keep_logits=True)}
    for prior, trial, candidate in args.variants:
        priors = PlannerPriors(branch=prior, trial=trial, candidate=candidate)
        decoder = LookaheadDecoder(model, latency=curve, planner_priors=priors)
        methods[variant_name(prior, trial, candidate)] = decoder_call(decoder, options)
    datasets = args.datasets.split(",")
    prompts = {d: load_prompts(d, tokenizer, args.limit, args.spec_bench, split="dev") for d in datasets}
    records = args.out / f"{name}-{dtype}-{args.max_new_tokens}.csv"
    labels = {"model": name, "dtype": dtype, "split": "dev"}
    run_suite(dict.fromkeys(datasets, methods), prompts, records, labels, warmup_ids())
    return render(records)


def render(records: Path) -> pd.DataFrame:
    """Write ``records``' summary beside it (``.md``: every row, then each method's geometric mean
    speedup over the datasets) and print it."""
    summary = summarize(pd.read_csv(records))
    means = geometric_means(summary)
    lines = ["| method | geometric mean speedup over the datasets |", "|---|---|"]
    lines += [f"| {method} | {value:.3f}x |" for method, value in means.items()]
    text = markdown(summary) + "\n\n" + "\n".join(lines) + "\n"
    records.with_suffix(".md").write_text(text)
    print(text)
    return summary


if __name__ == "__main__":
    main()
