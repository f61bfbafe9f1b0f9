"""`python -m lade.sweep` end to end in a subprocess, on a tiny random model."""

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from lade.planner_report import calibration
from lade.results import load_prompts, load_steps, load_sweep
from lade.tracking import BatchCheckpoint, WandbLogger, job_dir_name


def sweep(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lade.sweep", "experiment=quick", f"hydra.sweep.dir={tmp_path}", *overrides],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def two_job_sweep(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweep")
    result = sweep(path, "logger=wandb", "window=2,3", "ngram=3")
    assert result.returncode == 0, result.stderr[-3000:]
    return path, result


def test_two_jobs_give_a_two_row_frame_and_wandb_offline_runs(two_job_sweep):
    path, result = two_job_sweep
    frame = load_sweep(path)
    assert len(frame) == 2 and list(frame["window"]) == [2, 3] and set(frame["ngram"]) == {3}
    for column in ("guess", "compression", "tokens_per_s", "speedup", "identical", "proposer", "status"):
        assert column in frame
    assert (frame["status"] == "completed").all() and (frame["identical"] == frame["prompts"]).all()
    assert result.stdout.count("reused the model") == 1  # one load for both jobs
    assert len(list(path.glob("*/wandb/offline-run-*/run-*.wandb"))) == 2
    for job_dir in frame["job_dir"]:
        assert {"config.yaml", "metrics.json", "prompts.csv", "steps.csv"} <= {
            p.name for p in Path(job_dir).iterdir()
        }
    assert (path / "summary.csv").exists() and (path / "summary.md").exists()
    assert "| W | N | G |" in result.stdout and "Sweep summary (2 jobs" in result.stdout


def test_per_prompt_and_per_step_frames(two_job_sweep):
    path, _ = two_job_sweep
    prompts, steps = load_prompts(path), load_steps(path)
    assert len(prompts) == 2 * 4 and {"window", "speedup", "identical", "prompt_id"} <= set(prompts.columns)
    per_job = steps.groupby(["job", "prompt"])["tokens"].sum()
    assert (per_job == 24).all()  # experiment=quick: 24 new tokens per prompt, every step accounted for


def test_rerun_skips_completed_jobs(two_job_sweep):
    path, _ = two_job_sweep
    before = [p.stat().st_mtime_ns for p in sorted(path.glob("*/metrics.json"))]
    rerun = sweep(path, "logger=wandb", "window=2,3", "ngram=3")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert rerun.stdout.count("completed before, skipped") == 2
    assert [p.stat().st_mtime_ns for p in sorted(path.glob("*/metrics.json"))] == before


def test_editing_a_sweep_list_keeps_the_finished_jobs(tmp_path):
    first = sweep(tmp_path, "logger=none", "window=2", "ngram=3")
    assert first.returncode == 0, first.stderr[-3000:]
    assert [p.parent.name for p in tmp_path.glob("*/metrics.json")] == [
        "experiment=quick,logger=none,ngram=3,window=2"
    ]  # folders named after their overrides (sorted, as Hydra joins them), not their index
    edited = sweep(tmp_path, "logger=none", "window=4,2", "ngram=3")  # window=2 is now job 1
    assert edited.returncode == 0, edited.stderr[-3000:]
    assert edited.stdout.count("completed before, skipped") == 1  # window=2 ran before
    frame = load_sweep(tmp_path)
    assert sorted(frame["window"]) == [2, 4] and (frame["status"] == "completed").all()
    # an older sweep's numbered folder of the same job (before folders were named after overrides)
    # is superseded by the newer one, in jobs and in per-prompt rows alike
    old = tmp_path / "0"
    shutil.copytree(tmp_path / "experiment=quick,logger=none,ngram=3,window=2", old)
    os.utime(old / "metrics.json", (1, 1))
    assert sorted(load_sweep(tmp_path)["window"]) == [2, 4]
    assert len(load_prompts(tmp_path)) == 2 * 4


def test_a_job_that_died_resumes_at_its_next_batch(tmp_path):
    from lade.config import validate
    from lade.experiment import run_job
    from tests.test_config import compose_config

    cfg = compose_config("experiment=quick", "logger=none")
    checkpoint = BatchCheckpoint(tmp_path, ["window=2"])
    _, first, _ = run_job(cfg, validate(cfg), progress=False, checkpoint=checkpoint)
    lines = checkpoint.path.read_text().splitlines()
    assert len(lines) == 1 + len(first)  # the overrides, then one line per batch (one prompt each)
    checkpoint.path.write_text("\n".join(lines[:3]) + "\n" + lines[3][:20])  # died while writing batch 2
    metrics, resumed, steps = run_job(cfg, validate(cfg), progress=False, checkpoint=checkpoint)
    assert resumed[:2] == first[:2]  # batches 0 and 1 come from the checkpoint, seconds and all
    assert [r["seconds"] for r in resumed[2:]] != [r["seconds"] for r in first[2:]]  # timed again
    assert metrics["prompts"] == len(first) and len(steps) == sum(r["steps"] for r in resumed)
    assert BatchCheckpoint(tmp_path, ["window=3"]).finished() == {}  # another job's checkpoint


def test_a_sweep_through_the_submitit_launcher(tmp_path):
    """``hydra/launcher=submitit_local`` runs each job as a submitit job (pickled, in its own process),
    the code path ``submitit_slurm`` takes on a cluster: scaling out is a launcher override."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    result = sweep(
        tmp_path,
        "logger=none",
        "window=2,3",
        "ngram=3",
        "hydra/launcher=submitit_local",
        "hydra.launcher.timeout_min=10",
        "hydra.launcher.cpus_per_task=1",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    frame = load_sweep(tmp_path)
    assert sorted(frame["window"]) == [2, 3] and (frame["status"] == "completed").all()
    assert (frame["identical"] == frame["prompts"]).all()
    assert list(tmp_path.glob(".submitit/*/*_result.pkl"))  # the jobs went through submitit


def test_a_model_cache_loads_each_config_once_and_holds_one_model():
    from omegaconf import OmegaConf

    from lade.model_cache import ModelCache

    loaded = []
    cache = ModelCache(load=lambda config: loaded.append(config.name) or (config.name, None))
    tiny, other = OmegaConf.create({"name": "tiny", "dtype": "float32"}), OmegaConf.create({"name": "other"})
    assert cache.get(tiny) == ("tiny", None)
    assert cache.get(OmegaConf.create({"name": "tiny", "dtype": "float32"})) == ("tiny", None)
    assert loaded == ["tiny"] and cache.loads == 1  # an equal config: the same model
    cache.get(other)
    cache.get(tiny)  # only the latest is held: loaded again
    assert loaded == ["tiny", "other", "tiny"]


def test_job_folder_names():
    assert job_dir_name("") == "defaults"
    assert job_dir_name("data.path=/a/b.jsonl,window=3") == "data.path=_a_b.jsonl,window=3"
    long_a, long_b = "x=" + "a" * 200, "x=" + "a" * 199 + "b"
    assert len(job_dir_name(long_a)) <= 120 and job_dir_name(long_a) != job_dir_name(long_b)


def test_a_crashing_job_is_recorded_and_the_sweep_goes_on(tmp_path):
    # 600 new tokens exceed the tiny model's 512-token context: the second job raises at run time
    result = sweep(tmp_path, "logger=none", "max_new_tokens=600,8")
    assert result.returncode == 0, result.stderr[-3000:]
    frame = load_sweep(tmp_path)
    assert list(frame["status"]) == ["failed", "completed"]
    assert "context length" in frame.loc[0, "error"]
    record = json.loads((Path(frame.loc[0, "job_dir"]) / "metrics.json").read_text())
    assert "Traceback" in record["traceback"]


def test_a_config_error_stops_before_any_job_runs(tmp_path):
    result = sweep(tmp_path, "logger=none", "window=0")
    assert result.returncode != 0
    assert "window must be >= 1" in result.stderr
    assert not list(tmp_path.glob("*/metrics.json"))


def test_wandb_failure_warns_and_keeps_going(monkeypatch, tmp_path):
    import wandb

    def broken_init(**_):
        raise RuntimeError("no W&B here")

    monkeypatch.setattr(wandb, "init", broken_init)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        WandbLogger().log_job(
            job_dir=tmp_path, name="x", group="g", config={}, record={}, prompts=[], steps=[]
        )
    assert len(caught) == 1 and "no W&B here" in str(caught[0].message)


def test_auto_and_fixed_sizes_sweep_side_by_side(tmp_path):
    result = sweep(tmp_path, "logger=none", "window=auto,3", "guess=auto", "ngram=auto")
    assert result.returncode == 0, result.stderr[-3000:]
    frame = load_sweep(tmp_path)
    assert sorted(map(str, frame["window"])) == ["3", "auto"]
    assert (frame["identical"] == frame["prompts"]).all()
    assert {"step_tokens_mean", "branch_fraction"} <= set(frame.columns)
    steps = load_steps(tmp_path)  # G and N auto in both jobs: every step has its plan's expectations
    assert steps["planned_tokens"].notna().all() and (steps["planned_tokens"] >= 1).all()
    assert (steps["planned_seconds"] > 0).all() and (steps["fed"] >= 1).all()
    report = calibration(steps)  # per job (window) and step kind
    assert set(report["kind"]) <= {"plain", "drafting"} and report["steps"].sum() == len(steps)
    assert set(map(str, report["window"])) == {"3", "auto"}


def test_batch_size_sweeps_from_hydra(tmp_path):
    result = sweep(tmp_path, "logger=none", "batch_size=1,3", "data.limit=5")
    assert result.returncode == 0, result.stderr[-3000:]
    frame = load_sweep(tmp_path)
    assert sorted(frame["batch_size"]) == [1, 3]
    assert (frame["identical"] == frame["prompts"]).all()  # every row equals HF batched greedy
    assert (frame["prompts"] == 5).all()
    rows = load_prompts(tmp_path)
    batched = rows[rows["batch_size"] == 3]
    assert sorted(batched["batch"].unique()) == [0, 1]  # 3 + 2 prompts
