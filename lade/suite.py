"""Paired, resumable benchmark runs: every method on every prompt, one CSV row per measurement.

A suite runs named methods on the prompts of several datasets. On each prompt every method runs once,
in an order that rotates from prompt to prompt (machine noise hits all methods alike), and every
output is compared with HF greedy's (``REFERENCE``, first divergence and the reference's margin there:
``lade.divergence``). The prompt's rows are appended to the records CSV as soon as its methods are
done, so a run that dies loses at most the prompt it was on: run it again and it resumes at the next
prompt not yet recorded (the rows say which; ``done_prompts``). Rows deleted for some methods are
measured again, those methods only (to re-measure one pair of a table without the rest). Summaries
with confidence intervals are ``lade.suite_report``'s.

Prompts run index-major: prompt 0 of every dataset, then prompt 1 of every dataset, and so on, so a
run stopped early holds about as many prompts of each dataset. A suite without a reference (sampling,
whose outputs are draws, not HF greedy's tokens) compares nothing.

A method is a callable ``(input_ids [1, T]) -> Outcome``; ``hf_call`` and ``decoder_call`` make them.
"""

from __future__ import annotations

import csv
import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from lade.bench_methods import first_row, hf_method
from lade.bench_timing import REFERENCE, rotated
from lade.decoding import LookaheadDecoder
from lade.divergence import compare

COLUMNS = (
    "model",
    "dtype",
    "dataset",
    "split",
    "prompt",
    "method",
    "seconds",
    "new_tokens",
    "steps",
    "tokens_fed",
    "identical",
    "near_tie",
    "margin",
    "sources",
)


@dataclass
class Outcome:
    """One call of a method on one prompt.

    Attributes:
        tokens: the new tokens.
        steps: decoding steps (forward passes after the prefill for HF, counted when known; NaN if not).
        tokens_fed: tokens fed over all steps (NaN for HF ``generate``).
        logits: the reference's raw logits, one [V] tensor per new token (``REFERENCE`` only).
        sources: steps per draft source under auto over several sources (``DecodingMetrics.source_steps``).
    """

    tokens: list[int]
    steps: float = math.nan
    tokens_fed: float = math.nan
    logits: list[torch.Tensor] | None = None
    sources: dict | None = None


Method = Callable[[torch.Tensor], Outcome]


def hf_call(model, options: dict, keep_logits: bool = False, **extra) -> Method:
    """HF ``model.generate`` with ``options`` (``lade.bench_methods.greedy_options``, or sampling
    options) and ``extra`` (e.g. ``prompt_lookup_num_tokens``) as a method; ``keep_logits`` for the
    reference. Steps are counted for plain greedy or sampling (one forward per token), not with
    ``extra``."""

    generate = hf_method(model, options, first_row, keep_logits=keep_logits, **extra)

    def call(ids: torch.Tensor) -> Outcome:
        rows, _, _, logits = generate(ids, torch.ones_like(ids))
        steps = len(rows[0]) if not extra else math.nan  # plain greedy or sampling: one forward per token
        return Outcome(rows[0], steps, steps, logits=logits[0] if keep_logits else None)

    return call


def decoder_call(decoder: LookaheadDecoder, options: dict) -> Method:
    """``decoder.generate`` with ``options`` as a method, with its steps, tokens fed and sources."""

    def call(ids: torch.Tensor) -> Outcome:
        result = decoder.generate(ids, attention_mask=torch.ones_like(ids), **options)
        m = result.metrics
        tokens = result.sequences[0, ids.shape[1] :].tolist()
        return Outcome(tokens, m.steps, sum(m.step_sizes), sources=dict(m.source_steps) or None)

    return call


def done_prompts(path: Path) -> dict[tuple[str, ...], set[str]]:
    """``(model, dtype, dataset, split, prompt)`` -> the methods recorded for it, of every prompt the
    records at ``path`` hold."""
    done: dict[tuple[str, ...], set[str]] = {}
    if path.exists():
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                done.setdefault(tuple(row[c] for c in COLUMNS[:5]), set()).add(row["method"])
    return done


def run_suite(
    methods: Mapping[str, Mapping[str, Method]],
    prompts: Mapping[str, Sequence[torch.Tensor]],
    path: Path,
    labels: Mapping[str, str],
    warmup: torch.Tensor,
    reference: str | None = REFERENCE,
) -> int:
    """Run ``methods[dataset]`` (name -> method, ``reference`` among them unless None) on each of
    ``prompts[dataset]``, index-major, appending one row per method (``COLUMNS``; ``labels``:
    ``model``, ``dtype``, ``split``). A method already recorded for a prompt at ``path`` is not run
    again, so a rerun resumes, and deleting some methods' rows re-measures just those (together, in
    the alternating order); with a ``reference``, a prompt is re-measured whole or not at all (outputs
    are compared with a reference run in the same pass). Each method is warmed up once on ``warmup``
    [1, T] (untimed) before its first timed call. Outputs are compared with ``reference``'s (None: not
    compared, ``identical``/``near_tie``/``margin`` left empty). Progress goes to stderr. Returns the
    prompts run."""
    for dataset in prompts:
        if reference is not None and reference not in methods[dataset]:
            raise ValueError(f"the methods of {dataset!r} need {reference!r}, the reference")
    done = done_prompts(path)
    warmed: set[int] = set()
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = not path.exists()
    todo = []  # (index, dataset, ids, the methods to run)
    for index in range(max((len(p) for p in prompts.values()), default=0)):
        for dataset, dataset_prompts in prompts.items():
            key = (labels["model"], labels["dtype"], dataset, labels["split"], str(index))
            recorded = done.get(key, set())
            missing = {name: m for name, m in methods[dataset].items() if name not in recorded}
            if missing and reference is not None and reference not in missing:
                raise ValueError(
                    f"{path} holds {reference!r} but not {sorted(missing)} for {dataset} prompt {index}: "
                    "outputs are compared with a reference run in the same pass; delete the prompt's "
                    "rows to measure it again"
                )
            if missing and index < len(dataset_prompts):
                todo.append((index, dataset, dataset_prompts[index], missing))
    started = time.perf_counter()
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        if fresh:
            writer.writeheader()
        for ran, (index, dataset, ids, named) in enumerate(todo, start=1):
            for method in named.values():
                if id(method) not in warmed:  # first calls pay for allocations and calibration
                    method(warmup)
                    warmed.add(id(method))
            key = (labels["model"], labels["dtype"], dataset, labels["split"], str(index))
            rows = _one_prompt(named, ids, index, reference)
            writer.writerows({**dict(zip(COLUMNS[:5], key, strict=True)), **row} for row in rows)
            handle.flush()
            elapsed = time.perf_counter() - started
            print(
                f"{dataset} prompt {index + 1}/{len(prompts[dataset])} ({ran}/{len(todo)} run, "
                f"{elapsed:.0f} s)",
                file=sys.stderr,
            )
    return len(todo)


def _one_prompt(
    methods: Mapping[str, Method], ids: torch.Tensor, index: int, reference: str | None
) -> list[dict]:
    """Every method once on ``ids``, in the order of prompt ``index``; the rows without the labels."""
    outcomes, seconds = {}, {}
    for name in rotated(list(methods), index):
        t0 = time.perf_counter()
        outcomes[name] = methods[name](ids)
        seconds[name] = time.perf_counter() - t0
    rows = []
    for name, outcome in outcomes.items():
        row = {
            "method": name,
            "seconds": seconds[name],
            "new_tokens": len(outcome.tokens),
            "steps": outcome.steps,
            "tokens_fed": outcome.tokens_fed,
            "sources": json.dumps(outcome.sources) if outcome.sources else "",
        }
        if reference is not None:
            base = outcomes[reference]
            divergence = compare(base.tokens, base.logits, outcome.tokens)
            row.update(
                identical=divergence.identical, near_tie=divergence.near_tie(), margin=divergence.margin
            )
        rows.append(row)
    return rows
