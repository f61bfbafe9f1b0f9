"""Summaries of a suite's records (``lade.suite``): paired speedups with bootstrap confidence intervals.

Per model, dtype, dataset and method: the speedup over its baseline (HF greedy unless ``baselines`` says
otherwise, e.g. HF sampling at the same temperature for sampling methods) as the ratio of tokens per
second, summed over the prompts that both ran (for greedy outputs identical to the baseline's, the
ratio of summed seconds), with a 95% percentile bootstrap interval over prompts (prompts resampled with
replacement, the pairing kept), the median of the per-prompt ratios, compression (new tokens per step)
with its interval, tokens fed per step, tokens per second, and how many outputs are identical to HF
greedy's or diverge only at a near-tie (empty where outputs were not compared).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from lade.bench_report import markdown_table
from lade.bench_timing import REFERENCE

GROUP = ["model", "dtype", "dataset", "method"]
DRAWS = 2000


def bootstrap_ratio(numerator, denominator, draws: int = DRAWS, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of ``sum(numerator) / sum(denominator)`` over paired items
    (arrays of one length; items resampled with replacement, a fixed ``seed``). ``(nan, nan)`` for
    fewer than two items."""
    return bootstrap_throughput_ratio(
        numerator, denominator, np.ones(len(numerator)), np.ones(len(numerator)), draws, seed
    )


def bootstrap_throughput_ratio(
    tokens, seconds, base_tokens, base_seconds, draws: int = DRAWS, seed: int = 0
) -> tuple[float, float]:
    """95% percentile bootstrap interval of ``(sum(tokens) / sum(seconds)) / (sum(base_tokens) /
    sum(base_seconds))``, one method's throughput over its baseline's on the same items (four arrays of
    one length, items resampled with replacement, a fixed ``seed``). ``(nan, nan)`` for fewer than two
    items."""
    arrays = [np.asarray(a, float) for a in (tokens, seconds, base_tokens, base_seconds)]
    if len(arrays[0]) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(arrays[0]), size=(draws, len(arrays[0])))
    tok, sec, base_tok, base_sec = (a[picks].sum(axis=1) for a in arrays)
    low, high = np.percentile((tok / sec) / (base_tok / base_sec), [2.5, 97.5])
    return float(low), float(high)


def summarize(records: pd.DataFrame, baselines: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per model, dtype, dataset and method of ``records`` (``lade.suite.COLUMNS``), in the
    records' order (see the module docstring for the columns); ``baselines``: method -> the method its
    speedup is over (default ``REFERENCE``, HF greedy). A method whose baseline has no records in a
    dataset gets no row there."""
    baselines = baselines or {}
    rows = []
    for (model, dtype, dataset), group in records.groupby(GROUP[:3], sort=False):
        for method, calls in group.groupby("method", sort=False):
            baseline = baselines.get(method, REFERENCE)
            reference = group[group.method == baseline].set_index("prompt")
            if reference.empty:  # no baseline measured here: no speedup to give
                continue
            calls = calls.set_index("prompt").loc[reference.index.intersection(calls.prompt)]
            base = reference.loc[calls.index]
            steps = calls.steps.astype(float)
            counted = steps.notna().all() and len(calls)
            rates = (calls.new_tokens / calls.seconds) / (base.new_tokens / base.seconds)
            low, high = bootstrap_throughput_ratio(
                calls.new_tokens.values, calls.seconds.values, base.new_tokens.values, base.seconds.values
            )
            c_low, c_high = (
                bootstrap_ratio(calls.new_tokens.values, steps.values) if counted else (math.nan,) * 2
            )
            compared = "identical" in calls and calls.identical.notna().all()
            rows.append(
                {
                    "model": model,
                    "dtype": dtype,
                    "dataset": dataset,
                    "method": method,
                    "baseline": baseline,
                    "prompts": len(calls),
                    "speedup": (calls.new_tokens.sum() / calls.seconds.sum())
                    / (base.new_tokens.sum() / base.seconds.sum()),
                    "speedup_ci_low": low,
                    "speedup_ci_high": high,
                    "median_speedup": float(np.median(rates.values)),
                    "compression": calls.new_tokens.sum() / steps.sum() if counted else math.nan,
                    "compression_ci_low": c_low,
                    "compression_ci_high": c_high,
                    "tokens_fed_per_step": calls.tokens_fed.sum(min_count=len(calls)) / steps.sum()
                    if counted
                    else math.nan,  # NaN where a call's tokens fed are unknown (HF generate)
                    "tokens_per_s": calls.new_tokens.sum() / calls.seconds.sum(),
                    "identical": int(calls.identical.astype(bool).sum()) if compared else math.nan,
                    "near_tie": int(calls.near_tie.astype(bool).sum()) if compared else math.nan,
                }
            )
    return pd.DataFrame(rows)


def versus(records: pd.DataFrame, method: str) -> pd.DataFrame:
    """``method``'s speedup over each other method of ``records`` that is not HF's (``summarize``'s
    columns, ``baseline`` the method it is over), paired per prompt: the direct test of "at least as fast
    as each of those", intervals included (a ratio's interval covering 1: no difference shown). Rows
    per model, dtype and dataset, in the records' order of the other methods."""
    others = [m for m in records.method.unique() if m != method and not m.startswith("hf_")]
    tables = [
        summarize(group[group.method.isin([method, other])], {method: other})
        for _, group in records.groupby(GROUP[:3], sort=False)
        for other in others
    ]
    table = pd.concat([summarize(records.iloc[:0]), *tables], ignore_index=True)
    return table[table.method == method].reset_index(drop=True)


def versus_markdown(table: pd.DataFrame) -> str:
    """``versus``'s table in Markdown: model, dtype, dataset, method, over (its baseline), speedup [95%
    CI], median of the per-prompt ratios, prompts."""
    rows = [
        f"| {r.model} | {r.dtype} | {r.dataset} | {r.method} | {r.baseline} | {speedup_cell(r)} "
        f"| {r.median_speedup:.2f}x | {r.prompts} |"
        for r in table.itertuples()
    ]
    return markdown_table((*GROUP, "over", "speedup [95% CI]", "median", "prompts"), rows)


MEASURES = ("speedup [95% CI]", "median", "compression", "fed/step", "tok/s", "identical")


def measure_cells(row) -> list[str]:
    """A summary row's ``MEASURES`` as Markdown cells: speedup [95% CI], median, compression, tokens
    fed per step, tokens/s and identical (near-tie) outputs of the prompts."""
    return [
        speedup_cell(row),
        f"{row.median_speedup:.2f}x",
        cell(row.compression),
        cell(row.tokens_fed_per_step, 1),
        f"{row.tokens_per_s:.1f}",
        identical_cell(row.identical, row.near_tie, row.prompts),
    ]


def markdown(summary: pd.DataFrame) -> str:
    """``summary`` as a Markdown table: model, dtype, dataset, method, then ``measure_cells``."""
    rows = [[r.model, r.dtype, r.dataset, r.method, *measure_cells(r)] for r in summary.itertuples()]
    return markdown_table((*GROUP, *MEASURES), ["| " + " | ".join(map(str, r)) + " |" for r in rows])


def speedup_cell(row) -> str:
    """``"1.23x [1.10, 1.35]"``: the speedup and its 95% interval (the interval left out where a single
    prompt gave none)."""
    ci = "" if math.isnan(row.speedup_ci_low) else f" [{row.speedup_ci_low:.2f}, {row.speedup_ci_high:.2f}]"
    return f"{row.speedup:.2f}x{ci}"


def identical_cell(identical: float, near_tie: float, prompts: int) -> str:
    """``"19/20 (1 near-tie)"``: outputs identical to HF greedy's of ``prompts``, and how many more
    diverge only at a near-tie; ``"-"`` where outputs were not compared (NaN)."""
    if isinstance(identical, float) and math.isnan(identical):
        return "-"
    ties = int(near_tie) - int(identical)
    return f"{int(identical)}/{prompts}" + (f" ({ties} near-tie)" if ties else "")


def cell(value: float | None, digits: int = 2) -> str:
    """``value`` to ``digits`` decimals; ``"-"`` for None or NaN."""
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def lookup_k(method: str) -> int:
    """HF prompt lookup's K in a method name: ``hf_prompt_lookup`` (HF's default, 10) or
    ``hf_prompt_lookup_k{K}``."""
    return 10 if method == "hf_prompt_lookup" else int(method.rsplit("_k", 1)[1])


def dev_summary(path, model: str, dtype: str, any_dtype: bool = False) -> pd.DataFrame:
    """The rows of ``model`` in ``dtype`` of ``path``: a dev split's summary (``summary.csv``) or its
    per-prompt records (rows with ``seconds``, such as a benchmark's ``dev.csv``: summarized here), to
    tune on. ``any_dtype``: where ``dtype`` has no rows, the other dtypes' (HF prompt lookup's K is a
    property of the prompts and the model far more than of the dtype; the rows' ``dtype`` says which).
    Empty when nothing matches."""
    table = pd.read_csv(path)
    if "seconds" in table.columns:  # per-prompt records, not a summary
        table = summarize(table)
    table = table[table.model == model]
    if not any_dtype or (table.dtype == dtype).any():
        table = table[table.dtype == dtype]
    return table


def tuned_lookup_ks(summary: pd.DataFrame) -> dict[str, int]:
    """Per dataset, the K of the fastest ``hf_prompt_lookup_k{K}`` / ``hf_prompt_lookup`` row of a
    (dev split's) ``summary`` (ties: the smaller K); {} without such rows."""
    lookup = summary[summary.method.str.fullmatch(r"hf_prompt_lookup(_k\d+)?")].copy()
    lookup["k"] = [lookup_k(m) for m in lookup.method]
    lookup = lookup.sort_values(["dataset", "speedup", "k"], ascending=[True, False, True])
    return {dataset: int(group.k.iloc[0]) for dataset, group in lookup.groupby("dataset")}
