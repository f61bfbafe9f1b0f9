"""The figures both benchmark front-ends compute from ``lade.bench_timing.MethodRecords`` (speedups as
a ratio of total times and as a median of per-call ratios; outputs identical to HF greedy's, near-ties
and the worst margin among the others) and the cells and frame of their Markdown tables.

Each front-end (``lade.bench``, ``lade.bench_batch``) keeps its own row keys, columns and order:
this module names no JSON key and times nothing.
"""

from __future__ import annotations

import math
import statistics

from lade.bench_timing import MethodRecords
from lade.divergence import summarize as summarize_divergences


def speedups(reference: MethodRecords, records: MethodRecords) -> tuple[float, float]:
    """``records``' speedup over ``reference``: the ratio of their total seconds, and the median of
    their per-call ratios (the calls paired in order: the same prompt or batch)."""
    total = sum(reference.seconds) / sum(records.seconds)
    median = statistics.median(a / b for a, b in zip(reference.seconds, records.seconds, strict=True))
    return total, median


def agreement(reference: MethodRecords, records: MethodRecords) -> tuple[int, int, float]:
    """``(identical, near_tie, worst_margin)`` of ``records``' output rows against ``reference``'s:
    how many are identical, how many of the others first diverge at a near-tie, and the largest margin
    at a first divergence (NaN when all are identical; ``lade.divergence.summarize``)."""
    identical = sum(o == r for o, r in zip(records.outputs, reference.outputs, strict=True))
    divergence = summarize_divergences(records.divergences)
    return identical, divergence["near_tie"], divergence["worst_margin"]


def margin_cell(value: float) -> str:
    """A margin for a table: three decimals, '-' for NaN (nothing diverged)."""
    return "-" if math.isnan(value) else f"{value:.3f}"


def percent_cell(value: float) -> str:
    """A share for a table: a percentage with one decimal, '-' for NaN (not measured)."""
    return "-" if math.isnan(value) else f"{value:.1%}"


def markdown_table(head: tuple[str, ...], lines: list[str]) -> str:
    """A Markdown table: the header row ``head``, its rule, then ``lines`` (already formatted rows)."""
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *lines])
