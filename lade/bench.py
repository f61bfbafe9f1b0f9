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

from lade.data import MT_BENCH_CATEGORIES, SPLITS, encode, humaneval_prompts, load_spec_bench, load_synthetic
from lade.decoding import AUTO_GUESS, AUTO_NGRAM, LookaheadDecoder, default_pad_id, default_pool
from lade.divergence import Divergence, compare, row_logits
from lade.divergence import summarize as summarize_divergences
from lade.machine import cpu_description
from lade.model import load_model
from lade.process_memory import peak_rss_mib, rss_mib
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
    divergences: list[Divergence] = field(default_factory=list)


def parse_ints(text: str) -> list[int]:
    """'3,10' -> [3, 10]."""
    try:
        return [int(part) for part in text.split(",") if part]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected a comma list of integers, got {text!r}") from err


def parse_config(text: str) -> tuple[int, int, int]:
    """'W,N,G' -> (W, N, G)."""
    try:
        window, ngram, guess = (int(part) for part in text.split(","))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"--config takes W,N,G (three integers), got {text!r}") from err
    return window, ngram, guess


DATASETS = {  # name -> Spec-Bench categories (None: HumanEval's raw prompts)
    "humaneval": None,
    "mt_bench": list(MT_BENCH_CATEGORIES),
    "gsm8k": ["math_reasoning"],
    "summarization": ["summarization"],
    "translation": ["translation"],
    "qa": ["qa"],
    "rag": ["rag"],
    "synthetic": None,  # random/repetitive token ids (lade.data.load_synthetic): tiny models, no tokenizer
}
METHODS = ("hf_greedy", "hf_prompt_lookup", "plain_loop", "auto")


def load_prompts(
    dataset: str, tokenizer, limit: int | None, spec_bench: str, split: str = "all"
) -> list[torch.Tensor]:
    """Token ids [1, T] of the first ``limit`` prompts of ``dataset`` (see ``DATASETS``) in ``split``
    (``lade.data``: per category, the first quarter is ``dev``, the rest ``test``; synthetic data has
    no split)."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; choose from {sorted(DATASETS)}")
    if dataset == "synthetic":
        return [encode(p, tokenizer) for p in load_synthetic(limit, vocab_size=128)]
    if tokenizer is None:
        raise ValueError(
            f"dataset {dataset!r} is text and the model has no tokenizer; use --dataset synthetic"
        )
    if DATASETS[dataset] is None:
        texts = humaneval_prompts(limit, split)
        return [tokenizer(text, return_tensors="pt").input_ids for text in texts]
    rows = load_spec_bench(spec_bench, DATASETS[dataset], limit, stratified=True, split=split)
    return [encode(p, tokenizer, "auto") for p in rows]


class _ForwardCounter:
    """Counts a model's forward calls through a forward hook (steps of HF ``generate``)."""

    def __init__(self, model):
        self.calls = 0
        model.register_forward_hook(self._hook)

    def _hook(self, module, args, output) -> None:
        self.calls += 1


def greedy_options(model, max_new_tokens: int, eos: list[int]) -> dict:
    """The ``generate`` keyword arguments of a greedy benchmark call, given alike to ``model.generate``
    and to every lookahead decoder, so both resolve the same settings (the model's generation config,
    e.g. a repetition penalty, applies to both) and "identical" compares like with like. The sampling
    controls are unset: they do nothing under greedy decoding but make transformers warn."""
    return {
        "max_new_tokens": max_new_tokens,
        "do_sample": False,
        "eos_token_id": eos,
        "pad_token_id": default_pad_id(model, eos),
        "temperature": None,
        "top_k": None,
        "top_p": None,
    }


def build_methods(
    model, names, configs, eos, max_new_tokens, prompt_lookup_tokens=10, latency=None, auto_spans=()
):
    """name -> callable(input_ids [1, T]) returning (new token list, steps, overhead fraction, the raw
    logits of each new token or None). HF greedy returns its logits (``output_logits``: the tensors
    ``generate`` computes anyway), the reference for `lade.divergence`.

    ``prompt_lookup_tokens``: HF's ``prompt_lookup_num_tokens`` K, an int or a list; with more than
    one K, ``hf_prompt_lookup`` becomes one method per K, named ``hf_prompt_lookup K=3`` etc.
    ``auto_spans``: auto beside the default with its pool's text continuations of S tokens instead
    of ``AUTO_SPAN`` (``S = AUTO_NGRAM - 1``: candidates as long as the branch's), one method per S,
    named ``auto span=S``: the candidate-length ablation."""
    single = isinstance(prompt_lookup_tokens, int)
    lookup_ks = [prompt_lookup_tokens] if single else list(prompt_lookup_tokens)
    if not lookup_ks or any(k < 1 for k in lookup_ks):
        raise ValueError(f"prompt lookup K must be positive integers, got {prompt_lookup_tokens!r}")
    counter = _ForwardCounter(model)
    options = greedy_options(model, max_new_tokens, eos)

    def hf(keep_logits=False, **extra):
        def call(ids):
            before = counter.calls
            out = model.generate(
                ids.to(model.device),
                attention_mask=torch.ones_like(ids).to(model.device),
                return_dict_in_generate=True,
                output_logits=keep_logits,
                **options,
                **extra,
            )
            new = out.sequences[0, ids.shape[1] :].tolist()
            logits = row_logits(out.logits, 0) if keep_logits else None
            # steps = forward calls: the prefill yields the first token, as our first step does
            return new, counter.calls - before, float("nan"), logits

        return call

    def decoder_method(decoder):
        def call(ids):
            res = decoder.generate(ids, attention_mask=torch.ones_like(ids), **options)
            new = res.sequences[0, ids.shape[1] :].tolist()
            return new, res.metrics.steps, res.metrics.overhead_fraction, None

        return call

    available = {
        "hf_greedy": lambda: hf(keep_logits=True),
        "hf_prompt_lookup": lambda: hf(prompt_lookup_num_tokens=lookup_ks[0]),
        "plain_loop": lambda: decoder_method(plain_decoder(model)),
        "auto": lambda: decoder_method(LookaheadDecoder(model, latency=latency)),
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
        pool = default_pool(AUTO_NGRAM, AUTO_GUESS, auto=True, span=span)
        methods[f"auto span={span}"] = decoder_method(LookaheadDecoder(model, latency=latency, pool=pool))
    for config in configs:
        methods[config_name(config)] = decoder_method(config_decoder(model, *config))
    return methods


def plain_decoder(model) -> LookaheadDecoder:
    """The library's plain loop: one token per step, no branch, no candidates."""
    return LookaheadDecoder(model, window=1, ngram=2, guess=0, proposer=AutoregressiveProposer())


def config_decoder(model, window: int, ngram: int, guess: int) -> LookaheadDecoder:
    """A decoder at fixed W, N, G; W=0: no lookahead branch, verify pool n-grams only (the auto
    planner's CPU regime, with auto's pool)."""
    if window == 0:
        pool = default_pool(ngram, guess, auto=True)
        proposer = AutoregressiveProposer(ngram=ngram)
        return LookaheadDecoder(model, 1, ngram, guess, proposer=proposer, pool=pool)
    return LookaheadDecoder(model, window=window, ngram=ngram, guess=guess)


def prompt_lookup_name(k: int) -> str:
    return f"hf_prompt_lookup K={k}"


def config_name(config: tuple[int, int, int]) -> str:
    window, ngram, guess = config
    return f"lookahead W={window} N={ngram} G={guess}"


def run(
    methods: dict, prompts: list[torch.Tensor], label: str = "", warmup: torch.Tensor | None = None
) -> dict[str, MethodStats]:
    """Every method on every prompt, rotating the order per prompt, after one warm-up run each on
    ``warmup`` (default: the first prompt). A warm-up prompt outside the timed ones keeps what a
    decoder learns across calls (auto's acceptance records) from being learnt on a timed prompt."""
    stats = {name: MethodStats(name) for name in methods}
    names = list(methods)
    warmup = prompts[0] if warmup is None else warmup
    for name in names:  # warm-up: first calls pay for allocations, lazy initialisation, calibration
        methods[name](warmup)
    started = time.perf_counter()
    for i, ids in enumerate(prompts):
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            t0 = time.perf_counter()
            new, steps, overhead, logits = methods[name](ids)
            stats[name].seconds.append(time.perf_counter() - t0)
            stats[name].new_tokens.append(len(new))
            stats[name].steps.append(steps)
            stats[name].overhead.append(overhead)
            stats[name].outputs.append(new)
            if logits is not None:
                reference_logits = logits
        reference = stats["hf_greedy"].outputs[-1]
        for name in names:  # each output against HF greedy's, the margin from HF greedy's own logits
            stats[name].divergences.append(compare(reference, reference_logits, stats[name].outputs[-1]))
        print(
            f"{label} prompt {i + 1}/{len(prompts)} done ({time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
    return stats


def summarize(stats: dict[str, MethodStats]) -> list[dict]:
    """One row per method with the figures the module docstring lists."""
    reference = stats["hf_greedy"]
    plain = stats["plain_loop"]
    rows = []
    for name, s in stats.items():
        total_new, total_time = sum(s.new_tokens), sum(s.seconds)
        divergence = summarize_divergences(s.divergences)
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
                "near_tie": divergence["near_tie"],
                "worst_margin": divergence["worst_margin"],
            }
        )
    return rows


def _margin(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3f}"


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
        "near-tie",
        "worst margin",
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append(
            f"| {r['method']} | {r['compression']:.3f} | {r['tokens_per_s']:.1f} "
            f"| {r['speedup_vs_hf_total']:.3f}x "
            f"| {r['speedup_vs_hf_median']:.3f}x | {r['speedup_vs_plain_total']:.3f}x "
            f"| {r['speedup_vs_plain_median']:.3f}x | {_percent(r['overhead_outside_forward'])} "
            f"| {r['identical_to_hf']}/{r['prompts']} | {r['near_tie']} | {_margin(r['worst_margin'])} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, list[dict]]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2", help="built-in name, local path or hub id")
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
    parser.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    parser.add_argument("--dtype", default="float32", help="float32, bfloat16, float16, auto")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--spec-bench", default="../shared/data/spec_bench/question.jsonl")
    parser.add_argument("--json", default=None, help="also write the summary rows to this JSON file")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    datasets = [d for d in args.dataset.split(",") if d]
    names = [m for m in args.methods.split(",") if m]

    started = time.perf_counter()
    model, tokenizer = load_model(
        args.model, dtype=args.dtype, device=args.device, attn_implementation=args.attn
    )
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
    eos = model.generation_config.eos_token_id
    eos = [eos] if isinstance(eos, int) else list(eos or [])
    methods = build_methods(
        model,
        names,
        args.config,
        eos,
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
