"""Wall time per decoding stage (``lade.types.STEP_STAGES``), synchronised with the model's device.

A GPU runs kernels asynchronously: without a synchronisation the forward's time would land in
whichever later stage first waits for its result (the verifier's ``.tolist()``). So on a CUDA device
every lap waits for the device first; on a CPU a lap is one clock read.
"""

from __future__ import annotations

import time

import torch


class StageTimer:
    """Accumulates wall time per stage into ``totals`` (a metrics dict: stage -> seconds)."""

    def __init__(self, totals: dict[str, float], device: torch.device):
        self.totals = totals
        self._cuda = device if device.type == "cuda" else None
        self._start = time.perf_counter()

    def lap(self, stage: str) -> None:
        """Add the time since the previous lap (or the start) to ``stage``."""
        if self._cuda is not None:
            torch.cuda.synchronize(self._cuda)
        now = time.perf_counter()
        self.totals[stage] += now - self._start
        self._start = now

    def now(self) -> float:
        """The time of the latest lap."""
        return self._start
