"""What a call returns: the rows' tokens, scores and metrics in ``generate``'s output type.

Owns the shape of the result only (padding of finished rows, the per-token score tuples, the summed
metrics); it reads the decoded ``SequenceState``s and never runs the model.
"""

from __future__ import annotations

import time

import torch

from lade.generation import CallSettings
from lade.sequence import SequenceState
from lade.types import DecodingMetrics, GenerationResult


def assemble(
    settings: CallSettings, rows: list[SequenceState], metrics: DecodingMetrics, started: float
) -> GenerationResult:
    """The call's ``GenerationResult``.

    ``sequences`` [B, T + new]: the prompts as given and each row's tokens, rows that finished before
    the longest one padded with ``settings.pad`` (as ``generate`` pads them). ``scores`` / ``logits``
    (when the call asked for them): one FloatTensor [B, V] per new token; a row's entries after it
    finished are 0 (``generate`` holds the model's scores over its padding there). ``metrics`` sums the
    rows (one row: the row's own), ``row_metrics`` has each row's.
    """
    ids = settings.input_ids
    width = ids.shape[1]
    longest = max((len(row.generated) for row in rows), default=0)
    sequences = ids.new_full((ids.shape[0], width + longest), settings.pad)
    sequences[:, :width] = ids
    for row in rows:
        sequences[row.index, width : width + len(row.generated)] = torch.tensor(row.generated)
        row.metrics.new_tokens = len(row.generated)
        row.metrics.forward_passes = row.metrics.steps
    if not (len(rows) == 1 and rows[0].metrics is metrics):
        for m in (row.metrics for row in rows):
            metrics.new_tokens += m.new_tokens
            metrics.steps += m.steps
            metrics.branch_steps += m.branch_steps
            metrics.accepted_histogram.update(m.accepted_histogram)
            metrics.tokens_per_step += m.tokens_per_step
            metrics.step_sizes += m.step_sizes
            metrics.verification_sizes += m.verification_sizes
            metrics.candidate_counts += m.candidate_counts
    metrics.total_s = time.perf_counter() - started
    for row in rows:
        row.metrics.total_s = metrics.total_s
    return GenerationResult(
        sequences=sequences,
        scores=_per_token(rows, "scores", longest) if settings.record_scores else None,
        logits=_per_token(rows, "logits", longest) if settings.record_logits else None,
        metrics=metrics,
        row_metrics=[row.metrics for row in rows],
    )


def _per_token(rows: list[SequenceState], kind: str, longest: int) -> tuple[torch.Tensor, ...]:
    """One FloatTensor [B, V] per new token from the rows' recorded [V] tensors (0 past a row's end)."""
    recorded = [getattr(row.recording, kind) for row in rows]
    sample = next((r[0] for r in recorded if r), None)
    if sample is None:
        return ()
    out = sample.new_zeros(longest, len(rows), sample.shape[-1])
    for row, values in zip(rows, recorded, strict=True):
        if values:
            out[: len(values), row.index] = torch.stack(values)
    return tuple(out.unbind(0))
