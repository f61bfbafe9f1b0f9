"""How many CPU cores other work took while this process measured something.

A latency measurement taken while another process runs on the same cores prices every step wrongly,
and a cached curve keeps steering auto after the other process has gone. The signal is the machine's
busy CPU time (``/proc/stat``: user, nice, system, irq, softirq and steal, the time a hypervisor gave
to another guest) less this process's own CPU time, over the wall time of the measurement: about 0
on an idle machine, about 1 per core another busy process holds. It does not depend on how well this
process's own threads use their cores (a small model's forward leaves cores idle; that is no
competition). Linux only; elsewhere the figure is unknown (None).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

PROC_STAT = Path("/proc/stat")
BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user, nice, system, irq, softirq, steal (not idle, iowait, guest)


def busy_seconds(stat: Path = PROC_STAT) -> float | None:
    """The machine's busy CPU seconds since boot, summed over its cores; None where unreadable."""
    try:
        fields = stat.read_text().splitlines()[0].split()
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError, AttributeError):
        return None
    if not fields or fields[0] != "cpu":
        return None
    try:
        return sum(int(fields[1 + i]) for i in BUSY_FIELDS if 1 + i < len(fields)) / ticks
    except ValueError:
        return None


class CpuCompetition:
    """``with CpuCompetition() as seen: measure()``; then ``seen.cores``: the average number of cores
    that other work (other processes, other guests of the host) kept busy during the block, or None
    where the machine does not say (not Linux) or the block was too short to tell (under ``resolution``
    seconds of wall time: ``/proc/stat`` counts in ticks of 10 ms)."""

    def __init__(self, stat: Path = PROC_STAT, resolution: float = 0.5):
        self.stat = stat
        self.resolution = resolution
        self.cores: float | None = None

    def __enter__(self) -> CpuCompetition:
        self._busy = busy_seconds(self.stat)
        self._own = time.process_time()
        self._wall = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter() - self._wall
        own = time.process_time() - self._own
        busy = busy_seconds(self.stat)
        if self._busy is None or busy is None or wall < self.resolution:
            self.cores = None
            return
        self.cores = max(0.0, (busy - self._busy - own) / wall)
