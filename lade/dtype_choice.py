"""``dtype="auto"``: the faster of float32 and bfloat16 for one model on this machine, measured.

Which dtype is faster depends on the hardware, not on the model's name: with native bf16 (AVX512-BF16,
AMX, any recent GPU) bfloat16 forwards take about half the time of float32 ones; on a CPU with only
AVX2 they may be faster for one token and slower for many. So `load_in_faster_dtype` times forwards
of the model in both dtypes (a few step sizes after a cached context, as lookahead steps run) and keeps
the one with the lower predicted seconds per token (`seconds_per_token`), recording the
measurement next to the latency curves (`lade.calibration`) under a key of the architecture, device,
threads and torch version, so the choice costs one measurement per machine and model. It never
converts a bfloat16 model back to float32 (that would not give the float32 model): each dtype is
loaded by the caller's function.
"""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import torch
from transformers import DynamicCache

from lade.calibration import calibration_key, default_calibration_dir

CANDIDATES = (torch.float32, torch.bfloat16)
PROBE_SIZES = (1, 4, 16)  # tokens per forward: a plain step, a small and a large lookahead step
PROBE_CONTEXT = 64
# Tokens a step that feeds S tokens is assumed to commit, for comparing dtypes before anything is
# decoded: 1 + GAIN * log2(S), the planner's prior (lade.autotune: compression grows about
# logarithmically in the tokens fed). A dtype that is fast at S = 1 but slow at 16 (bf16 without
# native bf16 kernels) can still win: the plain loop is always open to the decoder.
GAIN_PER_DOUBLING = 0.25
CHOICE_FORMAT = 1

log = logging.getLogger(__name__)
Loaded = TypeVar("Loaded")


def load_in_faster_dtype(
    load: Callable[[torch.dtype], Loaded],
    model_of: Callable[[Loaded], torch.nn.Module] = lambda loaded: loaded,
    calibration_dir: str | os.PathLike | None = None,
    repeats: int = 3,
) -> Loaded:
    """``load(dtype)`` for the faster of float32 and bfloat16 here: what it returned (a model, or
    anything ``model_of`` finds the model in, such as ``(model, tokenizer)``).

    The first call for a model and machine loads both, times `forward_seconds` for each and writes
    ``dtype-<key>.json`` (the seconds per size and the choice) to ``calibration_dir`` (default:
    `lade.calibration.default_calibration_dir()`); later calls read it and load only the winner.
    """
    folder = Path(calibration_dir) if calibration_dir is not None else default_calibration_dir()
    first = load(CANDIDATES[0])
    path = folder / f"dtype-{calibration_key(model_of(first))}.json"
    chosen = cached_choice(path)
    if chosen is not None:
        if chosen == CANDIDATES[0]:
            return first
        del first  # free the float32 weights before the other copy is loaded
        return load(chosen)
    log.warning(
        "dtype='auto': timing forwards of %s in float32 and bfloat16, once for this machine (cached in %s)",
        type(model_of(first)).__name__,
        path,
    )
    seconds = {CANDIDATES[0]: forward_seconds(model_of(first), repeats=repeats)}
    second = load(CANDIDATES[1])
    seconds[CANDIDATES[1]] = forward_seconds(model_of(second), repeats=repeats)
    chosen = min(CANDIDATES, key=lambda dtype: seconds_per_token(seconds[dtype]))
    _store(path, chosen, seconds)
    return first if chosen == CANDIDATES[0] else second


def forward_seconds(
    model, sizes: Sequence[int] = PROBE_SIZES, context: int = PROBE_CONTEXT, repeats: int = 3
) -> dict[int, float]:
    """Median seconds of one forward over S new tokens after ``context`` cached ones, per S in
    ``sizes`` (one untimed round first; sizes interleaved across rounds, so noise spreads evenly)."""
    device = model.get_input_embeddings().weight.device
    vocab = model.get_input_embeddings().weight.shape[0]
    ids = torch.randint(0, vocab, (1, context + max(sizes)), generator=torch.Generator().manual_seed(0))
    ids = ids.to(device)
    times: dict[int, list[float]] = {size: [] for size in sizes}
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        model(ids[:, :context], cache=cache, use_cache=True)
        for round_ in range(repeats + 1):
            for size in sizes:
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                started = time.perf_counter()
                model(ids[:, context : context + size], cache=cache, use_cache=True)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                if round_:  # the first round warms up
                    times[size].append(time.perf_counter() - started)
                cache.crop(-size)  # back to the context
    return {size: statistics.median(values) for size, values in times.items()}


def seconds_per_token(seconds: dict[int, float]) -> float:
    """Predicted seconds per committed token at the best probed step size (see `GAIN_PER_DOUBLING`)."""
    return min(value / (1 + GAIN_PER_DOUBLING * math.log2(size)) for size, value in seconds.items())


def cached_choice(path: Path) -> torch.dtype | None:
    """The dtype recorded at ``path``, or None when missing, unreadable or of another format."""
    try:
        data = json.loads(Path(path).read_text())
        if data.get("format") != CHOICE_FORMAT:
            return None
        dtype = getattr(torch, data["chosen"])
        return dtype if dtype in CANDIDATES else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _store(path: Path, chosen: torch.dtype, seconds: dict[torch.dtype, dict[int, float]]) -> None:
    """Write atomically, as the latency curves are."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": CHOICE_FORMAT,
        "chosen": str(chosen).removeprefix("torch."),
        "context": PROBE_CONTEXT,
        "seconds_per_token": {
            str(dtype).removeprefix("torch."): seconds_per_token(values) for dtype, values in seconds.items()
        },
        "seconds": {
            str(dtype).removeprefix("torch."): {str(size): value for size, value in by_size.items()}
            for dtype, by_size in seconds.items()
        },
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        json.dump(payload, handle, indent=1)
    os.replace(tmp, path)
