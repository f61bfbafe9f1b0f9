"""A decoder's latency curves: measured through its own step path, cached on disk, announced.

Owns the curves auto plans with (``lade.calibration.LatencyModel``: seconds per forward vs tokens per
step, one row and per batch size), when they are measured, where they are cached and the log line
that says so. It runs the model only through ``lade.executor.StepExecutor``; it never decodes.

A curve given by the caller (``latency=``) skips every measurement; batches then approximate B rows
of S tokens by one row of B*S. Without one, the first auto call measures the one-row curve (and a
batch call the curves of its batch sizes) once per model, dtype, device and thread count, and logs
what it measures and where the result is cached; ``calibrate()`` does it up front.

A cached curve is checked before it is used: steps of 1, 2 and 16 tokens (those within the curve's
measured sizes; a second or two) are timed on this machine now, and where the cost of a step relative
to a one-token step differs from the cached curve's by more than ``tolerance``, the curve is measured
again (and logged). The plan depends on those relative costs, not on absolute speed, so a machine
that is uniformly slower now keeps its curve. A cache outlives the conditions it was measured in: a
machine that changed (the same model name on another host) or a curve measured beside another job
would otherwise steer auto for good (a stale curve that priced a 16-token step at 1.8x one token,
where the machine now took 2.5x, made auto run the branch at a loss). A measurement during which other
work kept the cores busy (``lade.cpu_competition``) is logged as such, with how to measure it again;
a check that finds drift while other work competes keeps the cached curve (and says so), as a curve
measured then would price steps as they run beside that work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

from lade.cache import new_cache
from lade.calibration import (
    DEFAULT_SIZES,
    BatchLatency,
    LatencyModel,
    batch_sizes_to_measure,
    calibration_key,
    default_calibration_dir,
    load_cached,
    measure,
    shape_drift,
    sizes_worth_measuring,
    store,
)
from lade.cpu_competition import CpuCompetition
from lade.executor import MaskBuffers, StepExecutor
from lade.machine import MKL_MODE_VARIABLE, mkl_mode
from lade.slots import KeySlots

log = logging.getLogger(__name__)
CACHE_TOLERANCE = 0.25  # a cached curve whose relative step costs are this far off is measured again
PROBE_SIZES = (1, 2, 16)  # the step sizes timed to check a cached curve
COMPETING_CORES = 0.5  # other work busier than this during a measurement is warned about
# a 2-token float32 step this much dearer than a 1-token one, with MKL in its default mode, is the
# slow small-matrix dispatch ``lade.machine`` describes (1.5-1.7x where seen; 1.0-1.15x with MKL_CBWR=AUTO)
SLOW_TWO_TOKEN_STEP = 1.4


def _competed(cores: float | None, limit: float = COMPETING_CORES) -> bool:
    """Whether other work kept more than ``limit`` cores busy on average (None: unknown, no)."""
    return cores is not None and cores > limit


def warn_if_competed(cores: float | None, path: Path, limit: float = COMPETING_CORES) -> bool:
    """Log a warning (and return True) when other work kept more than ``limit`` cores busy on
    average while a curve was measured (``lade.cpu_competition``; None: unknown, no warning)."""
    if not _competed(cores, limit):
        return False
    log.warning(
        "lookahead auto: other processes kept %.1f CPU cores busy while the latency curve was measured; "
        "it prices steps as they ran beside them. Measure it again on an idle machine "
        "(decoder.calibrate(refresh=True), or delete %s)",
        cores,
        path,
    )
    return True


def hint_if_mkl_dispatch_slow(curve: LatencyModel, model) -> bool:
    """Log a hint (and return True) when ``curve`` (one row) prices a 2-token step at
    ``SLOW_TWO_TOKEN_STEP`` or more times a 1-token one for a float32 ``model`` on a CPU whose MKL runs
    in its default mode: there, setting ``MKL_CBWR=AUTO`` before Python starts made multi-token steps
    about as cheap as one token (``lade.machine``), which every speculative method needs."""
    on_cpu = model.get_input_embeddings().weight.device.type == "cpu"
    if not (on_cpu and model.dtype == torch.float32 and torch.backends.mkl.is_available()):
        return False
    if mkl_mode() is not None or 2 not in curve.sizes or curve.relative(2) < SLOW_TWO_TOKEN_STEP:
        return False
    log.warning(
        "lookahead auto: a 2-token step costs %.2fx a 1-token step on this CPU, so drafts rarely pay. "
        "MKL's default dispatch of small float32 matrix products can cause this: try starting Python "
        "with %s=AUTO in the environment (it cannot be changed once torch has loaded), then "
        "decoder.calibrate(refresh=True)",
        curve.relative(2),
        MKL_MODE_VARIABLE,
    )
    return True


class Calibrator:
    """The latency curves of one decoder.

    Args:
        executor: the decoder's step executor (the model and its forward path).
        largest_step: the most tokens one step of the decoder feeds (1 + W(N-1) + G * candidate length).
        max_accepted: the most tokens one step can commit (1 + candidate length).
        latency: a one-row curve given by the caller (no measurement), or None.
        directory: where measured curves are cached (default ``~/.cache/lade/calibration``).
        seed: seeds the random text the measurement feeds.
        tolerance: how far a cached curve's relative step costs may be from a quick measurement now
            (``drift``) before it is measured again; None: cached curves are used unchecked.
        competition: makes the context manager that reads how many cores other work kept busy
            during a measurement (``CpuCompetition``; tests give a fixed reading).
    """

    def __init__(
        self,
        executor: StepExecutor,
        largest_step: int,
        max_accepted: int,
        latency: LatencyModel | None = None,
        directory: str | Path | None = None,
        seed: int = 0,
        tolerance: float | None = CACHE_TOLERANCE,
        competition: Callable[[], CpuCompetition] = CpuCompetition,
    ):
        self.executor = executor
        self.largest_step = largest_step
        self.max_accepted = max_accepted
        self.latency = latency
        self.measures_batches = latency is None  # a given curve is used as is, batches included
        self.batch_curves: dict[int, LatencyModel] = {}
        self.directory = directory
        self.seed = seed
        self.tolerance = tolerance
        self.competition = competition

    def calibrate(
        self, sizes=DEFAULT_SIZES, repeats: int = 5, refresh: bool = False, rows: int = 1
    ) -> LatencyModel:
        """Measure (or load from the cache) the curve of ``rows`` rows (``LookaheadDecoder.calibrate``)."""
        directory = default_calibration_dir() if self.directory is None else self.directory
        key = calibration_key(self.executor.model) + (f"-rows{rows}" if rows > 1 else "")
        path = Path(directory) / f"{key}.json"
        cached = None if refresh else load_cached(path)
        if cached is not None and self.tolerance is not None:
            with self.competition() as competition:
                drift = self.drift(cached, rows)
            if drift > self.tolerance and _competed(competition.cores):
                # a probe beside other work says little about the machine: a curve measured now would
                # price steps as they run beside it, so the cached one is kept
                log.warning(
                    "lookahead auto: the cached latency curve in %s looked %.0f%% off this machine, but "
                    "other processes kept %.1f CPU cores busy during the check; keeping it "
                    "(decoder.calibrate(refresh=True) measures it again)",
                    path,
                    100 * drift,
                    competition.cores,
                )
            elif drift > self.tolerance:
                log.warning(
                    "lookahead auto: the cached latency curve in %s is %.0f%% off this machine now; "
                    "measuring it again",
                    path,
                    100 * drift,
                )
                cached = None
        if cached is None:
            log.warning(
                "lookahead auto: measuring forward latency vs tokens per step%s, once for this model and "
                "machine (cached in %s; pass latency= to skip)",
                f" for batches of {rows}" if rows > 1 else "",
                path,
            )
            with self.competition() as competition:
                cached = self._measure(sizes, repeats, rows=rows)
            warn_if_competed(competition.cores, path)
            if rows == 1:
                hint_if_mkl_dispatch_slow(cached, self.executor.model)
            store(path, cached, key)
        if rows == 1:
            self.latency = cached
        else:
            self.batch_curves[rows] = cached
        return cached

    def one_row(self) -> LatencyModel:
        """The one-row curve, measured (or loaded) first if there is none."""
        if self.latency is None:
            self.calibrate()
        return self.latency

    def batch_latency(self, rows: int) -> BatchLatency | None:
        """The latency of batched steps for batches of up to ``rows`` rows: measured per batch size
        (2, 4, 8, ... up to ``rows``; cached) unless a curve was given, then only the curves of
        explicit ``calibrate(rows=...)`` calls. None without any (B rows of S tokens then count as one
        row of B*S tokens)."""
        if rows < 2:
            return None
        if self.measures_batches:
            self.one_row()
            for size in batch_sizes_to_measure(rows):
                if size not in self.batch_curves:
                    self.calibrate(rows=size, repeats=3)
        if not self.batch_curves:
            return None
        return BatchLatency({1: self.latency, **self.batch_curves})

    def drift(self, curve: LatencyModel, rows: int = 1, sizes=PROBE_SIZES, context: int = 256) -> float:
        """How far ``curve`` is from this machine now: the largest relative difference, over steps of
        ``sizes`` tokens (those up to the decoder's largest step and the curve's largest measured size),
        between a step's cost relative to a one-token step in ``curve`` and timed now after ``context``
        cached tokens (3 rounds, median). 0 when only one size is left."""
        largest = min(max(1, self.largest_step), curve.sizes[-1])
        sizes = sorted({1, *(s for s in sizes if s <= largest)})
        if len(sizes) < 2:
            return 0.0
        now = self._measure(sizes, repeats=3, contexts=(context,), rows=rows, probe=True)
        return shape_drift(curve, now, sizes)

    def _measure(
        self, sizes, repeats: int, contexts=(256, 1280), rows: int = 1, probe: bool = False
    ) -> LatencyModel:
        """Time steps of S tokens (logits at every row: an upper bound for the LM head) after each
        of ``contexts`` cached random tokens (as far as the context length allows), through the same
        forward path as decoding (``rows`` > 1: a batch of that many rows, each S tokens after its own
        context); the curves form one context-dependent ``LatencyModel``."""
        executor = self.executor
        largest_step = self.largest_step
        if rows > 1:  # a batch's steps stay small: do not time thousands of tokens per forward
            largest_step = min(largest_step, max(4, 128 // rows))
        room = executor.context_length if executor.context_length is not None else 1 << 30
        above = [s for s in sizes if s >= largest_step]
        wanted = sorted({s for s in sizes if s < largest_step} | set(above[:1]) | {1})
        wanted = [s for s in wanted if s < room]
        lengths = sorted({max(1, min(c, room - wanted[-1])) for c in contexts})
        generator = torch.Generator().manual_seed(self.seed)
        vocab = executor.vocab_size
        text = torch.randint(vocab, (lengths[-1] + wanted[-1],), generator=generator).to(executor.device)
        curves = []
        with torch.inference_mode():
            for context in lengths:
                cache = new_cache()
                executor.prefill(text[None, :context], KeySlots(context), cache)
                if rows > 1:  # one row's prefill, repeated: the same text in every row, the same cost
                    cache.batch_repeat_interleave(rows)
                run_step = self._timed_step(text, context, cache, rows, wanted)
                if context == lengths[0] and not probe:  # a step committing <= N tokens cannot pay beyond
                    wanted = sizes_worth_measuring(run_step, wanted, self.max_accepted)
                curves.append(measure(run_step, wanted, repeats, context))
        latency = None
        for curve in reversed(curves):  # the shortest context outermost, each holding the next longer
            latency = replace(curve, longer=latency)
        return latency

    def _timed_step(self, text, context: int, cache, rows: int, sizes) -> Callable[[int], None]:
        """A step of S tokens of ``text`` after ``context`` cached ones, through the forward path a
        decode of ``rows`` rows takes, its tokens then dropped from the cache."""
        executor, device = self.executor, text.device
        read = {s: torch.arange(s, device=device) for s in sizes}
        chains = {s: executor.chain(s) for s in sizes}
        buffers = MaskBuffers()  # as a call reuses them
        if rows == 1:
            slots = KeySlots(context)
        else:
            valid = torch.ones(rows, context, dtype=torch.bool, device=device)
            positions = torch.arange(context, device=device)[None].expand(rows, -1)
            slots = KeySlots(context, valid, positions, torch.full((rows,), context, device=device))

        def run_step(size: int) -> None:
            tokens = text[context : context + size][None].expand(rows, -1)
            executor.step(tokens, chains[size], slots, cache, read[size], buffers)
            cache.crop(-size)
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        return run_step
