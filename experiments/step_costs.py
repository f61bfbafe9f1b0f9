"""Where auto's step time goes, beside what its planner priced: the forward time the latency curve
predicted (``DecodingMetrics.planned_s``), the step's measured wall time (``step_times_s``) and the
host work around the forward (``time_s`` stages: pool and plan, branch, verify, update, commit), and
the tokens each step was expected to commit (``planned_tokens``) against those it committed, per
method and per draft source chosen. The planner prices a step by its forward alone; this measures
what that leaves out (issue 17: the combination against its sources alone).

    python experiments/step_costs.py --dtype bfloat16 --datasets summarization,humaneval --limit 3
    python experiments/step_costs.py --methods auto,auto_only_suffix_tree,plain_loop --split dev
    python experiments/step_costs.py --dtype float32 --latency CURVE.json --versus auto_only_suffix_tree

``--latency`` pins the curve every auto method plans with (a ``LatencyModel.to_dict`` JSON, or a
calibration cache file), instead of the one measured (or cached) for this model and machine. In
float32 every method's text is HF greedy's, so with one pinned curve the plans are a function of the
prompts alone: the tokens per second of *planned* forward time (``planned_tokens_per_s``: tokens
committed over the curve's price of the steps run) then compares the methods' decisions without
timing noise, and ``host_ms`` adds what the planner does not price. The curve used is written to
``latency_curve.json`` under ``--out`` either way; ``--versus`` adds each method's ratios to one
method's (``versus.csv``: ``planned_ratio`` with its 95% bootstrap interval over prompts,
``modelled_ratio`` with the host time, ``wall_ratio`` over the whole step as it ran).

Methods: ``auto`` (the default decoder, every draft source), ``auto_predicted_choice`` (the same,
always verifying the source of the highest predicted rate: no ``lade.policy_tally``),
``auto_only_{source}`` (auto's planner with one source: ``lookahead``, ``suffix_tree``,
``token_recycling``), ``auto_without_{source}`` (every source but that one), ``plain_loop`` (the
library's one-token loop), ``fixed_W_N_G`` (fixed W, N, G, e.g. the paper's ``fixed_7_5_7``; W=0: pool n-grams
only; ``lade.bench_methods.config_decoder``). They alternate per prompt after one warm-up call each.
Rows go to ``steps.csv`` (one per step: method, dataset, prompt, step, source, fed, committed,
planned_tokens, planned_s, step_s) and ``stages.csv`` (one per call: seconds per stage, and
``branch_steps``, the steps that ran the lookahead branch) under
``--out``; ``summary.md`` is rendered from them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd
import torch

from lade.bench_methods import SOURCE_SUBSETS, config_decoder, plain_decoder, source_subset_pool
from lade.bench_setup import SPEC_BENCH, add_model_flags, eos_ids, load_bench_model, load_prompts, split_list
from lade.calibration import LatencyModel
from lade.decoding import LookaheadDecoder
from lade.figures import markdown_table
from lade.machine import cpu_description
from lade.options import DRAFT_SOURCES
from lade.suite_report import bootstrap_throughput_ratio
from lade.types import STEP_STAGES

ROOT = Path(__file__).resolve().parents[1]


def build(name: str, model, latency: LatencyModel | None = None) -> LookaheadDecoder:
    """The decoder a method names (see the module docstring); auto ones plan with ``latency`` when
    given (else the curve measured, or cached, for the model)."""
    if name == "auto":
        return LookaheadDecoder(model, latency=latency)
    if name == "auto_predicted_choice":
        return LookaheadDecoder(model, latency=latency, follow_policies=False)
    if name == "plain_loop":
        return plain_decoder(model)
    pool = source_subset_pool(name)
    if pool is not None:
        return LookaheadDecoder(model, latency=latency, pool=pool)
    sizes = name.removeprefix("fixed_").split("_")
    if name.startswith("fixed_") and len(sizes) == 3 and all(size.isdigit() for size in sizes):
        return config_decoder(model, *(int(size) for size in sizes))
    raise ValueError(
        f"unknown method {name!r}; one of auto, auto_predicted_choice, plain_loop, fixed_W_N_G, "
        + ", ".join(f"{prefix}{source}" for prefix in SOURCE_SUBSETS for source in DRAFT_SOURCES)
    )


def load_curve(path: Path) -> LatencyModel:
    """A latency curve from ``path``: ``LatencyModel.to_dict``'s JSON, or a calibration cache file
    (the same under ``latency``)."""
    data = json.loads(path.read_text())
    return LatencyModel.from_dict(data.get("latency", data))


def step_rows(metrics, method: str, dataset: str, prompt: int) -> list[dict]:
    """One row per step of a call's metrics (``planned_s`` empty without a planner: the plain loop and
    fixed W, N, G; ``source`` is the draft source verified where auto has several, else
    ``one source`` or ``unplanned``)."""
    steps = len(metrics.step_times_s)
    planned = metrics.planned_s or [float("nan")] * steps
    expected = metrics.planned_tokens or [float("nan")] * steps
    sources = metrics.step_sources or ["unplanned" if not metrics.planned_s else "one source"] * steps
    return [
        {
            "method": method,
            "dataset": dataset,
            "prompt": prompt,
            "step": i,
            "source": sources[i],
            "fed": metrics.step_sizes[i],
            "committed": metrics.tokens_per_step[i],
            "planned_tokens": expected[i],
            "planned_s": planned[i],
            "step_s": metrics.step_times_s[i],
        }
        for i in range(steps)
    ]


def summary(steps: pd.DataFrame, stages: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and method: tokens/s over the steps, compression, fed per step, mean wall and planned
    forward ms per step, measured forward over planned, host ms per step (the stages but forward) and
    its share of the stages' time, each host stage's ms per step, and the tokens per second of the
    planned forward time alone (``planned_tokens_per_s``) and with the measured host time added
    (``modelled_tokens_per_s``); those two are empty for methods without a planner."""
    per_step = steps.groupby(["dataset", "method"]).agg(
        steps=("step_s", "size"),
        committed=("committed", "sum"),
        step_s=("step_s", "sum"),
        fed=("fed", "mean"),
        planned_ms=("planned_s", lambda s: 1000 * s.mean()),
        planned_s=("planned_s", lambda s: s.sum(min_count=1)),
    )
    stage_sums = stages.groupby(["dataset", "method"])[list(STEP_STAGES)].sum()
    table = per_step.join(stage_sums)
    table["tokens_per_s"] = table["committed"] / table["step_s"]
    table["compression"] = table["committed"] / table["steps"]
    table["step_ms"] = 1000 * table["step_s"] / table["steps"]
    table["forward_ms"] = 1000 * table["forward"] / table["steps"]
    table["forward_over_planned"] = table["forward_ms"] / table["planned_ms"]
    host = [stage for stage in STEP_STAGES if stage != "forward"]
    table["host_ms"] = 1000 * table[host].sum(axis=1) / table["steps"]
    table["host_share"] = table[host].sum(axis=1) / table[list(STEP_STAGES)].sum(axis=1)
    for stage in host:
        table[f"{stage}_ms"] = 1000 * table[stage] / table["steps"]
    table["planned_tokens_per_s"] = table["committed"] / table["planned_s"]
    table["modelled_tokens_per_s"] = table["committed"] / (table["planned_s"] + table[host].sum(axis=1))
    columns = ["steps", "tokens_per_s", "compression", "fed", "step_ms", "planned_ms", "forward_ms"]
    columns += ["forward_over_planned", "host_ms", "host_share", *(f"{stage}_ms" for stage in host)]
    columns += ["planned_tokens_per_s", "modelled_tokens_per_s"]
    return table[columns].round(3).reset_index()


def versus(table: pd.DataFrame, method: str, steps: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per dataset and method, ``summary``'s tokens per second over ``method``'s on the same dataset:
    over the whole step (``wall_ratio``), the planned forward alone (``planned_ratio``) and it with the
    measured host time (``modelled_ratio``). With ``steps``, ``planned_ratio``'s 95% bootstrap interval
    over the prompts both methods ran (``planned_ratio_ci_low``, ``_high``; ``lade.suite_report``)."""
    if method not in set(table["method"]):
        raise ValueError(f"--versus {method!r} is not among the methods run")
    base = table[table["method"] == method].set_index("dataset")
    ratios = table[["dataset", "method"]].copy()
    for column, rate in (
        ("wall_ratio", "tokens_per_s"),
        ("planned_ratio", "planned_tokens_per_s"),
        ("modelled_ratio", "modelled_tokens_per_s"),
    ):
        ratios[column] = (table[rate] / table["dataset"].map(base[rate])).round(3)
    if steps is not None:
        calls = steps.groupby(["dataset", "method", "prompt"])[["committed", "planned_s"]].sum(min_count=1)
        pairs = ratios[["dataset", "method"]].values
        intervals = [planned_interval(calls.loc[dataset], name, method) for dataset, name in pairs]
        ratios[["planned_ratio_ci_low", "planned_ratio_ci_high"]] = pd.DataFrame(intervals).round(3).values
    return ratios


def planned_interval(sums: pd.DataFrame, method: str, base: str) -> tuple[float, float]:
    """95% bootstrap interval over prompts of ``method``'s planned tokens per second over ``base``'s,
    from one dataset's per-call ``sums`` (index method, prompt; columns committed, planned_s): the
    prompts both ran; NaN without a planner's prices or under two prompts."""
    if method not in sums.index or base not in sums.index:
        return math.nan, math.nan
    paired = sums.loc[method].join(sums.loc[base], rsuffix="_base", how="inner").dropna()
    return bootstrap_throughput_ratio(
        paired["committed"], paired["planned_s"], paired["committed_base"], paired["planned_s_base"]
    )


def by_source(steps: pd.DataFrame) -> pd.DataFrame:
    """Per dataset, method and the source each step verified (planned steps only): steps, fed, tokens
    committed against the tokens planned, wall ms against planned ms."""
    auto = steps[steps["planned_s"].notna()]
    table = auto.groupby(["dataset", "method", "source"]).agg(
        steps=("step_s", "size"),
        fed=("fed", "mean"),
        committed=("committed", "mean"),
        planned_tokens=("planned_tokens", "mean"),
        step_ms=("step_s", lambda s: 1000 * s.mean()),
        planned_ms=("planned_s", lambda s: 1000 * s.mean()),
    )
    table["committed_over_planned"] = table["committed"] / table["planned_tokens"]
    table["wall_over_planned"] = table["step_ms"] / table["planned_ms"]
    return table.round(3).reset_index()


def render(out: Path, header: str, versus_method: str | None = None) -> str:
    steps, stages = pd.read_csv(out / "steps.csv"), pd.read_csv(out / "stages.csv")
    table = summary(steps, stages)
    parts = [header, markdown_table(table), markdown_table(by_source(steps))]
    if versus_method is not None:
        ratios = versus(table, versus_method, steps)
        ratios.to_csv(out / "versus.csv", index=False)
        parts.append(f"Tokens per second over {versus_method}'s (`versus.csv`):\n\n{markdown_table(ratios)}")
    text = "\n\n".join(parts)
    (out / "summary.md").write_text(text + "\n")
    return text


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_model_flags(parser)
    parser.add_argument("--datasets", default="summarization,humaneval")
    parser.add_argument("--methods", default="auto,auto_only_suffix_tree,auto_only_lookahead,plain_loop")
    parser.add_argument("--split", default="dev", choices=["dev", "test"])
    parser.add_argument("--limit", type=int, default=3, help="prompts per dataset")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--spec-bench", default=SPEC_BENCH, help="Spec-Bench question.jsonl")
    parser.add_argument("--out", type=Path, default=ROOT / "experiments" / "results" / "step_costs")
    parser.add_argument("--latency", type=Path, help="the latency curve every auto method plans with")
    parser.add_argument("--versus", help="a method whose tokens per second the others are divided by")
    args = parser.parse_args(argv)
    methods = split_list(args.methods)
    if args.versus is not None and args.versus not in methods:
        parser.error(f"--versus {args.versus!r} is not one of --methods")

    model, tokenizer = load_bench_model(args)
    latency = load_curve(args.latency) if args.latency is not None else None
    decoders = {name: build(name, model, latency) for name in methods}
    eos = eos_ids(model)
    steps, stages = [], []
    with torch.inference_mode():
        for dataset in split_list(args.datasets):
            prompts = load_prompts(dataset, tokenizer, args.limit, args.spec_bench, args.split)
            for decoder in decoders.values():  # warm-up (and the latency curve, measured once)
                decoder.generate(prompts[0], max_new_tokens=16, eos_token_id=eos)
            for i, ids in enumerate(prompts):
                for name in methods[i % len(methods) :] + methods[: i % len(methods)]:
                    out = decoders[name].generate(ids, max_new_tokens=args.max_new_tokens, eos_token_id=eos)
                    steps += step_rows(out.metrics, name, dataset, i)
                    stages.append(
                        {
                            "method": name,
                            "dataset": dataset,
                            "prompt": i,
                            **out.metrics.time_s,
                            "branch_steps": out.metrics.branch_steps,
                        }
                    )
                args.out.mkdir(parents=True, exist_ok=True)  # written per prompt: a killed run keeps them
                pd.DataFrame(steps).to_csv(args.out / "steps.csv", index=False)
                pd.DataFrame(stages).to_csv(args.out / "stages.csv", index=False)
                print(f"{dataset} prompt {i + 1}/{len(prompts)}", file=sys.stderr, flush=True)
    curves = [decoder.latency for decoder in decoders.values() if decoder.latency is not None]
    if curves:  # the curve the auto methods planned with (the same for all of them)
        (args.out / "latency_curve.json").write_text(json.dumps(curves[0].to_dict(), indent=1) + "\n")
    command = "python experiments/step_costs.py " + " ".join(argv if argv is not None else sys.argv[1:])
    header = f"# Step costs\n\n`{command}` ({args.split} split). Machine: {cpu_description()}."
    return render(args.out, header, args.versus)


if __name__ == "__main__":
    print(main())
