"""This process's memory, for benchmarks: resident now and the peak so far (Linux), in MiB.

A peak is a per-process high-water mark, so comparing models or methods needs a fresh process for
each (``experiments/memory.py``, ``experiments/real_models.py``).
"""

from __future__ import annotations

import resource


def rss_mib() -> float:
    """Resident memory now (``VmRSS`` of /proc/self/status), MiB; NaN where /proc is missing."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def peak_rss_mib() -> float:
    """Peak resident memory so far (``ru_maxrss``: KiB on Linux), MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
