"""Sweep results as pandas DataFrames, read from the job directories (the source of truth).

frame = load_sweep("outputs/sweeps/2026-11-29_10-00-00")   # one row per job
per_prompt = load_prompts(path)                             # one row per (job, prompt)
per_step = load_steps(path)                                 # one row per (job, prompt, step)
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from lade.tracking import METRICS_FILE

SUMMARY_COLUMNS = {
    "tag": "tag",
    "window": "W",
    "ngram": "N",
    "guess": "G",
    "proposer": "proposer",
    "pool": "pool",
    "eviction": "eviction",
    "verifier": "verifier",
    "data": "data",
    "compression": "compression",
    "tokens_per_s": "tok/s",
    "baseline_tokens_per_s": "baseline tok/s",
    "speedup": "speedup",
    "identical": "identical",
    "near_tie": "near-tie",
    "worst_margin": "worst margin",
    "status": "status",
}


def _job_dirs(path: str | Path) -> list[Path]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no sweep results at {path}")
    return sorted(p.parent for p in path.rglob(METRICS_FILE))


def _latest_per_overrides(job_dirs: list[Path]) -> list[Path]:
    """The job folders less those superseded: of folders of one sweep (one parent) whose jobs ran the
    same overrides (e.g. a numbered folder of an older sweep beside its folder named after its
    overrides, ``lade.tracking.job_dir_name``), the most recently written."""
    latest: dict[tuple, Path] = {}
    for job_dir in job_dirs:
        record = json.loads((job_dir / METRICS_FILE).read_text())
        key = (job_dir.parent, tuple(record.get("overrides", [])) or (job_dir.name,))
        kept = latest.get(key)
        if kept is None or (job_dir / METRICS_FILE).stat().st_mtime > (kept / METRICS_FILE).stat().st_mtime:
            latest[key] = job_dir
    kept_dirs = set(latest.values())
    return [job_dir for job_dir in job_dirs if job_dir in kept_dirs]


def load_sweep(path: str | Path) -> pd.DataFrame:
    """One row per job under ``path`` (the latest of jobs of one sweep with the same overrides):
    parameters, metrics, status, job directory."""
    rows = []
    for job_dir in _latest_per_overrides(_job_dirs(path)):
        record = json.loads((job_dir / METRICS_FILE).read_text())
        metrics = {k: v for k, v in record.get("metrics", {}).items() if not isinstance(v, dict)}
        rows.append(
            {
                **record.get("params", {}),
                **metrics,
                "status": record.get("status"),
                "error": record.get("error"),
                "job": record.get("job"),
                "overrides": " ".join(record.get("overrides", [])),
                "wall_s": record.get("wall_s"),
                "job_dir": str(job_dir),
            }
        )
    frame = pd.DataFrame(rows)
    if not frame.empty and "job" in frame:
        frame = frame.sort_values(["job", "job_dir"], na_position="last").reset_index(drop=True)
    return frame


def _load_tables(path: str | Path, filename: str) -> pd.DataFrame:
    frames = []
    for job_dir in _latest_per_overrides(_job_dirs(path)):
        table = job_dir / filename
        if table.exists() and table.stat().st_size > 0:
            frame = pd.read_csv(table)
            record = json.loads((job_dir / METRICS_FILE).read_text())
            for key, value in record.get("params", {}).items():
                frame[key] = value
            frame["job"] = record.get("job")
            frame["job_dir"] = str(job_dir)
            frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def load_prompts(path: str | Path) -> pd.DataFrame:
    """One row per (job, prompt), with the job's parameters as columns."""
    return _load_tables(path, "prompts.csv")


def load_steps(path: str | Path) -> pd.DataFrame:
    """One row per (job, prompt, decoding step): tokens committed, wall time of the step, the
    candidates it verified (``candidates``), the tokens it fed (``fed``) and, under auto, what its plan
    expected (``planned_tokens``, ``planned_seconds``; NaN without a planner) and, under auto over
    several draft sources, the source it verified (``source``; empty otherwise). Columns added later are
    absent (or NaN) in results written before them."""
    return _load_tables(path, "steps.csv")


VARYING_COLUMNS = (
    "guesses",
    "key_length",
    "seed_prompt",
    "seed_output",
    "selection",
    "model",
    "max_new_tokens",
    "batch_size",
    "seed",
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "repetition_penalty",
)


def varying_columns(frame: pd.DataFrame, candidates) -> list[str]:
    """The ``candidates`` (column names, in their order, duplicates dropped) that are in ``frame`` and
    take more than one value there; a missing value (NaN) counts as a value, as greedy jobs have no
    temperature beside sampling ones. Lists (unhashable) are compared by their text."""

    def values(column: str) -> pd.Series:
        return frame[column].map(lambda v: repr(v) if isinstance(v, (list, dict, set)) else v)

    return [c for c in dict.fromkeys(candidates) if c in frame and values(c).nunique(dropna=False) > 1]


def _cell(value) -> str:
    """A table cell: '-' for missing values, whole floats without their '.0'."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def summary_table(frame: pd.DataFrame) -> str:
    """Markdown table of a ``load_sweep`` frame: the columns a reader compares, plus any other
    parameter that varies across jobs and the error of failed jobs."""
    columns = [c for c in SUMMARY_COLUMNS if c in frame]
    columns += varying_columns(frame, VARYING_COLUMNS)
    if "error" in frame and frame["error"].notna().any():
        columns.append("error")
    view = frame[columns].rename(columns=SUMMARY_COLUMNS)
    if "error" in view:
        view["error"] = view["error"].map(lambda e: str(e)[:80] if pd.notna(e) else "")
    if "identical" in frame and "prompts" in frame:
        view["identical"] = [
            f"{int(i)}/{int(p)}" if pd.notna(i) else "-"
            for i, p in zip(frame["identical"], frame["prompts"], strict=True)
        ]
    for column in ("compression", "speedup"):
        if SUMMARY_COLUMNS[column] in view:
            view[SUMMARY_COLUMNS[column]] = view[SUMMARY_COLUMNS[column]].map(
                lambda v: f"{v:.3f}" if pd.notna(v) else "-"
            )
    for column in ("tok/s", "baseline tok/s"):
        if column in view:
            view[column] = view[column].map(lambda v: f"{v:.1f}" if pd.notna(v) else "-")
    header = "| " + " | ".join(view.columns) + " |"
    view = view.map(_cell)
    rule = "|" + "---|" * len(view.columns)
    body = ["| " + " | ".join(str(v) for v in row) + " |" for row in view.itertuples(index=False)]
    return "\n".join([header, rule, *body])
