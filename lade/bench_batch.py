"""Batch-size benchmark: tokens/s of all rows vs batch size B, plain batched decoding against batched
lookahead, on the same prompts.

    python -m lade.bench_batch --dataset humaneval --limit 16 --batch-sizes 1,2,4,8,16 --config 0,3,1

For each B the first ``--limit`` prompts are cut into batches of B consecutive prompts (left-padded);
each batch runs through every method, in an order that rotates from batch to batch, after one untimed
warm-up per method and B. Methods: HF ``generate`` greedy on the padded batch (the reference for
identical outputs), the library's plain loop, auto lookahead, and fixed W,N,G configurations
(``--config``, W=0: no branch, pool n-grams only). Per B and method it prints tokens/s (new tokens of
all rows / wall time), the ratio to HF batched greedy and to the plain loop (ratios of total times,
and the median of per-batch ratios), the compression (tokens per row per step) and how many rows
equal HF's; then, per lookahead method, the crossover: the smallest B at which it is no longer faster
than plain batched decoding. As ``lade.bench``: for rows that differ from HF's, how many first
diverge at a near-tie and the worst margin there (``lade.divergence``; in bfloat16).

This module is the batch front-end of the benchmark family: its command line, its methods' batch
form (rows cut at their EOS), its rounds per batch size, rows, crossovers and table. What it shares
with ``lade.bench`` lives in ``lade.bench_setup``, ``lade.bench_methods``, ``lade.bench_timing`` and
``lade.bench_report``; it reaches decoders only through those, never into their internals.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from lade.bench_methods import (
    auto_decoder,
    config_decoder,
    config_name,
    decoder_method,
    greedy_options,
    hf_method,
    plain_decoder,
)
from lade.bench_report import agreement, margin_cell, markdown_table, percent_cell, speedups
from lade.bench_setup import (
    DATASETS,
    SPEC_BENCH,
    add_model_flags,
    eos_ids,
    load_bench_model,
    load_prompts,
    parse_config,
    parse_ints,
    split_list,
)
from lade.bench_timing import REFERENCE, MethodRecords, time_rounds
from lade.data import left_pad, row_outputs
from lade.decoding import default_pad_id


def build_methods(
    model, names: list[str], configs, eos: list[int], pad: int, max_new_tokens: int, latency=None
):
    """name -> callable(ids [B, T], mask [B, T]) returning (row outputs, row steps, share of step time
    outside the forward, each row's logits per new token or None). HF greedy returns its logits
    (``output_logits``), the reference for `lade.divergence`. Each row's output ends at its first EOS
    (``lade.data.row_outputs``: what follows is padding)."""

    options = {**greedy_options(model, max_new_tokens, eos), "pad_token_id": pad}

    def read_rows(sequences: torch.Tensor, prompt_width: int) -> list[list[int]]:
        return row_outputs(sequences, prompt_width, eos, max_new_tokens)

    unknown = sorted(set(names) - {"auto"})
    if unknown:
        raise ValueError(f"unknown methods {unknown}; only 'auto' (HF greedy and the plain loop always run)")
    methods = {
        "hf_greedy": hf_method(model, options, read_rows, keep_logits=True),
        "plain_loop": decoder_method(plain_decoder(model), options, read_rows),
    }
    if "auto" in names:
        methods["auto"] = decoder_method(auto_decoder(model, latency), options, read_rows)
    for config in configs:
        methods[config_name(config)] = decoder_method(config_decoder(model, *config), options, read_rows)
    return methods


def run(
    methods: dict, prompts: list[torch.Tensor], batch_sizes: list[int], pad: int
) -> dict[tuple[int, str], MethodRecords]:
    """(B, method) -> its records: for each B, the prompts [1, T_i] cut into left-padded batches of B
    consecutive prompts (a remainder short of B is dropped), the methods rotating from batch to batch
    after one warm-up each on the first batch."""
    records = {}
    started = time.perf_counter()
    for size in batch_sizes:
        batches = [left_pad(prompts[i : i + size], pad) for i in range(0, len(prompts) - size + 1, size)]
        timed = time_rounds(methods, batches, batches[0], f"B={size} batch", started)
        records.update({(size, name): r for name, r in timed.items()})
    return records


def summarize(records: dict[tuple[int, str], MethodRecords]) -> list[dict]:
    """One row per (B, method): tokens/s of all rows, speedups over HF batched greedy and the plain
    loop (ratio of totals, median of per-batch ratios), compression, outside-forward share, agreement."""
    rows = []
    for (size, name), r in records.items():
        hf, plain = records[size, REFERENCE], records[size, "plain_loop"]
        vs_hf, vs_hf_median = speedups(hf, r)
        vs_plain, vs_plain_median = speedups(plain, r)
        identical, near_tie, worst_margin = agreement(hf, r)
        rows.append(
            {
                "batch_size": size,
                "method": name,
                "rows": len(r.outputs),
                "new_tokens": sum(r.new_tokens),
                "tokens_per_s": sum(r.new_tokens) / sum(r.seconds),
                "compression": sum(r.new_tokens) / sum(r.steps) if name != REFERENCE else float("nan"),
                "vs_hf_total": vs_hf,
                "vs_hf_median": vs_hf_median,
                "vs_plain_total": vs_plain,
                "vs_plain_median": vs_plain_median,
                "outside_forward": statistics.median(r.overhead),
                "identical_to_hf": identical,
                "near_tie": near_tie,
                "worst_margin": worst_margin,
            }
        )
    return rows


def crossovers(rows: list[dict]) -> dict[str, int | None]:
    """Per lookahead method: the smallest batch size at which it is not faster than the faster of
    HF batched greedy and the plain loop (None: faster at every size measured)."""
    found = {}
    for name in dict.fromkeys(r["method"] for r in rows):
        if name in ("hf_greedy", "plain_loop"):
            continue
        sizes = sorted(
            r["batch_size"]
            for r in rows
            if r["method"] == name and min(r["vs_hf_total"], r["vs_plain_total"]) <= 1.0
        )
        found[name] = sizes[0] if sizes else None
    return found


def format_table(rows: list[dict]) -> str:
    """Markdown table of ``summarize`` rows, by batch size."""
    head = (
        "B",
        "method",
        "tok/s (all rows)",
        "vs HF batched (sum / median)",
        "vs plain loop (sum / median)",
        "compression",
        "outside forward",
        "identical",
        "near-tie",
        "worst margin",
    )
    lines = []
    for r in sorted(rows, key=lambda r: r["batch_size"]):
        hf = r["method"] == REFERENCE
        lines.append(
            f"| {r['batch_size']} | {r['method']} | {r['tokens_per_s']:.1f} "
            f"| {r['vs_hf_total']:.3f}x / {r['vs_hf_median']:.3f}x "
            f"| {r['vs_plain_total']:.3f}x / {r['vs_plain_median']:.3f}x "
            f"| {'-' if hf else format(r['compression'], '.3f')} "
            f"| {'-' if hf else percent_cell(r['outside_forward'])} "
            f"| {r['identical_to_hf']}/{r['rows']} | {r['near_tie']} | {margin_cell(r['worst_margin'])} |"
        )
    return markdown_table(head, lines)


def main(argv: list[str] | None = None) -> list[dict]:
    """The command line (see the module docstring): the ``summarize`` rows of every B and method."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_model_flags(parser)  # --model, --attn, --dtype, --device
    parser.add_argument("--dataset", default="humaneval", help=f"one of {', '.join(DATASETS)}")
    parser.add_argument("--limit", type=int, default=16, help="first LIMIT prompts (a multiple of each B)")
    parser.add_argument(
        "--batch-sizes", type=parse_ints, default="1,2,4,8,16", help="comma list of batch sizes"
    )
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument(
        "--methods", default="auto", help="'auto' or '' (HF greedy and the plain loop always run)"
    )
    parser.add_argument("--config", type=parse_config, action="append", default=[], help="W,N,G (repeatable)")
    parser.add_argument("--spec-bench", default=SPEC_BENCH)
    parser.add_argument("--json", default=None, help="also write the rows and crossovers to this JSON file")
    args = parser.parse_args(argv)
    sizes = args.batch_sizes
    if not sizes or min(sizes) < 1 or any(args.limit % b for b in sizes):
        parser.error(f"--batch-sizes must be >= 1 and divide --limit {args.limit}, got {sizes}")

    model, tokenizer = load_bench_model(args)
    prompts = load_prompts(args.dataset, tokenizer, args.limit, args.spec_bench)
    if len(prompts) < args.limit:
        parser.error(f"{args.dataset} has only {len(prompts)} prompts, fewer than --limit {args.limit}")
    eos = eos_ids(model)
    pad = default_pad_id(model, eos)
    methods = build_methods(model, split_list(args.methods), args.config, eos, pad, args.max_new_tokens)
    rows = summarize(run(methods, prompts, sizes, pad))
    crossing = crossovers(rows)
    print(
        f"\n{args.dataset}: model={args.model} prompts={len(prompts)} max_new_tokens={args.max_new_tokens} "
        f"attn={args.attn} device={args.device} threads={torch.get_num_threads()} dtype={model.dtype}"
    )
    print(format_table(rows))
    for name, size in crossing.items():
        print(f"crossover {name}: " + (f"B={size}" if size else f"none up to B={max(sizes)}"))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"rows": rows, "crossovers": crossing}, handle, indent=2)
    return rows


if __name__ == "__main__":
    main()
