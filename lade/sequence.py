"""One sequence's state between decoding steps, and what a step's verification does to it.

Shared by the single-sequence loop (``lade.decoding``) and the batched one (``lade.batch``), so
both advance the window, fill the pool, cut at the budget and EOS and count the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from lade.interfaces import NGramPool, Proposer
from lade.layout import StepLayout
from lade.types import DecodingMetrics, Verification


def truncate(tokens: list[int], budget: int, eos: frozenset[int]) -> tuple[list[int], bool]:
    """Cut a step's tokens at the token budget and just after the first EOS; also whether an EOS
    was reached."""
    tokens = tokens[:budget]
    for i, token in enumerate(tokens):
        if token in eos:
            return tokens[: i + 1], True
    return tokens, False


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

    @property
    def position(self) -> int:
        """Position of the last committed token."""
        return len(self.committed) - 1

    def settle(
        self,
        verification: Verification,
        branch_step: bool,
        level_logits: torch.Tensor | None,
        context: list[int],
        continuations: list[tuple[int, ...]],
        layout: StepLayout,
        max_new_tokens: int,
        eos: frozenset[int],
    ) -> tuple[list[int], list[int]]:
        """Apply a step's verification: advance the window (``update`` on a branch step with the
        newest levels' logits [R, W, V] or None, ``skip`` otherwise), credit the accepted candidate
        (one of ``continuations``, served after ``context``), commit the verified tokens cut at the
        budget and the first EOS, and count the step.

        Returns ``(new tokens, step rows to keep in the cache)``: the rows are the last token (0)
        and the accepted candidate tokens, all but the new last token, which the next step feeds.
        """
        if branch_step:
            self.pool.add(self.proposer.update(level_logits, verification))
        else:
            self.proposer.skip(verification)
        if verification.candidate_index >= 0:
            self.pool.record_hit(context, continuations[verification.candidate_index])
        new, stop = truncate(verification.tokens, max_new_tokens - len(self.generated), eos)
        m = self.metrics
        m.steps += 1
        m.accepted_histogram[len(verification.tokens)] += 1
        m.tokens_per_step.append(len(new))
        m.step_sizes.append(layout.size)
        m.branch_steps += bool(layout.num_levels)
        self.generated.extend(new)
        self.committed.extend(new)
        self.pool.observe(self.committed, len(new))
        self.finished = stop or len(self.generated) >= max_new_tokens
        accepted = [layout.candidate_row(verification.candidate_index, j) for j in range(len(new) - 1)]
        return new, [0, *accepted]
