"""One sequence's state between decoding steps, and what a step's verification does to it.

Owns a row's committed tokens, its view as ``generate`` holds it, its recordings and counters; the
decoding loop (``lade.loop``) calls ``settle`` for every row of every step, so each row advances its
window, fills its pool, stops where ``generate`` would, records scores and counts the same way. It
never runs the model or touches the cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import LogitsProcessorList

from lade.generation import CallSettings
from lade.interfaces import NGramPool, Proposer
from lade.layout import StepLayout
from lade.stopping import StopRule
from lade.types import Candidates, DecodingMetrics, Verification
from strategies.processing import RowScoring, for_row


@dataclass
class RowView:
    """The row as ``generate`` holds it: the prompt as given (padding included) and the tokens generated
    so far, in a LongTensor buffer [T + room] that logits processors and stopping criteria read."""

    buffer: torch.Tensor  # [T + room] long
    length: int

    @classmethod
    def of(cls, prompt_row: torch.Tensor, room: int) -> RowView:
        """``prompt_row`` [T] as given; ``room``: the most tokens the row can receive."""
        buffer = prompt_row.new_empty(prompt_row.shape[0] + room)
        buffer[: prompt_row.shape[0]] = prompt_row
        return cls(buffer, prompt_row.shape[0])

    def tokens(self) -> torch.Tensor:
        """LongTensor [L] of the row so far."""
        return self.buffer[: self.length]

    def with_tokens(self, tokens: list[int]) -> torch.Tensor:
        """LongTensor [L + len(tokens)]: the row with ``tokens`` appended (written past the committed
        part, which ``append`` then keeps or overwrites)."""
        end = self.length + len(tokens)
        self.buffer[self.length : end] = torch.tensor(tokens, dtype=torch.long)
        return self.buffer[:end]

    def append(self, tokens: list[int]) -> None:
        self.with_tokens(tokens)
        self.length += len(tokens)


@dataclass
class Recording:
    """The per-token outputs ``generate`` returns on request: processed scores and raw logits [V]."""

    scores: list[torch.Tensor] | None = None
    logits: list[torch.Tensor] | None = None


@dataclass
class SequenceState:
    """One sequence being decoded: its committed tokens, its strategies and its counters."""

    index: int  # row in the caller's batch (0 for a single sequence)
    committed: list[int]  # prompt (without padding) + output so far: the pool's context and history
    proposer: Proposer
    pool: NGramPool
    metrics: DecodingMetrics = field(default_factory=DecodingMetrics)
    generated: list[int] = field(default_factory=list)
    finished: bool = False
    processors: LogitsProcessorList = field(default_factory=LogitsProcessorList)  # this row's
    view: RowView | None = None  # kept when processors or stopping criteria read the row
    recording: Recording = field(default_factory=Recording)

    @property
    def position(self) -> int:
        """Position of the last committed token."""
        return len(self.committed) - 1

    def scoring(self) -> RowScoring | None:
        """This step's logits processing of the row (None without processors)."""
        if not self.processors:
            return None
        return RowScoring(self.processors, self.view.tokens())

    def settle(
        self,
        verification: Verification,
        branch_step: bool,
        level_logits: torch.Tensor | None,
        context: list[int],
        continuations: list[tuple[int, ...]],
        layout: StepLayout,
        stop: StopRule,
        verified_logits: torch.Tensor | None = None,
        candidates: Candidates | None = None,
    ) -> tuple[list[int], list[int]]:
        """Apply a step's verification: advance the window (``update`` on a branch step with the
        newest levels' logits [R, W, V] or None, ``skip`` otherwise), credit the accepted candidate
        (one of ``continuations``, served after ``context``), commit the verified tokens up to where
        ``generate`` would stop (``stop``), record their scores and logits when asked (from
        ``verified_logits`` [1 + R, V], the verifier's rows), and count the step. ``candidates``: the
        step's verified candidates (their count is recorded; ``rows``, the verifier's logits row after
        each candidate token, None for chains, as ``layout`` lays them out); None: none verified.

        Returns ``(new tokens, step rows to keep in the cache)``: the rows are the last token (0)
        and the accepted candidate tokens, all but the new last token, which the next step feeds.
        """
        if branch_step:
            self.pool.add(self.proposer.update(level_logits, verification))
        else:
            self.proposer.skip(verification)
        if verification.candidate_index >= 0:
            self.pool.record_hit(context, continuations[verification.candidate_index])
        tokens = verification.tokens
        candidate_rows = None if candidates is None else candidates.rows
        if candidate_rows is None:
            accepted = [layout.candidate_row(verification.candidate_index, j) for j in range(len(tokens) - 1)]
        else:  # verified logits row r follows step row candidates.start + r - 1
            path = candidate_rows[verification.candidate_index][: len(tokens) - 1] if len(tokens) > 1 else ()
            accepted = [layout.candidates.start - 1 + row for row in path]
        logits_rows = [0, *(row - layout.candidates.start + 1 for row in accepted)]  # in verified_logits
        scores = self._record(verification, verified_logits, logits_rows)
        row = self.view.with_tokens(tokens) if stop.others else None
        count, stop_here = stop.cut(row, len(self.generated), tokens, scores)
        new = tokens[:count]
        self._drop_recorded(len(tokens) - count)
        m = self.metrics
        m.steps += 1
        m.accepted_histogram[len(tokens)] += 1
        m.tokens_per_step.append(len(new))
        m.step_sizes.append(layout.size)
        m.verification_sizes.append(layout.size - layout.candidates.start)
        m.candidate_counts.append(0 if candidates is None else candidates.count)
        m.branch_steps += bool(layout.num_levels)
        self.generated.extend(new)
        self.committed.extend(new)
        if self.view is not None:
            self.view.append(new)
        self.pool.observe(self.committed, len(new))
        self.finished = stop_here or len(self.generated) >= stop.max_new_tokens
        return new, [0, *accepted[: len(new) - 1]]

    def _record(self, verification: Verification, verified_logits, rows: list[int]):
        """Append the step's per-token scores and logits when recorded; the scores [V] per token so
        far (for stopping criteria, as generate passes them), or None."""
        record = self.recording
        if record.logits is not None:
            record.logits.extend(verified_logits[row].float() for row in rows)
        if record.scores is None:
            return None
        if verification.scores is not None:
            record.scores.extend(verification.scores)
        else:  # no processors: the raw logits are the scores
            record.scores.extend(verified_logits[row].float() for row in rows)
        return record.scores

    def _drop_recorded(self, count: int) -> None:
        """Forget the records of the last ``count`` tokens (verified, but past the stop)."""
        for kept in (self.recording.scores, self.recording.logits):
            if kept is not None and count:
                del kept[-count:]


def new_row(
    settings: CallSettings,
    index: int,
    proposer: Proposer,
    pool: NGramPool,
    max_step_tokens: int,
    metrics: DecodingMetrics | None = None,
) -> SequenceState:
    """The state of row ``index`` of a call at its start: its prompt without padding as the committed
    tokens, its own processors (``strategies.processing.for_row``), the row as ``generate`` holds it
    when processors or stopping criteria read it (room for ``max_step_tokens`` verified tokens past the
    budget), and empty recordings of what the call asked to return."""
    prompt_row = settings.input_ids[index]
    batch = settings.input_ids.shape[0]
    processors = settings.processors if batch == 1 else for_row(settings.processors, index)
    view = None
    if processors or settings.stop.others:
        view = RowView.of(prompt_row, settings.max_new_tokens + max_step_tokens)
    recording = Recording([] if settings.record_scores else None, [] if settings.record_logits else None)
    return SequenceState(
        index,
        prompt_row[settings.valid[index]].tolist(),
        proposer,
        pool,
        metrics if metrics is not None else DecodingMetrics(),
        processors=processors,
        view=view,
        recording=recording,
    )
