"""Benchmark: HF ``generate`` greedy vs the library's plain loop vs lookahead, alternating per prompt.

    python -m lade.bench --model smollm2 --limit 20 --max-new-tokens 128 --config 7,5,7 --config 5,4,5

For every prompt, every method runs once (after one untimed warm-up run of each), in an order that
rotates from prompt to prompt so that machine noise hits all methods alike. Per method it prints the
compression ratio (total new tokens / total steps), tokens/s (total new tokens / total time),
speedup over HF greedy and over the plain loop as the ratio of total times and as the median of
per-prompt time ratios, the share of step time spent outside the model forward, and how many outputs
are identical to HF greedy.
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

from lade.data import humaneval_prompts
from lade.decoding import LookaheadDecoder
from lade.model import load_model
from strategies.plain import AutoregressiveProposer


@dataclass
class MethodStats:
    """Per-prompt records of one method."""

    name: str
    seconds: list[float] = field(default_factory=list)
    new_tokens: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    overhead: list[float] = field(default_factory=list)
    outputs: list[list[int]] = field(default_factory=list)


def parse_config(text: str) -> tuple[int, int, int]:
    """'W,N,G' -> (W, N, G)."""
    try:
        window, ngram, guess = (int(part) for part in text.split(","))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"--config takes W,N,G (three integers), got {text!r}") from err
    return window, ngram, guess


def build_methods(model, configs, eos, max_new_tokens):
    """name -> callable(input_ids) returning (new token list, steps, overhead fraction)."""

    def hf_greedy(ids):
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=max_new_tokens,
            eos_token_id=eos,
            pad_token_id=eos[0] if eos else None,
            top_p=None,
            top_k=None,
            temperature=None,
        )
        new = out[0, ids.shape[1] :].tolist()
        return new, len(new), float("nan")

    def decoder_method(decoder):
        def call(ids):
            res = decoder.generate(ids, max_new_tokens=max_new_tokens, eos_token_id=eos)
            return res.sequences[0, ids.shape[1] :].tolist(), res.metrics.steps, res.metrics.overhead_fraction

        return call

    methods = {"hf_greedy": hf_greedy}
    methods["plain_loop"] = decoder_method(
        LookaheadDecoder(model, window=1, ngram=2, guess=0, proposer=AutoregressiveProposer())
    )
    for window, ngram, guess in configs:
        methods[f"lookahead W={window} N={ngram} G={guess}"] = decoder_method(
            LookaheadDecoder(model, window=window, ngram=ngram, guess=guess)
        )
    return methods


def summarize(stats: dict[str, MethodStats]) -> list[dict]:
    """One row per method with the figures the module docstring lists."""
    reference = stats["hf_greedy"]
    plain = stats["plain_loop"]
    rows = []
    for name, s in stats.items():
        total_new, total_time = sum(s.new_tokens), sum(s.seconds)
        rows.append(
            {
                "method": name,
                "prompts": len(s.seconds),
                "new_tokens": total_new,
                "compression": total_new / sum(s.steps) if sum(s.steps) else float("nan"),
                "tokens_per_s": total_new / total_time,
                "speedup_vs_hf_total": sum(reference.seconds) / total_time,
                "speedup_vs_hf_median": statistics.median(
                    r / t for r, t in zip(reference.seconds, s.seconds, strict=True)
                ),
                "speedup_vs_plain_total": sum(plain.seconds) / total_time,
                "speedup_vs_plain_median": statistics.median(
                    p / t for p, t in zip(plain.seconds, s.seconds, strict=True)
                ),
                "overhead_outside_forward": statistics.median(s.overhead)
                if name != "hf_greedy"
                else float("nan"),
                "identical_to_hf": sum(o == r for o, r in zip(s.outputs, reference.outputs, strict=True)),
            }
        )
    return rows


def _percent(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.1%}"


def format_table(rows: list[dict]) -> str:
    """Markdown table of ``summarize`` rows."""
    head = (
        "method",
        "compression",
        "tok/s",
        "vs HF (sum)",
        "vs HF (median)",
        "vs plain (sum)",
        "vs plain (median)",
        "outside forward",
        "identical",
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append(
            f"| {r['method']} | {r['compression']:.3f} | {r['tokens_per_s']:.1f} "
            f"| {r['speedup_vs_hf_total']:.3f}x "
            f"| {r['speedup_vs_hf_median']:.3f}x | {r['speedup_vs_plain_total']:.3f}x "
            f"| {r['speedup_vs_plain_median']:.3f}x | {_percent(r['overhead_outside_forward'])} "
            f"| {r['identical_to_hf']}/{r['prompts']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2", help="built-in name, local path or hub id")
    parser.add_argument("--limit", type=int, default=20, help="first LIMIT HumanEval problems")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--config", type=parse_config, action="append", help="W,N,G (repeatable)")
    parser.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--json", default=None, help="also write the summary rows to this JSON file")
    args = parser.parse_args(argv)
    configs = args.config or [(7, 5, 7), (5, 4, 5), (15, 5, 15)]
    if args.threads:
        torch.set_num_threads(args.threads)

    model, tokenizer = load_model(args.model, attn_implementation=args.attn)
    if tokenizer is None:
        raise ValueError(f"model {args.model!r} has no tokenizer; the benchmark needs text prompts")
    eos = model.generation_config.eos_token_id
    eos = [eos] if isinstance(eos, int) else list(eos or [])
    prompts = [tokenizer(text, return_tensors="pt").input_ids for text in humaneval_prompts(args.limit)]
    methods = build_methods(model, configs, eos, args.max_new_tokens)
    stats = {name: MethodStats(name) for name in methods}

    names = list(methods)
    for name in names:  # warm-up: first calls pay for allocations and lazy initialisation
        methods[name](prompts[0])
    started = time.perf_counter()
    for i, ids in enumerate(prompts):
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            t0 = time.perf_counter()
            new, steps, overhead = methods[name](ids)
            stats[name].seconds.append(time.perf_counter() - t0)
            stats[name].new_tokens.append(len(new))
            stats[name].steps.append(steps)
            stats[name].overhead.append(overhead)
            stats[name].outputs.append(new)
        print(f"prompt {i + 1}/{len(prompts)} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    rows = summarize(stats)
    print(
        f"model={args.model} prompts={len(prompts)} (HumanEval) max_new_tokens={args.max_new_tokens} "
        f"attn={args.attn} threads={torch.get_num_threads()} dtype={model.dtype}"
    )
    print(format_table(rows))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=2)
    return rows


if __name__ == "__main__":
    main()
