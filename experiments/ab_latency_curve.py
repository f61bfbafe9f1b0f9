"""A/B: auto planning with the latency curve as measured vs the same curve made non-decreasing (how
``lade.calibration.LatencyModel.from_measurements`` smoothed it before calibration format 3).

    MKL_CBWR=AUTO python experiments/ab_latency_curve.py --model qwen2.5-coder-1.5b --dtype float32 \\
        --datasets translation,qa,math_reasoning --limit 3 \\
        --out experiments/results/ab_latency_curve/qwen15_fp32_dev

On some CPUs more tokens per step can cost less (float32 MKL on an AVX512 EPYC: odd row counts are
dearer than the even ones around them, 3 tokens dearer than 4 to 12). A non-decreasing curve prices
every size after a dear one at the dear one's cost, so auto verified less than paid. Both arms use one
curve, measured once (``decoder.calibrate()``, cached): ``auto`` and ``auto_combined`` (every draft
source, as in ``experiments/draft_ablation.py``) plan with it as measured, ``auto_nondecreasing`` and
``auto_combined_nondecreasing`` with its running maximum. Methods alternate per prompt beside HF
greedy (``lade.suite.run_suite``: resumable, every output compared with HF greedy's). Writes
``records.csv``, ``summary.csv``, ``versus.csv`` (each measured-curve arm paired against the others)
and ``summary.md`` (with both curves' first sizes) under ``--out``. Development-split prompts by
default: this is the check a planner change is made on, not a reported result.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd

from lade.bench_methods import greedy_options
from lade.bench_setup import SPEC_BENCH, add_model_flags, eos_ids, load_bench_model, load_prompts, warmup_ids
from lade.calibration import LatencyModel
from lade.decoding import LookaheadDecoder
from lade.machine import cpu_description
from lade.suite import decoder_call, hf_call, run_suite
from lade.suite_report import markdown, summarize, versus, versus_markdown

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
from draft_ablation import every_source  # noqa: E402  (the ablation's pool of every source)

SHOWN_SIZES = 16  # the curve's sizes written to summary.md


def nondecreasing(curve: LatencyModel | None) -> LatencyModel | None:
    """``curve`` (and its longer-context curve) with each size priced at the most any size up to it
    costs: the smoothing calibration applied before format 3."""
    if curve is None:
        return None
    seconds, most = [], 0.0
    for value in curve.seconds:
        most = max(most, value)
        seconds.append(most)
    return replace(curve, seconds=tuple(seconds), longer=nondecreasing(curve.longer))


def curve_table(measured: LatencyModel, smoothed: LatencyModel) -> str:
    """Markdown: ms and cost relative to one token of the first ``SHOWN_SIZES`` sizes of both curves
    (the shorter context's)."""
    rows = [
        "| S | measured ms | measured / S=1 | non-decreasing ms | non-decreasing / S=1 |",
        "|---|---|---|---|---|",
    ]
    sizes = zip(measured.sizes, measured.seconds, smoothed.seconds, strict=True)
    for size, seconds, flat in list(sizes)[:SHOWN_SIZES]:
        rows.append(
            f"| {size} | {1000 * seconds:.0f} | {seconds / measured.seconds[0]:.2f} | {1000 * flat:.0f} "
            f"| {flat / smoothed.seconds[0]:.2f} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_model_flags(parser)
    parser.add_argument("--datasets", default="translation,qa,math_reasoning")
    parser.add_argument("--split", default="dev", choices=["dev", "test"])
    parser.add_argument("--limit", type=int, default=3, help="prompts per dataset")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--out", type=Path, default=ROOT / "experiments" / "results" / "ab_latency_curve")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    model, tokenizer = load_bench_model(args)
    measured = LookaheadDecoder(model).calibrate()  # the cached curve of this model and machine
    smoothed = nondecreasing(measured)
    options = greedy_options(model, args.max_new_tokens, eos_ids(model))

    def auto(curve: LatencyModel, combined: bool):
        pool = every_source(6, 7, auto=True) if combined else None
        return decoder_call(LookaheadDecoder(model, latency=curve, pool=pool), options)

    methods = {
        "hf_greedy": hf_call(model, options, keep_logits=True),
        "auto_nondecreasing": auto(smoothed, combined=False),
        "auto": auto(measured, combined=False),
        "auto_combined_nondecreasing": auto(smoothed, combined=True),
        "auto_combined": auto(measured, combined=True),
    }
    datasets = args.datasets.split(",")
    prompts = {
        d: load_prompts(d, tokenizer, args.limit, str(ROOT / SPEC_BENCH), split=args.split) for d in datasets
    }
    dtype = str(model.dtype).removeprefix("torch.")
    labels = {"model": args.model, "dtype": dtype, "split": args.split}
    run_suite({d: methods for d in datasets}, prompts, args.out / "records.csv", labels, warmup_ids())
    records = pd.read_csv(args.out / "records.csv")
    summary = summarize(records)
    summary.to_csv(args.out / "summary.csv", index=False)
    paired = pd.concat([versus(records, m) for m in ("auto", "auto_combined")], ignore_index=True)
    paired.to_csv(args.out / "versus.csv", index=False)
    (args.out / "latency_curve.json").write_text(json.dumps(measured.to_dict(), indent=1) + "\n")
    (args.out / "summary.md").write_text(
        f"# Latency curve as measured vs made non-decreasing\n\n`python experiments/ab_latency_curve.py "
        f"{' '.join(argv)}` ({args.split} split, {args.max_new_tokens} new tokens). "
        f"Machine: {cpu_description()}.\n\n"
        f"The curve (after 256 cached tokens; `latency_curve.json`):\n\n{curve_table(measured, smoothed)}\n\n"
        f"{markdown(summary)}\n\nPaired per prompt (`versus.csv`):\n\n{versus_markdown(paired)}\n"
    )
    return summary


if __name__ == "__main__":
    main()
