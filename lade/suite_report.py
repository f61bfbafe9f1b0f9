"""Summaries of a suite's records (``lade.suite``): paired speedups with bootstrap confidence intervals.

Per model, dtype, dataset and method: the speedup over HF greedy as the ratio of summed seconds over the
prompts (each method's prompts paired with HF greedy's on the same prompts), with a 95% percentile
bootstrap interval over prompts (prompts resampled with replacement, the pairing kept), the median of
the per-prompt ratios, compression (new tokens per step) with its interval, tokens fed per step,
tokens per second, and how many outputs are identical to HF greedy's or diverge only at a near-tie.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from lade.bench_timing import REFERENCE

GROUP = ["model", "dtype", "dataset", "method"]
DRAWS = 2000


def bootstrap_ratio(numerator, denominator, draws: int = DRAWS, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of ``sum(numerator) / sum(denominator)`` over paired items
    (arrays of one length; items resampled with replacement, a fixed ``seed``). ``(nan, nan)`` for
    fewer than two items."""
    numerator, denominator = np.asarray(numerator, float), np.asarray(denominator, float)
    if len(numerator) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(numerator), size=(draws, len(numerator)))
    ratios = numerator[picks].sum(axis=1) / denominator[picks].sum(axis=1)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(low), float(high)


def summarize(records: pd.DataFrame) -> pd.DataFrame:
    """One row per model, dtype, dataset and method of ``records`` (``lade.suite.COLUMNS``), in the
    records' order (see the module docstring for the columns)."""
    rows = []
    for (model, dtype, dataset), group in records.groupby(GROUP[:3], sort=False):
        reference = group[group.method == REFERENCE].set_index("prompt").seconds
        for method, calls in group.groupby("method", sort=False):
            calls = calls.set_index("prompt").loc[reference.index.intersection(calls.prompt)]
            base = reference.loc[calls.index]
            steps = calls.steps.astype(float)
            counted = steps.notna().all() and len(calls)
            low, high = bootstrap_ratio(base.values, calls.seconds.values)
            c_low, c_high = (
                bootstrap_ratio(calls.new_tokens.values, steps.values) if counted else (math.nan,) * 2
            )
            rows.append(
                {
                    "model": model,
                    "dtype": dtype,
                    "dataset": dataset,
                    "method": method,
                    "prompts": len(calls),
                    "speedup": base.sum() / calls.seconds.sum(),
                    "speedup_ci_low": low,
                    "speedup_ci_high": high,
                    "median_speedup": float(np.median(base.values / calls.seconds.values)),
                    "compression": calls.new_tokens.sum() / steps.sum() if counted else math.nan,
                    "compression_ci_low": c_low,
                    "compression_ci_high": c_high,
                    "tokens_fed_per_step": calls.tokens_fed.sum(min_count=len(calls)) / steps.sum()
                    if counted
                    else math.nan,  # NaN where a call's tokens fed are unknown (HF generate)
                    "tokens_per_s": calls.new_tokens.sum() / calls.seconds.sum(),
                    "identical": int(calls.identical.astype(bool).sum()),
                    "near_tie": int(calls.near_tie.astype(bool).sum()),
                }
            )
    return pd.DataFrame(rows)


def markdown(summary: pd.DataFrame) -> str:
    """``summary`` as a Markdown table: speedup [95% CI], median, compression, tokens fed per step,
    tokens/s and identical (near-tie) outputs of the prompts."""
    head = ("model", "dtype", "dataset", "method", "speedup [95% CI]", "median", "compression", "fed/step")
    head += ("tok/s", "identical")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in summary.itertuples():
        lines.append(
            f"| {r.model} | {r.dtype} | {r.dataset} | {r.method} | {r.speedup:.2f}x "
            f"[{_cell(r.speedup_ci_low)}, {_cell(r.speedup_ci_high)}] | {r.median_speedup:.2f}x | "
            f"{_cell(r.compression)} | {_cell(r.tokens_fed_per_step, 1)} | {r.tokens_per_s:.1f} | "
            f"{r.identical}/{r.prompts}"
            + (f" ({r.near_tie - r.identical} near-tie)" if r.near_tie > r.identical else "")
            + " |"
        )
    return "\n".join(lines)


def _near_ties(count: int) -> str:
    return f" (+{count} near-tie)" if count else ""


def _cell(value: float, digits: int = 2) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"
