"""Forward latency as a function of tokens per step, measured once per model, dtype and device.

Lookahead decoding trades more tokens per forward pass for fewer passes; whether that pays depends on
how the forward's wall time grows with the number of tokens fed, which differs by orders of magnitude
between a GPU at batch size 1 (nearly flat) and a CPU (steep, with jumps where the matrix kernels
change strategy). ``calibrate`` measures that curve with the real step code path (explicit positions,
4D mask, a cached context); ``cached_latency`` stores it on disk per model, dtype, device and thread
count, so auto-configuration costs the measurement once.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from lade.machine import mkl_mode

# Step sizes measured: every size up to 16, where CPU kernels change strategy from one size to the next
# (float32 Qwen2.5-Coder-1.5B on an AVX512 EPYC: 3 tokens 1.47x one token, 4 tokens 1.01x; odd sizes
# dearer than the even ones around them; experiments/results/ab_latency_curve), sparser beyond.
DEFAULT_SIZES = (*range(1, 17), 20, 24, 32, 40, 48, 64, 80, 96, 128)
CALIBRATION_FORMAT = 3  # 2: curves at two contexts; 3: medians as measured (no longer made non-decreasing)


@dataclass(frozen=True)
class LatencyModel:
    """Seconds per forward pass as a function of S, the tokens fed in one step, and of the context
    (tokens already in the cache).

    ``sizes`` ascending, ``seconds`` (the same length) measured after ``context`` cached tokens, as
    measured: more tokens may cost less (a CPU's matrix kernels are faster for some row counts than
    for fewer rows), which the planner must see to choose the cheaper shape, and ``floor`` bounds from
    below. Between measured sizes the latency is interpolated linearly; beyond the largest it is
    extrapolated along the last segment (along the chord from the first size where the last segment
    falls, so it keeps growing). ``longer``, if given, is the same curve measured at a
    longer context: the latency is then linear in the context between (and beyond) the two, which
    matters because attention over a long prefix costs more per extra step token than the weights do
    (on this project's CPU, 3 tokens cost 1.14x one token after 256 cached tokens, 1.41x after 2,048).
    Contexts shorter than ``context`` use the ``context`` curve.
    """

    sizes: tuple[int, ...]
    seconds: tuple[float, ...]
    context: int = 0
    longer: LatencyModel | None = None

    def __post_init__(self):
        if not self.sizes or len(self.sizes) != len(self.seconds):
            raise ValueError("a latency model needs as many seconds as sizes, at least one")
        if list(self.sizes) != sorted(set(self.sizes)) or self.sizes[0] < 1:
            raise ValueError(f"sizes must be distinct, ascending and >= 1, got {self.sizes}")
        if any(s <= 0 for s in self.seconds):
            raise ValueError("latencies must be positive")
        if self.longer is not None and self.longer.context <= self.context:
            raise ValueError("the longer curve must be measured at a longer context")

    def __call__(self, size: int, context: int | None = None) -> float:
        """Predicted seconds for one forward pass over ``size`` tokens (>= 1) after ``context``
        cached tokens (default: the curve's own context)."""
        near = self._curve(size)
        if self.longer is None or context is None or context <= self.context:
            return near
        far = self.longer._curve(size)
        return near + (far - near) * (context - self.context) / (self.longer.context - self.context)

    def _curve(self, size: int) -> float:
        memo = self._priced
        if size not in memo:
            memo[size] = self._interpolate(size)
        return memo[size]

    @functools.cached_property
    def _priced(self) -> dict[int, float]:
        """This curve's seconds per size asked so far (the planner prices the same sizes every step)."""
        return {}

    def _interpolate(self, size: int) -> float:
        sizes, seconds = self.sizes, self.seconds
        if size <= sizes[0] or len(sizes) == 1:
            return seconds[0] if size <= sizes[0] else seconds[0] * size / sizes[0]
        i = bisect.bisect_left(sizes, size)
        if i < len(sizes) and sizes[i] == size:
            return seconds[i]
        if i == len(sizes):  # beyond the last size: extend the last segment, or the chord if it falls
            x0, y0 = (sizes[-2], seconds[-2]) if seconds[-1] >= seconds[-2] else (sizes[0], seconds[0])
            x1, y1 = sizes[-1], seconds[-1]
            return y1 + max(y1 - y0, 0.0) * (size - x1) / (x1 - x0)
        x0, x1, y0, y1 = sizes[i - 1], sizes[i], seconds[i - 1], seconds[i]
        return y0 + (y1 - y0) * (size - x0) / (x1 - x0)

    def floor(self, size: int, context: int | None = None) -> float:
        """The least seconds of a forward pass over ``size`` or more tokens (a lower bound for every
        step at least that large): the curve is linear between measured sizes and grows beyond the
        largest, so its least value from ``size`` on is at ``size`` or at a size measured above it
        (in this curve or the longer one)."""
        return min(self(s, context) for s in (size, *(s for s in self._breakpoints if s > size)))

    @functools.cached_property
    def _breakpoints(self) -> tuple[int, ...]:
        """The sizes measured in this curve or the longer one (computed once: the planner asks per step)."""
        return tuple(sorted(set(self.sizes) | (set(self.longer.sizes) if self.longer is not None else set())))

    def relative(self, size: int, context: int | None = None) -> float:
        """Latency of ``size`` tokens over the latency of one token (plain decoding)."""
        return self(size, context) / self(1, context)

    @classmethod
    def from_measurements(
        cls, sizes: Sequence[int], seconds: Sequence[float], context: int = 0
    ) -> LatencyModel:
        """The curve of the medians measured at ``sizes``, kept as measured. They used to be made
        non-decreasing, which priced every size after a dear one at its cost: on float32 Qwen2.5-Coder
        1.5B (AVX512 EPYC, MKL_CBWR=AUTO) 3 tokens cost 1.47x one token and 4 tokens 1.01x, so steps
        of 4 to 10 tokens were priced 1.47x (experiments/results/ab_latency_curve)."""
        return cls(tuple(int(s) for s in sizes), tuple(float(t) for t in seconds), context)

    def to_dict(self) -> dict:
        data = {"sizes": list(self.sizes), "seconds": list(self.seconds), "context": self.context}
        if self.longer is not None:
            data["longer"] = self.longer.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict) -> LatencyModel:
        longer = cls.from_dict(data["longer"]) if data.get("longer") else None
        return cls(tuple(data["sizes"]), tuple(data["seconds"]), int(data.get("context", 0)), longer)


@dataclass(frozen=True)
class BatchLatency:
    """Seconds per forward pass for B rows of S tokens each (a batched step).

    ``curves`` maps batch sizes to their ``LatencyModel`` over S (measured with B rows, each with its
    own cached context: a batch reads B times the keys and values, which a one-row curve of B*S tokens
    does not show); between measured batch sizes the latency is linear in B, beyond the largest it
    grows in proportion to B.
    """

    curves: dict[int, LatencyModel]

    def __post_init__(self):
        if 1 not in self.curves:
            raise ValueError("a batch latency needs the one-row curve (batch size 1)")

    def __call__(self, rows: int, size: int, context: int | None = None) -> float:
        if rows in self.curves:
            return self.curves[rows](size, context)
        lower = max(r for r in self.curves if r < rows)
        upper = min((r for r in self.curves if r > rows), default=None)
        low = self.curves[lower](size, context)
        if upper is None:
            return low * rows / lower
        high = self.curves[upper](size, context)
        return low + (high - low) * (rows - lower) / (upper - lower)

    def floor(self, rows: int, size: int, context: int | None = None) -> float:
        """The least seconds of a step of ``rows`` rows of ``size`` or more tokens each (a lower bound,
        ``LatencyModel.floor`` of the curves this batch size is read from, weighted as they are)."""
        if rows in self.curves:
            return self.curves[rows].floor(size, context)
        lower = max(r for r in self.curves if r < rows)
        upper = min((r for r in self.curves if r > rows), default=None)
        low = self.curves[lower].floor(size, context)
        if upper is None:
            return low * rows / lower
        weight = (rows - lower) / (upper - lower)
        return (1 - weight) * low + weight * self.curves[upper].floor(size, context)


def batch_sizes_to_measure(rows: int) -> list[int]:
    """The batch sizes whose curves cover B = ``rows`` and every smaller batch (rows leave a batch as
    they finish): the powers of two from 2 up to the first one >= ``rows``."""
    sizes, size = [], 2
    while rows > 1 and size < rows * 2:
        sizes.append(size)
        if size >= rows:
            break
        size *= 2
    return sizes


def sizes_worth_measuring(
    run_step: Callable[[int], None],
    sizes: Sequence[int],
    most_tokens: int,
    margin: float = 1.25,
    clock: Callable[[], float] = time.perf_counter,
) -> list[int]:
    """``sizes`` (ascending, starting at 1) up to the first whose single timed step costs more than
    ``margin * most_tokens`` steps of one token: a step that commits at most ``most_tokens`` tokens
    cannot pay beyond that, and on a CPU without fast kernels for the dtype the sizes past it would
    take most of the calibration's time (minutes on a 0.5B model). That size is kept, so the curve
    is measured up to where it stops mattering and extrapolated beyond. ``clock``: seconds, for
    tests to substitute a modelled one."""
    run_step(sizes[0])  # warm-up
    started = clock()
    run_step(sizes[0])
    one = clock() - started
    kept = [sizes[0]]
    for size in sizes[1:]:
        kept.append(size)
        started = clock()
        run_step(size)
        if clock() - started > margin * most_tokens * one:
            break
    return kept


def measure(
    run_step: Callable[[int], None], sizes: Sequence[int] = DEFAULT_SIZES, repeats: int = 5, context: int = 0
) -> LatencyModel:
    """Time ``run_step(S)`` for every S: one untimed warm-up round, then ``repeats`` rounds with the
    sizes interleaved (so machine noise spreads over all sizes), median per size. ``context``: the
    cached tokens ``run_step`` runs after, recorded in the curve."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for size in sizes:
        run_step(size)
    times: dict[int, list[float]] = {size: [] for size in sizes}
    for _ in range(repeats):
        for size in sizes:
            started = time.perf_counter()
            run_step(size)
            times[size].append(time.perf_counter() - started)
    return LatencyModel.from_measurements(sizes, [statistics.median(times[s]) for s in sizes], context)


def shape_drift(curve: LatencyModel, now: LatencyModel, sizes: Sequence[int]) -> float:
    """The largest relative difference, over ``sizes`` (> 1), between a step's cost relative to a
    one-token step in ``curve`` and in ``now`` (both at ``now``'s context): 0 when one is the other
    scaled, whatever the scale."""
    at = now.context
    return max((abs(now.relative(s, at) / curve.relative(s, at) - 1.0) for s in sizes if s > 1), default=0.0)


def calibration_key(model) -> str:
    """What the latency curve depends on: the architecture and sizes (the config, not the weights),
    dtype, device, attention kernel, CPU threads, MKL's code-path setting (``lade.machine.mkl_mode``:
    it changes what multi-token steps cost) and the torch version."""
    config = model.config.to_json_string(use_diff=False)
    device = model.get_input_embeddings().weight.device
    parts = [
        config,
        str(model.dtype),
        str(device),
        torch.cuda.get_device_name(device) if device.type == "cuda" else "",
        str(getattr(model.config, "_attn_implementation", None)),
        str(torch.get_num_threads()),
        torch.__version__,
    ]
    mode = mkl_mode() if device.type == "cpu" else None
    if mode is not None:  # unset: the key stays what it always was
        parts.append(f"MKL_CBWR={mode}")
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    name = Path(str(getattr(model.config, "name_or_path", "") or model.config.model_type)).name or "model"
    return f"{name}-{str(model.dtype).removeprefix('torch.')}-{device.type}-{digest}"


def default_calibration_dir() -> Path:
    """Where latency curves are cached when no directory is given."""
    return Path.home() / ".cache" / "lade" / "calibration"


def load_cached(path: Path) -> LatencyModel | None:
    """The curve stored at ``path``, or None when it is missing, unreadable or of another format."""
    try:
        data = json.loads(path.read_text())
        if data.get("format") != CALIBRATION_FORMAT:
            return None
        return LatencyModel.from_dict(data["latency"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(path: Path, latency: LatencyModel, key: str) -> None:
    """Write atomically: a run killed mid-write leaves the old file or none, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": CALIBRATION_FORMAT, "key": key, "latency": latency.to_dict()}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        json.dump(payload, handle, indent=1)
    os.replace(tmp, path)
