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
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass, field

import torch

from lade.bench import (
    DATASETS,
    config_decoder,
    config_name,
    greedy_options,
    load_prompts,
    parse_config,
    plain_decoder,
)
from lade.data import left_pad, row_outputs
from lade.decoding import LookaheadDecoder, default_pad_id
from lade.divergence import Divergence, compare, row_logits
from lade.divergence import summarize as summarize_divergences
from lade.model import load_model


@dataclass
class Records:
    """One method at one batch size: per batch seconds, new tokens, row steps, row outputs."""

    seconds: list[float] = field(default_factory=list)
    new_tokens: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    overhead: list[float] = field(default_factory=list)
    outputs: list[list[int]] = field(default_factory=list)
    reference_logits: list = field(default_factory=list)  # HF greedy only: each row's logits per new token
    divergences: list[Divergence] = field(default_factory=list)  # each row against HF greedy's


def build_methods(
    model, names: list[str], configs, eos: list[int], pad: int, max_new_tokens: int, latency=None
):
    """name -> callable(ids [B, T], mask [B, T]) returning (row outputs, row steps, share of step time
    outside the forward, each row's logits per new token or None). HF greedy returns its logits
    (``output_logits``), the reference for `lade.divergence`."""

    options = {**greedy_options(model, max_new_tokens, eos), "pad_token_id": pad}

    def hf(ids, mask):
        out = model.generate(
            ids.to(model.device),
            attention_mask=mask.to(model.device),
            return_dict_in_generate=True,
            output_logits=True,
            **options,
        )
        rows = row_outputs(out.sequences, ids.shape[1], eos, max_new_tokens)
        return rows, float("nan"), float("nan"), [row_logits(out.logits, b) for b in range(len(rows))]

    def lookahead(decoder: LookaheadDecoder):
        def call(ids, mask):
            res = decoder.generate(ids, attention_mask=mask, **options)
            outputs = row_outputs(res.sequences, ids.shape[1], eos, max_new_tokens)
            return outputs, res.metrics.steps, res.metrics.overhead_fraction, None

        return call

    unknown = sorted(set(names) - {"auto"})
    if unknown:
        raise ValueError(f"unknown methods {unknown}; only 'auto' (HF greedy and the plain loop always run)")
    methods = {"hf_greedy": hf, "plain_loop": lookahead(plain_decoder(model))}
    if "auto" in names:
        methods["auto"] = lookahead(LookaheadDecoder(model, latency=latency))
    for config in configs:
        methods[config_name(config)] = lookahead(config_decoder(model, *config))
    return methods


def run(methods: dict, prompts: list[torch.Tensor], batch_sizes: list[int], pad: int) -> dict:
    """(B, method) -> Records, the methods rotating from batch to batch."""
    records = {}
    names = list(methods)
    started = time.perf_counter()
    for size in batch_sizes:
        batches = [left_pad(prompts[i : i + size], pad) for i in range(0, len(prompts) - size + 1, size)]
        for name in names:  # warm-up at this batch size (allocations, calibration)
            methods[name](*batches[0])
            records[size, name] = Records()
        for i, (ids, mask) in enumerate(batches):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                t0 = time.perf_counter()
                outputs, steps, overhead, logits = methods[name](ids, mask)
                r = records[size, name]
                r.seconds.append(time.perf_counter() - t0)
                r.new_tokens.append(sum(map(len, outputs)))
                r.steps.append(steps)
                r.overhead.append(overhead)
                r.outputs += outputs
                r.reference_logits += logits or []
            reference = records[size, "hf_greedy"]
            first = len(reference.outputs) - ids.shape[0]  # this batch's rows
            for name in names:  # each row against HF greedy's, the margin from HF greedy's logits
                r = records[size, name]
                r.divergences += [
                    compare(reference.outputs[k], reference.reference_logits[k], r.outputs[k])
                    for k in range(first, len(reference.outputs))
                ]
            print(
                f"B={size} batch {i + 1}/{len(batches)} done ({time.perf_counter() - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    return records


def summarize(records: dict) -> list[dict]:
    rows = []
    for (size, name), r in records.items():
        hf, plain = records[size, "hf_greedy"], records[size, "plain_loop"]
        total = sum(r.seconds)
        divergence = summarize_divergences(r.divergences)
        rows.append(
            {
                "batch_size": size,
                "method": name,
                "rows": len(r.outputs),
                "new_tokens": sum(r.new_tokens),
                "tokens_per_s": sum(r.new_tokens) / total,
                "compression": sum(r.new_tokens) / sum(r.steps) if name != "hf_greedy" else float("nan"),
                "vs_hf_total": sum(hf.seconds) / total,
                "vs_hf_median": statistics.median(h / t for h, t in zip(hf.seconds, r.seconds, strict=True)),
                "vs_plain_total": sum(plain.seconds) / total,
                "vs_plain_median": statistics.median(
                    p / t for p, t in zip(plain.seconds, r.seconds, strict=True)
                ),
                "outside_forward": statistics.median(r.overhead),
                "identical_to_hf": sum(o == h for o, h in zip(r.outputs, hf.outputs, strict=True)),
                "near_tie": divergence["near_tie"],
                "worst_margin": divergence["worst_margin"],
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
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in sorted(rows, key=lambda r: r["batch_size"]):
        compression = "-" if r["method"] == "hf_greedy" else f"{r['compression']:.3f}"
        lines.append(
            f"| {r['batch_size']} | {r['method']} | {r['tokens_per_s']:.1f} "
            f"| {r['vs_hf_total']:.3f}x / {r['vs_hf_median']:.3f}x "
            f"| {r['vs_plain_total']:.3f}x / {r['vs_plain_median']:.3f}x | {compression} "
            f"| {'-' if r['method'] == 'hf_greedy' else format(r['outside_forward'], '.1%')} "
            f"| {r['identical_to_hf']}/{r['rows']} | {r['near_tie']} "
            f"| {'-' if math.isnan(r['worst_margin']) else format(r['worst_margin'], '.3f')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2", help="built-in name, local path or hub id")
    parser.add_argument("--dataset", default="humaneval", help=f"one of {', '.join(DATASETS)}")
    parser.add_argument("--limit", type=int, default=16, help="first LIMIT prompts (a multiple of each B)")
    parser.add_argument("--batch-sizes", default="1,2,4,8,16", help="comma list of batch sizes")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument(
        "--methods", default="auto", help="'auto' or '' (HF greedy and the plain loop always run)"
    )
    parser.add_argument("--config", type=parse_config, action="append", default=[], help="W,N,G (repeatable)")
    parser.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--spec-bench", default="../shared/data/spec_bench/question.jsonl")
    parser.add_argument("--json", default=None, help="also write the rows and crossovers to this JSON file")
    args = parser.parse_args(argv)
    sizes = [int(b) for b in args.batch_sizes.split(",") if b]
    if not sizes or min(sizes) < 1 or any(args.limit % b for b in sizes):
        parser.error(f"--batch-sizes must be >= 1 and divide --limit {args.limit}, got {sizes}")

    model, tokenizer = load_model(
        args.model, dtype=args.dtype, device=args.device, attn_implementation=args.attn
    )
    prompts = load_prompts(args.dataset, tokenizer, args.limit, args.spec_bench)
    if len(prompts) < args.limit:
        parser.error(f"{args.dataset} has only {len(prompts)} prompts, fewer than --limit {args.limit}")
    eos = model.generation_config.eos_token_id
    eos = [eos] if isinstance(eos, int) else list(eos or [])
    pad = default_pad_id(model, eos)
    names = [m for m in args.methods.split(",") if m]
    methods = build_methods(model, names, args.config, eos, pad, args.max_new_tokens)
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
