"""``python -m lade.sweep window=5,7 ngram=4``: sweep lookahead settings, keep every run.

Multirun by default: each job (one point of the sweep) validates its config, runs the configured
decoder and the model's own greedy decoding on the same prompts (``lade.experiment``), and writes
its directory (``lade.tracking``); W&B mirrors it. A job that raises at run time is recorded as
failed and the sweep goes on; a config error stops it before any model loads. Rerunning a sweep into
the same directory (``hydra.sweep.dir=...``) skips the jobs that completed, and a job that died
resumes at its next batch of prompts (``lade.tracking.BatchCheckpoint``); job folders are named after
their overrides, so editing the swept lists keeps the finished jobs. At the end a summary
table of all jobs is printed and written as ``summary.csv`` and ``summary.md`` in the sweep folder.
"""

from __future__ import annotations

import math
import time
import traceback
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from lade.config import register_schemas, validate
from lade.experiment import describe, run_job
from lade.model_cache import ModelCache
from lade.results import load_sweep, summary_table
from lade.tracking import BatchCheckpoint, LocalRecorder

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "conf")


def run_sweep_job(cfg: DictConfig, models: ModelCache | None = None) -> float:
    """One job of a sweep; returns its tokens/s (what ``sweep=optuna`` maximises), NaN if it failed.
    ``models``: the process's loaded model, shared by its jobs with the same model config."""
    hydra_cfg = HydraConfig.get()
    job_dir = Path(hydra_cfg.runtime.output_dir)
    overrides = list(hydra_cfg.overrides.task)
    name = hydra_cfg.job.override_dirname or "defaults"
    recorder = LocalRecorder(job_dir)
    done = recorder.completed(overrides)
    if done is not None:
        print(f"[job {hydra_cfg.job.num}] {name}: completed before, skipped ({job_dir})")
        return done["metrics"]["tokens_per_s"]

    components = validate(cfg)  # a config error propagates: every job would hit it
    checkpoint = BatchCheckpoint(job_dir, overrides)  # a job that dies resumes at its next batch
    record = {"status": "running", "job": hydra_cfg.job.num, "overrides": overrides, "params": describe(cfg)}
    prompts, steps = [], []
    started = time.perf_counter()
    try:
        desc = f"job {hydra_cfg.job.num} {name}"
        loads = models.loads if models is not None else 0
        record["metrics"], prompts, steps = run_job(
            cfg, components, desc=desc, checkpoint=checkpoint, models=models
        )
        if models is not None and models.loads == loads:
            print(f"[job {hydra_cfg.job.num}] {name}: reused the model an earlier job of this process loaded")
        record["status"] = "completed"
    except Exception as err:  # recorded, not raised: one bad job must not cost the rest of the sweep
        record.update(status="failed", error=f"{type(err).__name__}: {err}", traceback=traceback.format_exc())
        record["metrics"] = {}
        print(f"[job {hydra_cfg.job.num}] {name}: FAILED: {record['error']}")
    record["wall_s"] = time.perf_counter() - started
    recorder.write(cfg, record, prompts, steps)
    if record["status"] == "completed":
        checkpoint.remove()
    sweep_dir = Path(hydra_cfg.sweep.dir)
    components.logger.log_job(
        job_dir=job_dir,
        name=name,
        group=f"{cfg.name}-{sweep_dir.name}",
        config=OmegaConf.to_container(cfg, resolve=True),
        record=record,
        prompts=prompts,
        steps=steps,
    )
    return record["metrics"].get("tokens_per_s", math.nan)


def count_jobs(config: DictConfig) -> int | None:
    """Jobs a multirun will launch (basic sweeper: the product of the swept lists), None if unknown."""
    sweeper = config.hydra.sweeper
    if "n_trials" in sweeper:  # optuna and other samplers
        return int(sweeper.n_trials)
    overrides = list(config.hydra.overrides.task)
    overrides += [f"{key}={value}" for key, value in (sweeper.get("params") or {}).items()]
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # an override syntax the basic parser does not know: no total, still a progress bar
        return None
    sizes = {
        o.get_key_element(): len(list(o.sweep_string_iterator())) for o in parsed if o.is_sweep_override()
    }
    return math.prod(sizes.values())


class SweepSummary(Callback):
    """Progress over jobs, and at the end of a multirun the table of all jobs (``summary.csv``/``.md``)."""

    def __init__(self) -> None:
        self._progress = None

    def __getstate__(self) -> dict:
        # Parallel launchers (joblib, submitit) pickle the callbacks for their workers; a progress bar
        # does not survive that, and the one that counts lives in the launching process.
        return {**self.__dict__, "_progress": None}

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        self._progress = tqdm(total=count_jobs(config), desc="jobs", unit="job", position=0)

    def on_job_end(self, config: DictConfig, job_return, **kwargs) -> None:
        if self._progress is not None:
            self._progress.update(1)

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        if self._progress is not None:
            self._progress.close()
        sweep_dir = Path(config.hydra.sweep.dir)
        frame = load_sweep(sweep_dir)
        if frame.empty:
            print(f"No job results under {sweep_dir}")
            return
        table = summary_table(frame)
        frame.to_csv(sweep_dir / "summary.csv", index=False)
        (sweep_dir / "summary.md").write_text(table + "\n")
        print(f"\nSweep summary ({len(frame)} jobs, {sweep_dir}):\n{table}")
        print(
            f"Written: {sweep_dir / 'summary.csv'}, {sweep_dir / 'summary.md'} "
            "(load with lade.results.load_sweep)"
        )


register_schemas()


def main() -> None:
    """The command line: a Hydra app whose jobs share one ``ModelCache``: the jobs the basic launcher
    runs in this process load each model config once (launchers that run jobs in other processes
    pickle the task per job, and each job loads its own)."""
    models = ModelCache()

    @hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
    def sweep_job(cfg: DictConfig) -> float:
        return run_sweep_job(cfg, models)

    sweep_job()


if __name__ == "__main__":
    main()
