"""Where job results go: local files (the source of truth) and, mirrored, Weights & Biases.

Each job directory holds ``config.yaml`` (resolved), ``metrics.json`` (status, parameters,
summary metrics), ``prompts.csv`` (one row per prompt) and ``steps.csv`` (one row per decoding
step). ``metrics.json`` is written last and atomically, so its presence with ``status: completed``
means the job finished; a rerun into the same directory skips such jobs. A sweep's job directories
are named after their overrides (``job_dir_name``), not their index, so a sweep whose lists were
edited reruns into the same folder without overwriting the jobs that are still in it.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import warnings
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

METRICS_FILE = "metrics.json"
LONGEST_JOB_DIR = 120  # characters; longer override lists are cut and hashed


def job_dir_name(override_dirname: str) -> str:
    """A sweep job's folder name from its overrides as Hydra joins them (``hydra.job.override_dirname``:
    ``key=value`` items sorted and joined by commas): that text with ``/`` made ``_``, ``defaults``
    when there are none, and past ``LONGEST_JOB_DIR`` characters its first 100 and a hash of the whole
    (distinct override lists keep distinct folders)."""
    name = override_dirname.replace("/", "_") or "defaults"
    if len(name) > LONGEST_JOB_DIR:
        name = f"{name[:100]}-{hashlib.sha1(name.encode()).hexdigest()[:12]}"
    return name


def _write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def _write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as handle:
        if rows:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


class LocalRecorder:
    """Reads and writes one job directory."""

    def __init__(self, job_dir: str | Path):
        self.job_dir = Path(job_dir)

    def completed(self, overrides: list[str]) -> dict | None:
        """The stored record if this job already completed with the same overrides, else None."""
        try:
            record = json.loads((self.job_dir / METRICS_FILE).read_text())
        except (OSError, json.JSONDecodeError):
            return None
        if record.get("status") == "completed" and record.get("overrides") == list(overrides):
            return record
        return None

    def write(self, cfg: DictConfig, record: dict, prompts: list[dict], steps: list[dict]) -> None:
        """Store the resolved config, the per-prompt and per-step tables, then ``metrics.json``."""
        self.job_dir.mkdir(parents=True, exist_ok=True)
        _write_atomic(self.job_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
        _write_csv(self.job_dir / "prompts.csv", prompts)
        _write_csv(self.job_dir / "steps.csv", steps)
        _write_atomic(self.job_dir / METRICS_FILE, json.dumps(record, indent=2, default=str))


class BatchCheckpoint:
    """A job's finished batches, one JSON line each (``checkpoint.jsonl`` in its directory), so a job
    that dies resumes at its next batch: the first line names the job's overrides, and lines written
    under other overrides are ignored. Removed once the job's results are written."""

    FILE = "checkpoint.jsonl"

    def __init__(self, job_dir: str | Path, overrides: list[str]):
        self.path = Path(job_dir) / self.FILE
        self.overrides = list(overrides)

    def finished(self) -> dict[int, dict]:
        """Batch index -> what ``save`` stored for it; {} without a checkpoint of these overrides."""
        try:
            lines = self.path.read_text().splitlines()
        except OSError:
            return {}
        if not lines or json.loads(lines[0]).get("overrides") != self.overrides:
            return {}
        done = {}
        for line in lines[1:]:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:  # a line cut short when the job died
                break
            done[entry["batch"]] = entry
        return done

    def save(self, batch: int, entry: dict) -> None:
        """Append batch ``batch``'s results (JSON-serialisable ``entry``), flushed to disk."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not self.finished()
        with self.path.open("w" if fresh else "a") as handle:
            if fresh:
                handle.write(json.dumps({"overrides": self.overrides}) + "\n")
            handle.write(json.dumps({"batch": batch, **entry}, default=str) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


class NullLogger:
    """``logger=none``: local files only."""

    def log_job(self, **_) -> None:
        return None


class WandbLogger:
    """One W&B run per job, grouped per sweep; offline by default (``wandb sync`` uploads later).

    Any failure (W&B missing, no network in online mode, a full disk) is turned into one warning:
    the job's local files are already written, so a logging failure never loses a run.
    """

    def __init__(self, mode: str = "offline", project: str = "lade", entity: str | None = None, tags=()):
        if mode not in ("offline", "online", "disabled"):
            raise ValueError(f"logger.mode must be offline, online or disabled, got {mode!r}")
        self.mode = mode
        self.project = project
        self.entity = entity
        self.tags = list(tags)

    def log_job(
        self,
        job_dir: Path,
        name: str,
        group: str,
        config: dict,
        record: dict,
        prompts: list[dict],
        steps: list[dict],
    ) -> None:
        try:
            import wandb

            run = wandb.init(
                project=self.project,
                entity=self.entity,
                group=group,
                name=name,
                job_type=record.get("status", "job"),
                tags=self.tags,
                config=config,
                mode=self.mode,
                dir=str(job_dir),
                reinit="finish_previous",
                settings=wandb.Settings(silent=True, console="off"),
            )
            try:
                run.summary.update(
                    {k: v for k, v in record.get("metrics", {}).items() if not isinstance(v, dict)}
                )
                run.summary["status"] = record.get("status")
                for key, rows in (("prompts", prompts), ("steps", steps)):
                    if rows:
                        run.log(
                            {key: wandb.Table(columns=list(rows[0]), data=[list(r.values()) for r in rows])}
                        )
            finally:
                run.finish()
        except Exception as err:  # a logging failure must never fail the job
            warnings.warn(
                f"W&B logging failed ({type(err).__name__}: {err}); local results in {job_dir}", stacklevel=2
            )
