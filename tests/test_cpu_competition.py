"""`lade.cpu_competition`: other work's CPU time during a measurement, and the calibrator's warning."""

import logging
import os
import time
from pathlib import Path

from lade.calibrator import warn_if_competed
from lade.cpu_competition import CpuCompetition, busy_seconds

TICKS = os.sysconf("SC_CLK_TCK")


def write_stat(path: Path, user: int, idle: int, steal: int = 0) -> None:
    # cpu user nice system idle iowait irq softirq steal guest guest_nice
    path.write_text(f"cpu  {user} 0 0 {idle} 7 0 0 {steal} 5 0\ncpu0 {user} 0 0 {idle} 0 0 0 0 0 0\n")


def test_busy_seconds_sums_the_busy_fields_of_the_first_line(tmp_path):
    stat = tmp_path / "stat"
    write_stat(stat, user=3 * TICKS, idle=100 * TICKS, steal=TICKS)
    assert busy_seconds(stat) == 4.0  # idle, iowait and guest (counted in user already) left out
    stat.write_text("intr 1 2 3\n")
    assert busy_seconds(stat) is None
    assert busy_seconds(tmp_path / "missing") is None


def test_competition_is_busy_time_beyond_this_process_over_wall_time(tmp_path):
    stat = tmp_path / "stat"
    write_stat(stat, user=0, idle=0)
    with CpuCompetition(stat, resolution=0.0) as seen:
        started = time.perf_counter()
        own = time.process_time()
        while time.perf_counter() - started < 0.2:  # this process's own work is not competition
            pass
        own = time.process_time() - own
        wall = time.perf_counter() - started
        write_stat(stat, user=round((own + 2 * wall) * TICKS), idle=0)  # plus two other busy cores
    assert 1.5 < seen.cores < 2.5


def test_competition_is_unknown_without_proc_stat_or_for_a_short_block(tmp_path):
    with CpuCompetition(tmp_path / "missing", resolution=0.0) as seen:
        pass
    assert seen.cores is None
    stat = tmp_path / "stat"
    write_stat(stat, user=0, idle=0)
    with CpuCompetition(stat, resolution=60.0) as seen:
        write_stat(stat, user=100 * TICKS, idle=0)
    assert seen.cores is None


def test_competition_on_this_machine_is_a_number_or_unknown():
    with CpuCompetition(resolution=0.0) as seen:
        time.sleep(0.05)
    assert seen.cores is None or seen.cores >= 0.0


def test_the_calibrator_warns_when_other_work_competed(tmp_path, caplog):
    curve = tmp_path / "curve.json"
    with caplog.at_level(logging.WARNING, logger="lade.calibrator"):
        assert not warn_if_competed(None, curve)
        assert not warn_if_competed(0.2, curve)
        assert warn_if_competed(1.7, curve)
    (record,) = caplog.records
    assert "1.7 CPU cores" in record.getMessage() and str(curve) in record.getMessage()
