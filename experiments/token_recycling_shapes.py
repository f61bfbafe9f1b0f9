"""Token Recycling's draft-tree shapes at equal tokens fed: the paper's kind of static template against
the likeliest tree grown from measured rank chances (``pools.draft_tree``), beside the Jacobi branch.

    python experiments/token_recycling_shapes.py        # SmolLM2 fp32, HumanEval + MT-Bench, 8 dev prompts
    python experiments/token_recycling_shapes.py --limit 1 --max-new-tokens 16 --out /tmp/shapes   # a look

Methods (``--methods``): ``jacobi`` (W=7 N=5 G=7, candidates as a trie: the budget to match),
``uniform`` (``TokenRecyclingPool``'s CPU template, branching 4,2,2,1,1: 60 nodes, 16 paths) and
``likeliest{M}`` (the M likeliest nodes, depth 8, rebuilt from the pool's own rank counts). One
decoder per method, its table kept across the prompts (as the paper keeps it across queries), on
development-split prompts only: this is where the pool's defaults are chosen. Per dataset and method:
compression (tokens per step), tokens fed per step, whether every output equals HF greedy, and, for
Token Recycling, the measured chance per rank that the model's next token was a row's rank-r token
(raw counts, without the prior). No timings: compression and tokens fed are deterministic in float32,
and the timed comparison is ``experiments/draft_ablation.py``'s. Writes ``shapes.csv`` and
``shapes.md`` under ``--out`` (default ``experiments/results/token_recycling``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
import torch

from lade.bench_setup import SPEC_BENCH, load_prompts
from lade.decoding import LookaheadDecoder
from lade.machine import cpu_description
from lade.model import load_model
from pools import TokenRecyclingPool
from strategies import AutoregressiveProposer

ROOT = Path(__file__).resolve().parents[1]
METHODS = "jacobi,uniform,likeliest24,likeliest36,likeliest48"


def build(method: str, model) -> LookaheadDecoder:
    """The decoder called ``method`` (see the module docstring)."""
    if method == "jacobi":
        return LookaheadDecoder(model, 7, 5, 7)
    if method == "uniform":
        pool = TokenRecyclingPool(2)
        guess = 16
    elif method.startswith("likeliest") and method.removeprefix("likeliest").isdigit():
        nodes = int(method.removeprefix("likeliest"))
        pool = TokenRecyclingPool(2, nodes=nodes, depth=8)
        guess = nodes  # a tree of M nodes has at most M leaves: never cut the tree short
    else:
        raise ValueError(f"unknown method {method!r}")
    return LookaheadDecoder(model, 1, 2, guess, proposer=AutoregressiveProposer(ngram=2), pool=pool)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--datasets", default="humaneval,mt_bench")
    parser.add_argument("--methods", default=METHODS)
    parser.add_argument("--limit", type=int, default=8, help="development prompts per dataset")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--out", type=Path, default=ROOT / "experiments" / "results" / "token_recycling")
    args = parser.parse_args(argv)
    model, tokenizer = load_model(args.model)
    rows = []
    for dataset in args.datasets.split(","):
        decoders = {method: build(method, model) for method in args.methods.split(",")}  # fresh tables
        prompts = load_prompts(dataset, tokenizer, args.limit, str(ROOT / SPEC_BENCH), split="dev")
        calls = {method: [] for method in decoders}
        for index, ids in enumerate(prompts):
            reference = model.generate(
                ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=args.max_new_tokens
            )
            for method, decoder in decoders.items():
                result = decoder.generate(ids, max_new_tokens=args.max_new_tokens)
                calls[method].append((result.metrics, torch.equal(result.sequences, reference)))
            print(f"{dataset} {index + 1}/{len(prompts)}", flush=True)
        for method, decoder in decoders.items():
            steps = sum(m.steps for m, _ in calls[method])
            row = {
                "model": args.model,
                "dataset": dataset,
                "method": method,
                "prompts": len(prompts),
                "compression": sum(m.new_tokens for m, _ in calls[method]) / steps,
                "tokens_fed_per_step": sum(sum(m.step_sizes) for m, _ in calls[method]) / steps,
                "identical": sum(same for _, same in calls[method]),
            }
            if isinstance(decoder.pool, TokenRecyclingPool):
                ranks = decoder.pool.ranks
                row["rank_acceptance"] = " ".join(f"{hits / max(ranks.seen, 1):.3f}" for hits in ranks.hits)
            rows.append(row)
    table = pd.DataFrame(rows)
    write(table, args)
    return table


def write(table: pd.DataFrame, args) -> None:
    """``shapes.csv`` and ``shapes.md`` (the table, the command and the machine) under ``args.out``."""
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "shapes.csv", index=False)
    lines = [
        "# Token Recycling's draft-tree shapes at equal tokens fed",
        "",
        f"`python experiments/token_recycling_shapes.py --limit {args.limit} --max-new-tokens"
        f" {args.max_new_tokens} --methods {args.methods} --datasets {args.datasets}` (development-split"
        f" prompts; {args.model}, float32, sdpa). Machine: {cpu_description()}.",
        "",
        "| dataset | method | compression | tokens fed/step | identical | chance per rank (0-7) |",
        "|---|---|---|---|---|---|",
    ]
    for row in table.fillna("-").itertuples():
        lines.append(
            f"| {row.dataset} | {row.method} | {row.compression:.2f} | {row.tokens_fed_per_step:.1f} |"
            f" {row.identical}/{row.prompts} | {getattr(row, 'rank_acceptance', '-')} |"
        )
    (args.out / "shapes.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
