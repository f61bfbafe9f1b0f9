"""What a benchmark run is given, shared by ``lade.bench`` and ``lade.bench_batch``: the flags both
command lines take and how they are parsed, the datasets and their prompts, and the model and its EOS ids.

It only parses and loads: it builds no method (``lade.bench_methods``), times nothing
(``lade.bench_timing``) and reports nothing (``lade.bench_report``).
"""

from __future__ import annotations

import argparse

import torch

from lade.data import MT_BENCH_CATEGORIES, encode, humaneval_prompts, load_spec_bench, load_synthetic
from lade.model import load_model

SPEC_BENCH = "../shared/data/spec_bench/question.jsonl"  # --spec-bench's default (run from the repo root)
DATASETS = {  # name -> Spec-Bench categories (None: HumanEval's raw prompts)
    "humaneval": None,
    "mt_bench": list(MT_BENCH_CATEGORIES),
    "math_reasoning": ["math_reasoning"],  # Spec-Bench's GSM8K questions
    "gsm8k": ["math_reasoning"],  # the same, by its source's name
    "summarization": ["summarization"],
    "translation": ["translation"],
    "qa": ["qa"],
    "rag": ["rag"],
    "synthetic": None,  # random/repetitive token ids (lade.data.load_synthetic): tiny models, no tokenizer
}
# The suite the paired-timing experiments run (``--datasets``' default): HumanEval and Spec-Bench's six
SUITE_DATASETS = "humaneval,mt_bench,translation,summarization,qa,math_reasoning,rag"


def warmup_ids() -> torch.Tensor:
    """The untimed warm-up prompt [1, 16] of the paired-timing experiments: outside every dataset,
    so nothing a decoder learns across calls is learnt on a timed prompt."""
    return torch.tensor([[1, 2, 3, 4] * 4])


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


def add_model_flags(parser: argparse.ArgumentParser) -> None:
    """``--model``, ``--attn``, ``--dtype`` and ``--device``: what ``load_bench_model`` loads."""
    parser.add_argument("--model", default="smollm2", help="built-in name, local path or hub id")
    parser.add_argument("--attn", default="sdpa_gqa", choices=["sdpa_gqa", "sdpa", "eager"])
    parser.add_argument("--dtype", default="float32", help="float32, bfloat16, float16, auto")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")


def load_bench_model(args: argparse.Namespace):
    """``(model, tokenizer)`` as ``add_model_flags``'s flags name them (``lade.model.load_model``)."""
    return load_model(args.model, dtype=args.dtype, device=args.device, attn_implementation=args.attn)


def eos_ids(model) -> list[int]:
    """The model's EOS ids from its generation config, as a list (as ``lade.experiment.eos_ids``,
    which is not imported here: that module pulls in Hydra and the sweep's config schema)."""
    eos = model.generation_config.eos_token_id
    return [eos] if isinstance(eos, int) else list(eos or [])


def split_list(text: str) -> list[str]:
    """'a,b,' -> ['a', 'b'] (a comma-list flag; '' gives [])."""
    return [part for part in text.split(",") if part]


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
