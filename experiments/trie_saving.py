"""Token-trie verification against chains: the same accepted tokens for fewer tokens fed per step.

    python experiments/trie_saving.py                       # SmolLM2 fp32, W=7 N=5 G=7, HumanEval + MT-Bench
    python experiments/trie_saving.py --limit 2 --max-new-tokens 32 --out /tmp/trie   # a quick look
    python experiments/trie_saving.py --methods chains,token_recycling,suffix_tree --limit 4 \
        --out experiments/results/draft_sources        # other draft sources beside the Jacobi chains

One decoder per method (``build``), warmed up untimed (``trie``: candidates merged into a trie;
``chains``: separate chains, the original layout), the methods rotating per prompt,
development-split prompts (HumanEval tasks 0-40; MT-Bench's first 2 per category, stratified).
Per dataset and method: the mean tokens fed per step (root + lookahead branch + verification
branch), the verification branch's share, compression (tokens per step), whether every output
equals HF greedy, and the decode time summed over the prompts (over the chains', with the
per-prompt median). Writes ``trie.csv`` and ``trie.md`` under ``--out`` (default
``experiments/results/trie``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import pandas as pd
import torch

from lade.bench_setup import SPEC_BENCH, load_prompts
from lade.decoding import LookaheadDecoder
from lade.machine import cpu_description
from lade.model import load_model
from pools import SuffixTreePool, TokenRecyclingPool
from strategies import AutoregressiveProposer

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--config", default="7,5,7", help="W,N,G")
    parser.add_argument("--datasets", default="humaneval,mt_bench")
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument(
        "--methods",
        default="trie,chains",
        help="of trie, chains, token_recycling, suffix_tree (chains needed)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "experiments" / "results" / "trie")
    args = parser.parse_args(argv)
    window, ngram, guess = (int(part) for part in args.config.split(","))
    model, tokenizer = load_model(args.model)
    methods = args.methods.split(",")
    if "chains" not in methods:
        parser.error("--methods needs chains (the times are relative to it)")
    decoders = {method: build(method, model, window, ngram, guess) for method in methods}
    warm_up = torch.tensor([[1, 2, 3, 4] * 4])
    for decoder in decoders.values():  # the first call's self-check and allocations stay untimed
        decoder.generate(warm_up, max_new_tokens=8)
    rows = []
    for dataset in args.datasets.split(","):
        prompts = load_prompts(dataset, tokenizer, args.limit, str(ROOT / SPEC_BENCH), split="dev")
        records = {method: [] for method in decoders}
        for index, ids in enumerate(prompts):
            reference = model.generate(
                ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=args.max_new_tokens
            )
            order = methods[index % len(methods) :] + methods[: index % len(methods)]  # rotating
            for method in order:
                started = time.perf_counter()
                result = decoders[method].generate(ids, max_new_tokens=args.max_new_tokens)
                seconds = time.perf_counter() - started
                m = result.metrics
                records[method].append((m, seconds, torch.equal(result.sequences, reference)))
            print(f"{dataset} {index + 1}/{len(prompts)}", flush=True)
        chain_seconds = [seconds for _, seconds, _ in records["chains"]]
        for method, calls in records.items():
            steps = sum(m.steps for m, _, _ in calls)
            fed = sum(sum(m.step_sizes) for m, _, _ in calls)
            verification = sum(sum(m.verification_sizes) for m, _, _ in calls)
            seconds = [s for _, s, _ in calls]
            rows.append(
                {
                    "model": args.model,
                    "dataset": dataset,
                    "method": method,
                    "config": f"W={window} N={ngram} G={guess}",
                    "prompts": len(calls),
                    "tokens_fed_per_step": fed / steps,
                    "verification_tokens_per_step": verification / steps,
                    "compression": sum(m.new_tokens for m, _, _ in calls) / steps,
                    "identical": sum(same for _, _, same in calls),
                    "seconds": sum(seconds),
                    "time_vs_chains": sum(seconds) / sum(chain_seconds),
                    "median_time_vs_chains": statistics.median(
                        s / c for s, c in zip(seconds, chain_seconds, strict=True)
                    ),
                }
            )
    table = pd.DataFrame(rows)
    write(table, args)
    return table


def build(method: str, model, window: int, ngram: int, guess: int) -> LookaheadDecoder:
    """``trie``/``chains``: Jacobi lookahead at W, N, G with candidates as a trie or as chains;
    ``token_recycling``: no branch, the CPU draft tree (16 paths of up to 5 tokens) from recycled
    tokens; ``suffix_tree``: no branch, G suffix-tree candidates of up to 10 tokens."""
    if method in ("trie", "chains"):
        return LookaheadDecoder(model, window, ngram, guess, token_tree=method == "trie")
    if method == "token_recycling":
        return LookaheadDecoder(
            model, 1, 2, 16, proposer=AutoregressiveProposer(ngram=2), pool=TokenRecyclingPool(2)
        )
    if method == "suffix_tree":
        pool = SuffixTreePool(ngram, span=10)
        return LookaheadDecoder(
            model, 1, ngram, guess, proposer=AutoregressiveProposer(ngram=ngram), pool=pool
        )
    raise ValueError(f"unknown method {method!r}")


def write(table: pd.DataFrame, args) -> None:
    """``trie.csv`` and ``trie.md`` (the table, the command and the machine) under ``args.out``."""
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "trie.csv", index=False)
    lines = [
        "# Draft sources and token-trie verification vs chains",
        "",
        f"`python experiments/trie_saving.py --limit {args.limit} --max-new-tokens {args.max_new_tokens}"
        f" --methods {args.methods}"
        f" --config {args.config} --datasets {args.datasets}` (development-split prompts;"
        f" {args.model}, float32, sdpa). Machine: {cpu_description()}.",
        "",
        "| dataset | method | tokens fed/step | verification tokens/step | compression | identical |"
        " time vs chains (sum) | median per prompt |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in table.itertuples():
        lines.append(
            f"| {row.dataset} | {row.method} | {row.tokens_fed_per_step:.1f} | "
            f"{row.verification_tokens_per_step:.1f} | {row.compression:.3f} | "
            f"{row.identical}/{row.prompts} | "
            f"{row.time_vs_chains:.3f}x | {row.median_time_vs_chains:.3f}x |"
        )
    (args.out / "trie.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
