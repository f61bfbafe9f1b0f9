"""Beyond the paper: throughput vs batch size B, where batching and lookahead compete for the same
spare compute (``python -m lade.bench_batch``): HF batched greedy, the library's plain batched loop,
auto lookahead and W=0 N=3 G=1 (pool n-grams only), on left-padded batches of consecutive prompts.

    python experiments/batch_size.py            # SmolLM2, HumanEval, B = 1, 2, 4, 8
    python experiments/batch_size.py --quick

Reported per B and method: tokens/s of all rows, the ratio to HF batched greedy and to the plain loop,
compression (tokens per row per step) and rows identical to HF batched greedy; and the crossover, the
smallest B at which a lookahead method is no longer faster than plain batched decoding.
"""

from __future__ import annotations

import json

import pandas as pd

from lade.figures import (
    figure_setting,
    identical_counts,
    line_panels,
    markdown_table,
    repo_relative,
    run_command,
    write_outputs,
)


def run(setting, batch_sizes: str) -> tuple[pd.DataFrame, dict]:
    """Run the benchmark; one row per (B, method), and the crossovers."""
    out = setting.out / "bench_batch.json"
    data = [
        "--model",
        setting.model,
        "--dtype",
        setting.dtype,
        "--dataset",
        "synthetic" if setting.quick else "humaneval",
    ]
    sized = ["--limit", str(setting.limit), "--max-new-tokens", str(setting.max_new_tokens)]
    run_command(
        setting,
        [
            "-m",
            "lade.bench_batch",
            *data,
            *sized,
            "--batch-sizes",
            batch_sizes,
            "--config",
            "0,3,1",
            "--json",
            repo_relative(out),
        ],
    )
    results = json.loads(out.read_text())
    return pd.DataFrame(results["rows"]), results["crossovers"]


def main(argv: list[str] | None = None) -> None:
    setting, args = figure_setting(
        "batch_size",
        __doc__,
        limit=16,
        max_new_tokens=64,
        quick_limit=4,
        argv=argv,
        extra=lambda p: p.add_argument("--batch-sizes", default=None, help="comma list (full: 1,2,4,8,16)"),
    )
    table, crossing = run(setting, args.batch_sizes or ("1,2,4" if setting.quick else "1,2,4,8,16"))

    view = table.assign(identical=identical_counts(table["identical_to_hf"], table["rows"]))
    view = view[
        [
            "batch_size",
            "method",
            "tokens_per_s",
            "vs_hf_total",
            "vs_plain_total",
            "compression",
            "outside_forward",
            "identical",
        ]
    ]
    markdown = markdown_table(
        view,
        {
            "tokens_per_s": ".1f",
            "vs_hf_total": ".3f",
            "vs_plain_total": ".3f",
            "compression": ".3f",
            "outside_forward": ".1%",
        },
    )
    figure = line_panels(
        table,
        "batch_size",
        [
            ("tokens_per_s", "tokens/s, all rows"),
            ("vs_plain_total", "throughput over the plain batched loop"),
        ],
        by="method",
        xlabel="batch size B",
        title=setting.title(f"Batch size, {setting.limit} prompts x {setting.max_new_tokens} new tokens"),
    )
    notes = [
        "Crossover (first B where the method is not faster than the faster of HF batched greedy and the "
        "plain loop): "
        + ", ".join(f"{name}: {'B=' + str(b) if b else 'none measured'}" for name, b in crossing.items()),
        "Batches are static: a batch runs until its slowest row is done.",
    ]
    write_outputs(setting, table, "Throughput vs batch size", markdown, figure, notes)


if __name__ == "__main__":
    main()
