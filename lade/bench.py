"""Benchmark: HF ``generate`` greedy, HF prompt lookup, the library's plain loop and lookahead
(auto and fixed W, N, G), alternating per prompt, on one or more datasets.

    python -m lade.bench --dataset humaneval,mt_bench,gsm8k,summarization --limit 20 --max-new-tokens 128
    python -m lade.bench --dataset humaneval --config 7,5,7 --config 5,4,5      # fixed configurations too
    python -m lade.bench --config 0,5,3   # W=0: no lookahead branch, verify prompt/output n-grams only
    python -m lade.bench --prompt-lookup-tokens 3,10   # HF prompt lookup at two K: two methods, K in the name

For every prompt, every method runs once (after one untimed warm-up run of each), in an order that
rotates from prompt to prompt so that machine noise hits all methods alike. Per method it prints the
compression ratio (total new tokens / total decoding steps; for HF methods the model's forward calls,
the prefill included since it yields the first token), tokens/s (total new tokens / total time),
speedup over HF greedy and over the plain loop as the ratio of total times and as the median of
per-prompt time ratios, the share of step time spent outside the model forward, how many
outputs are identical to HF greedy, how many of the others first diverge at a near-tie, and the worst
margin at a first divergence (`lade.divergence`: HF greedy's logit for its token minus its logit for
the other's; in float32 every output is identical, in bfloat16 divergences should all be near-ties).
Each row also carries the run's facts: model, dtype, dataset, the machine (CPU and flags, or GPU), the
seconds ``load_model`` took, the resident memory after loading and the process's peak so far (MiB; a
fresh process per model and dtype gives each its own peak, as ``experiments/real_models.py`` runs it).
Datasets: ``humaneval`` (raw prompt text), Spec-Bench's ``mt_bench`` (its 8 MT-Bench categories, taken
in turn so that any ``--limit`` >= 8 covers all of them),
``gsm8k`` (its ``math_reasoning``), ``summarization``, ``translation``, ``qa``, ``rag`` (chat template);
``synthetic``: random and repetitive token ids, for the tiny random models (no tokenizer).

This module is the one-prompt front-end of the benchmark family: its command line, its methods' one-
prompt form, its rows and table. What it shares with ``lade.bench_batch`` lives in ``lade.bench_setup``
(flags, datasets, prompts, model), ``lade.bench_methods`` (the methods and their decoders),
``lade.bench_timing`` (records, rotating rounds, divergences) and ``lade.bench_report`` (speedups,
agreement, table cells). It reaches decoders only through those, never into their internals.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from lade.bench_methods import (
    ForwardCounter,
    auto_decoder,
    auto_span_name,
    config_decoder,
    config_name,
    decoder_method,
    first_row,
    greedy_options,
    hf_method,
    plain_decoder,
    prompt_lookup_name,
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
from lade.data import SPLITS
from lade.machine import cpu_description
from lade.process_memory import peak_rss_mib, rss_mib

METHODS = ("hf_greedy", "hf_prompt_lookup", "plain_loop", "auto")


def one_prompt(method):
    """A ``lade.bench_methods`` method as a one-prompt one: ``ids [1, T] -> (new tokens, steps,
    overhead, logits)``, the logits one ``[V]`` tensor per new token (HF greedy) or None."""

    def call(ids: torch.Tensor):
        rows, steps, overhead, logits = method(ids, torch.ones_like(ids))
        return rows[0], steps, overhead, None if logits is None else logits[0]

    return call


def _as_rows(method):
    """A one-prompt method as a one-row ``lade.bench_timing`` method (rows, steps, overhead, logits)."""

    def call(ids: torch.Tensor):
        new, steps, overhead, logits = method(ids)
        return [new], steps, overhead, None if logits is None else [logits]

    return call


def build_methods(
    model, names, configs, eos, max_new_tokens, prompt_lookup_tokens=10, latency=None, auto_spans=()
):
    """name -> callable(input_ids [1, T]) returning (new token list, steps, overhead fraction, the raw
    logits of each new token or None). HF greedy returns its logits (``output_logits``: the tensors
    ``generate`` computes anyway), the reference for `lade.divergence`. HF greedy and the plain loop
    always come first, then ``names`` (of ``METHODS``), ``auto_spans``, ``configs``.

    ``prompt_lookup_tokens``: HF's ``prompt_lookup_num_tokens`` K, an int or a list; with more than
    one K, ``hf_prompt_lookup`` becomes one method per K, named ``hf_prompt_lookup K=3`` etc.
    ``auto_spans``: auto beside the default with its pool's text continuations of S tokens instead
    of ``AUTO_SPAN`` (``S = AUTO_NGRAM - 1``: candidates as long as the branch's), one method per S,
    named ``auto span=S``: the candidate-length ablation. ``configs``: fixed (W, N, G), each named
    ``lookahead W= N= G=``."""
    single = isinstance(prompt_lookup_tokens, int)
    lookup_ks = [prompt_lookup_tokens] if single else list(prompt_lookup_tokens)
    if not lookup_ks or any(k < 1 for k in lookup_ks):
        raise ValueError(f"prompt lookup K must be positive integers, got {prompt_lookup_tokens!r}")
    counter = ForwardCounter(model)  # HF steps = forward calls
    options = greedy_options(model, max_new_tokens, eos)

    def hf(**extra):
        return one_prompt(hf_method(model, options, first_row, counter, **extra))

    def lookahead(decoder):
        return one_prompt(decoder_method(decoder, options, first_row))

    available = {
        "hf_greedy": lambda: hf(keep_logits=True),
        "hf_prompt_lookup": lambda: hf(prompt_lookup_num_tokens=lookup_ks[0]),
        "plain_loop": lambda: lookahead(plain_decoder(model)),
        "auto": lambda: lookahead(auto_decoder(model, latency)),
    }
    unknown = sorted(set(names) - set(available))
    if unknown:
        raise ValueError(f"unknown methods {unknown}; choose from {sorted(available)}")
    methods = {}
    for name in ("hf_greedy", "plain_loop", *names):
        if name == "hf_prompt_lookup" and len(lookup_ks) > 1:
            methods.update({prompt_lookup_name(k): hf(prompt_lookup_num_tokens=k) for k in lookup_ks})
        elif name:
            methods[name] = available[name]()
    for span in auto_spans:
        methods[auto_span_name(span)] = lookahead(auto_decoder(model, latency, span))
    for config in configs:
        methods[config_name(config)] = lookahead(config_decoder(model, *config))
    return methods


def run(
    methods: dict, prompts: list[torch.Tensor], label: str = "", warmup: torch.Tensor | None = None
) -> dict[str, MethodRecords]:
    """Every method of ``build_methods``'s kind on every prompt [1, T], rotating the order per prompt,
    after one warm-up run each on ``warmup`` (default: the first prompt). A warm-up prompt outside
    the timed ones keeps what a decoder learns across calls (auto's acceptance records) from being
    learnt on a timed prompt. Method name -> its records (one call and one output row per prompt)."""
    warmup = prompts[0] if warmup is None else warmup
    as_rows = {name: _as_rows(method) for name, method in methods.items()}
    return time_rounds(as_rows, [(ids,) for ids in prompts], (warmup,), f"{label} prompt")


def summarize(stats: dict[str, MethodRecords]) -> list[dict]:
    """One row per method with the figures the module docstring lists."""
    reference, plain = stats[REFERENCE], stats["plain_loop"]
    rows = []
    for name, s in stats.items():
        total_new, total_time = sum(s.new_tokens), sum(s.seconds)
        vs_hf, vs_hf_median = speedups(reference, s)
        vs_plain, vs_plain_median = speedups(plain, s)
        identical, near_tie, worst_margin = agreement(reference, s)
        rows.append(
            {
                "method": name,
                "prompts": len(s.seconds),
                "new_tokens": total_new,
                "compression": total_new / sum(s.steps) if sum(s.steps) else float("nan"),
                "tokens_per_s": total_new / total_time,
                "speedup_vs_hf_total": vs_hf,
                "speedup_vs_hf_median": vs_hf_median,
                "speedup_vs_plain_total": vs_plain,
                "speedup_vs_plain_median": vs_plain_median,
                "overhead_outside_forward": statistics.median(s.overhead)
                if name != REFERENCE
                else float("nan"),
                "identical_to_hf": identical,
                "near_tie": near_tie,
                "worst_margin": worst_margin,
            }
        )
    return rows


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
        "near-tie",
        "worst margin",
    )
    lines = [
        f"| {r['method']} | {r['compression']:.3f} | {r['tokens_per_s']:.1f} "
        f"| {r['speedup_vs_hf_total']:.3f}x "
        f"| {r['speedup_vs_hf_median']:.3f}x | {r['speedup_vs_plain_total']:.3f}x "
        f"| {r['speedup_vs_plain_median']:.3f}x | {percent_cell(r['overhead_outside_forward'])} "
        f"| {r['identical_to_hf']}/{r['prompts']} | {r['near_tie']} | {margin_cell(r['worst_margin'])} |"
        for r in rows
    ]
    return markdown_table(head, lines)


def main(argv: list[str] | None = None) -> dict[str, list[dict]]:
    """The command line (see the module docstring): dataset -> its ``summarize`` rows, each with the
    run's facts (model, dtype, machine, load time, memory)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_model_flags(parser)  # --model, --attn, --dtype, --device
    parser.add_argument("--dataset", default="humaneval", help=f"comma list of {', '.join(DATASETS)}")
    parser.add_argument("--limit", type=int, default=20, help="first LIMIT prompts of each dataset")
    parser.add_argument(
        "--split",
        default="all",
        choices=SPLITS,
        help="prompts of this split (lade.data: the first quarter of each category is dev, the rest "
        "test; all: every prompt); with test, the warm-up runs on the first dev prompt",
    )
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument(
        "--methods", default="hf_prompt_lookup,auto", help=f"comma list of {', '.join(METHODS)} ('' for none)"
    )
    parser.add_argument(
        "--config", type=parse_config, action="append", default=[], help="W,N,G (repeatable; W=0: no branch)"
    )
    parser.add_argument(
        "--prompt-lookup-tokens",
        type=parse_ints,
        default=[10],
        help="HF prompt_lookup_num_tokens K; a comma list runs one method per K",
    )
    parser.add_argument(
        "--auto-span",
        type=parse_ints,
        default=[],
        help="also auto with its pool's text continuations of S tokens (comma list; one method each)",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--spec-bench", default=SPEC_BENCH)
    parser.add_argument("--json", default=None, help="also write the summary rows to this JSON file")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    datasets, names = split_list(args.dataset), split_list(args.methods)

    started = time.perf_counter()
    model, tokenizer = load_bench_model(args)
    run_facts = {
        "model": args.model,
        "dtype": str(model.dtype).removeprefix("torch."),
        "load_seconds": time.perf_counter() - started,
        "rss_after_load_mib": rss_mib(),
        "machine": torch.cuda.get_device_name(model.device)
        if model.device.type == "cuda"
        else cpu_description(),
    }
    prompt_sets = {d: load_prompts(d, tokenizer, args.limit, args.spec_bench, args.split) for d in datasets}
    warmups = {  # on the test split, warm up on a prompt no timed call sees
        d: load_prompts(d, tokenizer, 1, args.spec_bench, "dev")[0]
        if args.split == "test" and d != "synthetic"
        else None
        for d in datasets
    }
    methods = build_methods(
        model,
        names,
        args.config,
        eos_ids(model),
        args.max_new_tokens,
        args.prompt_lookup_tokens,
        auto_spans=args.auto_span,
    )

    results = {}
    for dataset, prompts in prompt_sets.items():
        rows = [
            {**run_facts, "dataset": dataset, "split": args.split, **row, "peak_rss_mib": peak_rss_mib()}
            for row in summarize(run(methods, prompts, dataset, warmups[dataset]))
        ]
        print(
            f"\n{dataset} ({args.split}): model={args.model} prompts={len(prompts)} "
            f"max_new_tokens={args.max_new_tokens} "
            f"attn={args.attn} device={args.device} ({run_facts['machine']}) dtype={model.dtype} "
            f"prompt_lookup_K={','.join(map(str, args.prompt_lookup_tokens))} "
            f"load={run_facts['load_seconds']:.1f}s rss_after_load={run_facts['rss_after_load_mib']:.0f}MiB "
            f"peak_rss={peak_rss_mib():.0f}MiB"
        )
        print(format_table(rows), flush=True)
        results[dataset] = rows
        if args.json:  # after every dataset: a run killed later keeps what it measured
            with open(args.json, "w") as handle:
                json.dump(results, handle, indent=2)
    return results


if __name__ == "__main__":
    main()
