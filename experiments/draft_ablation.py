"""Draft sources side by side: lookahead's Jacobi branch, Token Recycling, the suffix tree, their
combination under auto, against HF greedy and HF prompt lookup, on HumanEval and the six Spec-Bench
categories (issue 17, item 5).

    python experiments/draft_ablation.py --split dev --limit 2 \\
        --methods hf_greedy,hf_prompt_lookup_k2,hf_prompt_lookup_k3,hf_prompt_lookup_k5,hf_prompt_lookup \\
        --out experiments/results/draft_ablation/dev          # tune HF prompt lookup's K on dev prompts
    python experiments/draft_ablation.py --split test --limit 4 \\
        --tuned-lookup experiments/results/draft_ablation/dev/summary.csv   # the report, on test prompts
    python experiments/draft_ablation.py --limit 1 --max-new-tokens 16 --datasets humaneval --out /tmp/d

Methods (``--methods``; fixed ones at Jacobi W=7 N=5 G=7's budget of about 38 tokens fed per step):
``hf_greedy`` (the reference), ``hf_prompt_lookup`` (K = 10, HF's default), ``hf_prompt_lookup_k{K}``,
``hf_prompt_lookup_tuned`` (per dataset, the K with the highest speedup in ``--tuned-lookup``'s dev
summary or dev records, e.g. a benchmark's ``records/MODEL-DTYPE-TOKENS/dev.csv``; the model's rows,
its dtype's where there are any), ``jacobi`` (W=7 N=5 G=7, candidates as a token trie),
``token_recycling`` (the CPU draft tree, 16 paths of up to 5 tokens), ``token_recycling_likeliest``
(the 48 likeliest nodes by measured rank chances, up to 8 deep: the size that feeds about Jacobi's
budget on development prompts, ``experiments/results/token_recycling/shapes.md``;
``token_recycling_likeliest{M}``: M nodes),
``suffix_tree`` (G=7 suffix-tree candidates of up to 10 tokens), ``combined`` (W=7 N=5 G=7 over the
n-gram pool, the suffix tree and Token Recycling's table, their candidates in turn), ``auto`` (the
default decoder: every source, Token Recycling's table started afresh each call; ``auto`` rows recorded
before that became the default were of the n-gram pool alone, so such records are not to be resumed
with ``auto``), ``auto_predicted_choice`` (the default decoder always verifying the source of the
highest predicted rate, without ``lade.policy_tally``), ``auto_ngram_pool`` (the former default:
auto over the n-gram pool alone),
``auto_combined`` (auto choosing the source step by step, ``pools.CombinedPool``, the table kept from
prompt to prompt),
``auto_combined_likeliest{M}`` (the same with Token Recycling's likeliest tree of M nodes, default 16),
``auto_combined_unmerged`` (the same without the sources' candidates taken together, so each step
verifies one source's), ``auto_guess{G}`` (the default decoder with auto's G ceiling at G instead of
7: ``guess_ceiling``), ``auto_without_{source}`` (the default decoder less one of its sources) and
``auto_only_{source}`` (the same planner with one of its sources alone:
``lookahead``, ``suffix_tree``, ``token_recycling``; the combination's target is to match the best of
them), ``auto_with_frequent_tokens`` (the default decoder's sources plus the call's most frequent
tokens as one-token candidates, ``pools.FrequentTokensPool``).
A method name followed by ``@IMPLEMENTATION`` runs on the model loaded with that attention
implementation instead of ``--attn``'s (e.g. ``auto@sdpa_gqa`` beside ``auto`` with ``--attn sdpa``:
``lade.gqa_attention``); HF greedy, the reference, always runs on ``--attn``'s.
``--versus METHOD[,METHOD...]`` adds each METHOD's speedup over each other library method, paired per
prompt (``versus.csv``, one more table per METHOD in summary.md): ``--versus auto_combined`` tests the
combination against each source alone directly; ``auto_ngram_pool`` and ``auto_only_lookahead`` decode
alike, so adding ``auto_ngram_pool`` gives an A/A control of what the timing noise alone yields (its row
over ``auto_only_lookahead``; in runs before the default changed, ``auto`` played that part).
Every prompt's rows are appended to ``records.csv`` under ``--out`` as soon as they are measured (a
rerun resumes); ``summary.csv`` and ``summary.md`` are rendered from all the records there
(``lade.suite_report``).
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import pandas as pd

from lade.bench_methods import SOURCE_SUBSETS, greedy_options, source_subset_pool
from lade.bench_setup import (
    SPEC_BENCH,
    SUITE_DATASETS,
    add_model_flags,
    eos_ids,
    load_bench_model,
    load_prompts,
    warmup_ids,
)
from lade.decoding import LookaheadDecoder
from lade.machine import cpu_description
from lade.options import AUTO_SPAN, combined_pool, default_pool
from lade.suite import decoder_call, hf_call, run_suite
from lade.suite_report import dev_summary, markdown, summarize, tuned_lookup_ks, versus, versus_markdown
from pools import SuffixTreePool, TokenRecyclingPool
from strategies import AutoregressiveProposer

ROOT = Path(__file__).resolve().parents[1]
METHODS = "hf_greedy,hf_prompt_lookup,jacobi,token_recycling,suffix_tree,combined,auto,auto_combined"
LOOKUP_KS = (2, 3, 5, 10)
# Spec-Bench's public leaderboard (Vicuna-7B, A100, greedy, batch size 1): speedup (mean accepted tokens)
PAPER_VALUES = (
    "lookahead 1.34x (1.64), prompt lookup 1.66x (1.75), REST 1.48x (1.82), Token Recycling 2.22x (2.73)"
)


# ``lade.options.combined_pool`` with Token Recycling's table kept across calls, as the ``combined`` and
# ``auto_combined*`` methods measure it: one decoder serves every prompt of a run, so its table carries
# over from prompt to prompt (the default decoder's starts afresh each call).
every_source = partial(combined_pool, persistent=True)


def build(name: str, model, options: dict, lookup_k: int | None):
    """The method called ``name`` (see the module docstring)."""
    if name == "hf_greedy":
        return hf_call(model, options, keep_logits=True)
    if name.startswith("hf_prompt_lookup"):
        k = {"hf_prompt_lookup": 10, "hf_prompt_lookup_tuned": lookup_k}.get(name)
        k = int(name.rsplit("_k", 1)[1]) if k is None and "_k" in name else k
        if k is None:
            raise ValueError(f"{name} needs --tuned-lookup (a dev summary with hf_prompt_lookup_k* rows)")
        return hf_call(model, options, prompt_lookup_num_tokens=k)
    decoders = {
        "jacobi": lambda: LookaheadDecoder(model, 7, 5, 7),
        "token_recycling": lambda: LookaheadDecoder(
            model, 1, 2, 16, proposer=AutoregressiveProposer(ngram=2), pool=TokenRecyclingPool(2)
        ),
        "suffix_tree": lambda: LookaheadDecoder(
            model, 1, 5, 7, proposer=AutoregressiveProposer(ngram=5), pool=SuffixTreePool(5, span=10)
        ),
        "combined": lambda: LookaheadDecoder(model, 7, 5, 7, pool=every_source(5, 7, auto=False)),
        "auto": lambda: LookaheadDecoder(model),
        "auto_predicted_choice": lambda: LookaheadDecoder(model, follow_policies=False),
        "auto_ngram_pool": lambda: LookaheadDecoder(model, pool=default_pool(6, 7, True, span=AUTO_SPAN)),
    }
    if name.startswith("token_recycling_likeliest"):
        nodes = int(name.removeprefix("token_recycling_likeliest") or 48)
        pool = TokenRecyclingPool(2, nodes=nodes)  # G = M: a tree of M nodes has at most M leaves
        decoders[name] = lambda: LookaheadDecoder(
            model, 1, 2, nodes, proposer=AutoregressiveProposer(2), pool=pool
        )
    if name == "auto_combined" or name.startswith("auto_combined_likeliest"):
        nodes = None if name == "auto_combined" else int(name.removeprefix("auto_combined_likeliest") or 16)
        decoders[name] = lambda: LookaheadDecoder(model, pool=every_source(6, 7, auto=True, nodes=nodes))
    if name == "auto_combined_unmerged":
        decoders[name] = lambda: LookaheadDecoder(model, pool=every_source(6, 7, auto=True, merged=False))
    if name.startswith("auto_guess") and name.removeprefix("auto_guess").isdigit():
        ceiling = int(name.removeprefix("auto_guess"))
        decoders[name] = lambda: LookaheadDecoder(model, guess_ceiling=ceiling)
    if name == "auto_with_frequent_tokens":
        decoders[name] = lambda: LookaheadDecoder(model, pool=combined_pool(6, 7, True, frequent_tokens=True))
    if name.startswith(tuple(SOURCE_SUBSETS)):  # a source alone kept Token Recycling's table across calls
        persistent = name.startswith("auto_only_")
        decoders[name] = lambda: LookaheadDecoder(model, pool=source_subset_pool(name, persistent))
    if name not in decoders:
        raise ValueError(f"unknown method {name!r}")
    return decoder_call(decoders[name](), options)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_model_flags(parser)
    parser.add_argument("--datasets", default=SUITE_DATASETS)
    parser.add_argument("--methods", default=METHODS)
    parser.add_argument("--split", default="test", choices=["dev", "test"])
    parser.add_argument("--limit", type=int, default=4, help="prompts per dataset")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument(
        "--tuned-lookup", type=Path, default=None, help="dev summary.csv or dev records to tune K on"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "experiments" / "results" / "draft_ablation")
    parser.add_argument(
        "--versus",
        default=None,
        help="methods (comma-separated) to pair against every other library method (versus.csv, tables)",
    )
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    names = args.methods.split(",")
    paired = args.versus.split(",") if args.versus else []
    for method in paired:
        if method not in names:
            parser.error(f"--versus {method!r} is not among --methods")
    if any(n.startswith("hf_greedy@") for n in names):  # checked before any model loads
        parser.error("hf_greedy is the reference: it runs on --attn's model (no @IMPLEMENTATION)")
    model, tokenizer = load_bench_model(args)
    models = {args.attn: model}  # attention implementation -> the model loaded with it

    def model_with(implementation: str):
        if implementation not in models:
            models[implementation], _ = load_bench_model(
                argparse.Namespace(**{**vars(args), "attn": implementation})
            )
        return models[implementation]

    options = greedy_options(model, args.max_new_tokens, eos_ids(model))
    dtype = str(model.dtype).removeprefix("torch.")
    ks, tuned_on = tuned_ks(args.tuned_lookup, args.model, dtype) if args.tuned_lookup else ({}, "")
    datasets = args.datasets.split(",")
    built = {}  # one method per (name, K): a decoder (and Token Recycling's table) serves every dataset
    methods = {}
    for dataset in datasets:
        k = ks.get(dataset)
        methods[dataset] = {}
        for n in names:
            method, _, implementation = n.partition("@")
            on = model_with(implementation) if implementation else model
            methods[dataset][n] = built.setdefault((n, k), build(method, on, options, k))
    prompts = {
        d: load_prompts(d, tokenizer, args.limit, str(ROOT / SPEC_BENCH), split=args.split) for d in datasets
    }
    labels = {"model": args.model, "dtype": dtype, "split": args.split}
    warmup = warmup_ids()
    run_suite(methods, prompts, args.out / "records.csv", labels, warmup)
    records = pd.read_csv(args.out / "records.csv")
    summary = summarize(records)
    summary.to_csv(args.out / "summary.csv", index=False)
    tuned = "".join(f" {d}={k}" for d, k in sorted(ks.items()))
    (args.out / "summary.md").write_text(
        f"# Draft sources side by side\n\n`python experiments/draft_ablation.py {' '.join(argv)}`".replace(
            " `", "`"
        )
        + f" ({args.split} split, {args.max_new_tokens} new tokens). Machine: {cpu_description()}.\n"
        + (f"HF prompt lookup's tuned K per dataset (dev split, {tuned_on}):{tuned}.\n" if ks else "")
        + f"\nFor scale, {PAPER_VALUES} (Spec-Bench, Vicuna-7B, A100).\n\n"
        + markdown(summary)
        + "\n"
        + (versus_sections(records, paired, args.out) if paired else "")
    )
    return summary


def tuned_ks(path: Path, model: str, dtype: str) -> tuple[dict[str, int], str]:
    """Each dataset's HF prompt lookup K tuned on ``path``, a dev-split summary (``summary.csv``) or dev
    records (a benchmark's ``dev.csv``): ``model``'s rows, ``dtype``'s where it has any (K is a property
    of the prompts and the model far more than of the dtype), and the setting tuned on ("smollm2
    float32"), which summary.md names."""
    table = dev_summary(path, model, dtype, any_dtype=True)
    if table.empty:
        raise ValueError(f"{path} holds no dev rows of {model!r} to tune HF prompt lookup's K on")
    return tuned_lookup_ks(table), f"{model} {table.dtype.iloc[0]}"


def versus_sections(records: pd.DataFrame, methods: list[str], out: Path) -> str:
    """Each of ``methods``' speedup over each other library method, paired per prompt
    (``lade.suite_report.versus``), written together to ``out/versus.csv``; returned as one Markdown
    section per method for summary.md."""
    tables = [versus(records, method) for method in methods]
    pd.concat(tables, ignore_index=True).to_csv(out / "versus.csv", index=False)
    return "".join(
        f"\n## {method} against each other method\n\nIts tokens per second over theirs, paired per prompt "
        "(an interval covering 1: no difference shown).\n\n" + versus_markdown(table) + "\n"
        for method, table in zip(methods, tables, strict=True)
    )


if __name__ == "__main__":
    main()
