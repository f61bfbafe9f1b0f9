"""Timing benchmark methods, shared by ``lade.bench`` and ``lade.bench_batch``: what is recorded per
method, and rounds in which every method runs once on the same input, after one untimed warm-up each,
in an order that rotates from round to round so that machine noise hits all methods alike. Each output
row is compared with HF greedy's (``lade.divergence``) as soon as its round ends.

A round's methods take the same positional arguments (``(ids [1, T],)`` or ``(ids [B, T], mask [B,
T])``) and return ``(rows, steps, overhead, logits)`` as ``lade.bench_methods`` describes. This module
builds no method and computes no summary (``lade.bench_report``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from lade.divergence import Divergence, compare

REFERENCE = "hf_greedy"  # the method every output is compared with; its logits give the margins


@dataclass
class MethodRecords:
    """One method's records: per call (a prompt or a batch) its seconds, new tokens of all rows,
    steps and share of step time outside the forward; per row its output and its `Divergence` from
    HF greedy's row."""

    name: str = ""
    seconds: list[float] = field(default_factory=list)
    new_tokens: list[int] = field(default_factory=list)
    steps: list[float] = field(default_factory=list)  # NaN where not counted (HF batched)
    overhead: list[float] = field(default_factory=list)
    outputs: list[list[int]] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)


def rotated(names: Sequence[str], index: int) -> list[str]:
    """``names`` rotated left by ``index`` (modulo their number): round ``index``'s order."""
    shift = index % len(names)
    return [*names[shift:], *names[:shift]]


def time_rounds(
    methods: dict, rounds: Sequence[tuple], warmup: tuple, progress: str, started: float | None = None
) -> dict[str, MethodRecords]:
    """Every method once on each round's arguments, the order rotating per round, after one warm-up
    call each on ``warmup`` (first calls pay for allocations, lazy initialisation, calibration).

    ``methods`` must hold ``REFERENCE``, which returns its logits. After each round, prints
    ``"{progress} i/n done (s)"`` to stderr, seconds counted from ``started`` (default: when the
    warm-up ends). Returns method name -> its records."""
    names = list(methods)
    records = {name: MethodRecords(name) for name in names}
    for name in names:
        methods[name](*warmup)
    started = time.perf_counter() if started is None else started
    for i, arguments in enumerate(rounds):
        first = len(records[REFERENCE].outputs)  # this round's rows start here
        for name in rotated(names, i):
            t0 = time.perf_counter()
            rows, steps, overhead, logits = methods[name](*arguments)
            r = records[name]
            r.seconds.append(time.perf_counter() - t0)
            r.new_tokens.append(sum(map(len, rows)))
            r.steps.append(steps)
            r.overhead.append(overhead)
            r.outputs += rows
            if name == REFERENCE:
                reference_logits = logits
        reference = records[REFERENCE].outputs
        for name in names:  # each row against HF greedy's, the margin from HF greedy's own logits
            r = records[name]
            r.divergences += [
                compare(reference[k], reference_logits[k - first], r.outputs[k])
                for k in range(first, len(reference))
            ]
        print(
            f"{progress} {i + 1}/{len(rounds)} done ({time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
    return records
