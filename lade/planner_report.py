"""How well auto's planner predicts its steps: what each plan expected against what the step did.

Every auto step records the tokens its plan expected to commit and the forward seconds it priced the
step at (``DecodingMetrics.planned_tokens`` / ``planned_s``; ``planned_tokens`` / ``planned_seconds``
in a sweep job's ``steps.csv``). A planner that chooses drafting steps by their expected rate is only
as good as those two numbers on the steps it chooses: when the drafting steps commit fewer tokens than
expected, or take longer, auto loses to plain decoding exactly where it thought it won.

    python -m lade.planner_report SWEEP_DIR [--out FOLDER]

prints, per job (its swept parameters) and step kind (``plain``: one token fed; ``drafting``: more;
under auto over several draft sources, the source the step verified, as the planner that chose the
step is the one whose prediction is tested),
the steps, the tokens expected and committed per step, the seconds priced and taken per step, and the
tokens per second each implies; ``--out`` also writes ``planner_report.csv`` and ``planner_report.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from lade.figures import markdown_table
from lade.results import VARYING_COLUMNS, load_steps, varying_columns

COLUMNS = [
    "steps",
    "planned_tokens",
    "tokens",
    "tokens_ratio",
    "planned_ms",
    "ms",
    "seconds_ratio",
    "planned_tokens_per_s",
    "tokens_per_s",
]


def calibration(steps: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """Per group of ``by`` (default: the sweep parameters that vary, and the data) and step kind
    (``step_kind``): the planner's expectations against the steps' outcomes.

    ``steps``: ``lade.results.load_steps`` rows with ``fed``, ``tokens``, ``seconds``,
    ``planned_tokens`` and ``planned_seconds`` (steps without a plan, NaN, are left out). Returns one
    row per group and kind with ``COLUMNS``: means per step, ``tokens_ratio`` = committed / expected
    tokens and ``seconds_ratio`` = taken / priced seconds (1.0: the planner is right on average)."""
    needed = {"fed", "tokens", "seconds", "planned_tokens", "planned_seconds"}
    if steps.empty or not needed <= set(steps.columns):
        raise ValueError(
            f"the steps need the columns {sorted(needed)} (auto jobs written by this version of lade)"
        )
    planned = steps.dropna(subset=["planned_tokens", "planned_seconds"])
    if planned.empty:
        raise ValueError("no step has a plan: the jobs did not run auto (window/ngram/guess = auto)")
    if by is None:
        by = varying_columns(
            planned, ("window", "ngram", "guess", "data", "category", "verifier", *VARYING_COLUMNS)
        )
    planned = planned.assign(kind=planned.apply(step_kind, axis=1))
    rows = []
    for key, group in planned.groupby([*by, "kind"], sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        tokens, expected = group["tokens"].mean(), group["planned_tokens"].mean()
        seconds, priced = group["seconds"].mean(), group["planned_seconds"].mean()
        rows.append(
            {
                **dict(zip([*by, "kind"], key, strict=True)),
                "steps": len(group),
                "planned_tokens": expected,
                "tokens": tokens,
                "tokens_ratio": tokens / expected,
                "planned_ms": 1000 * priced,
                "ms": 1000 * seconds,
                "seconds_ratio": seconds / priced,
                "planned_tokens_per_s": expected / priced,
                "tokens_per_s": tokens / seconds,
            }
        )
    return pd.DataFrame(rows, columns=[*by, "kind", *COLUMNS])


def step_kind(step: pd.Series) -> str:
    """``plain`` (one token fed), else the draft source the step verified when the steps name one
    (auto over several sources), else ``drafting``."""
    if step["fed"] == 1:
        return "plain"
    source = step.get("source")
    return source if isinstance(source, str) and source else "drafting"


def markdown(table: pd.DataFrame) -> str:
    """``calibration``'s table in Markdown."""
    formats = {c: ".2f" for c in ("planned_tokens", "tokens", "tokens_ratio", "seconds_ratio")}
    formats |= {c: ".1f" for c in ("planned_ms", "ms", "planned_tokens_per_s", "tokens_per_s")}
    return markdown_table(table, formats)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "sweep_dir", type=Path, help="a sweep folder (python -m lade.sweep ... hydra.sweep.dir=)"
    )
    parser.add_argument("--out", type=Path, default=None, help="write planner_report.csv and .md here")
    args = parser.parse_args(argv)
    if not args.sweep_dir.is_dir():
        parser.error(f"{args.sweep_dir} is not a folder")
    table = calibration(load_steps(args.sweep_dir))
    text = markdown(table)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out / "planner_report.csv", index=False)
        (args.out / "planner_report.md").write_text(text + "\n")
    return table


if __name__ == "__main__":
    main()
