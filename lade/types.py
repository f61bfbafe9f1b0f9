"""Frozen dataclasses passed between the decoding loop and its strategies.

Every tensor field carries a shape comment. ``L`` is the number of filled lookahead levels
(1..N-1), ``W`` the window size, ``N`` the n-gram size, ``G'`` the number of candidates verified
this step (0..G) and ``V`` the vocabulary size.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch
from transformers.generation.utils import GenerateDecoderOnlyOutput


@dataclass(frozen=True)
class LookaheadBranch:
    """The guesses a proposer wants run through the model this step.

    Level ``r``, column ``c`` sits at position ``p + 1 + r + c`` (``p`` = position of the last
    committed token) and sees the prompt, the last token, level 0 up to column ``c`` and column ``c``
    of the levels below ``r``: one token per earlier position (see ``lade.layout``).
    """

    levels: torch.Tensor  # [L, W] token ids, level 0 = oldest; L = 0 means "no lookahead branch"

    @property
    def num_levels(self) -> int:
        return self.levels.shape[0]

    @property
    def window(self) -> int:
        return self.levels.shape[1]


@dataclass(frozen=True)
class Candidates:
    """The n-gram continuations verified this step, all keyed by the last committed token.

    ``rows`` [G'][l]: the row of the verifier's logits that follows each candidate token (a token
    trie's node + 1, ``lade.trie``: candidates sharing a prefix share its rows); None: the candidates
    were fed as chains, token j of candidate i at row ``1 + i * l + j``.

    ``lengths`` [G']: each candidate's own tokens; the rest of its row is padding (``pad_candidate``),
    never accepted, and in a trie never fed (its rows are the last own token's, never read). None:
    every token is the candidate's own.
    """

    tokens: torch.Tensor  # [G', l] token ids, l <= the pool's continuation length; G' may be 0
    rows: tuple[tuple[int, ...], ...] | None = None
    lengths: tuple[int, ...] | None = None

    @property
    def count(self) -> int:
        return self.tokens.shape[0]

    def row_map(self) -> list[list[int]] | tuple[tuple[int, ...], ...]:
        """[G'][l] the logits row after each candidate token, chains or trie alike."""
        if self.rows is not None:
            return self.rows
        count, length = self.tokens.shape if self.count else (0, 0)
        return [[1 + i * length + j for j in range(length)] for i in range(count)]

    def prefix_rows(self) -> tuple[list[int], list[int]]:
        """The last token and the logits row after it of each distinct prefix of the candidates' own
        tokens (padding left out), in order of first appearance: the logits the step computed for a
        real draft, once each, the same for chains and tries."""
        tokens, rows, seen = [], [], set()
        drafts, row_map = self.tokens.tolist(), self.row_map()
        for draft, row, own in zip(drafts, row_map, self.own_lengths(), strict=True):
            for j in range(own):
                prefix = tuple(draft[: j + 1])
                if prefix not in seen:
                    seen.add(prefix)
                    tokens.append(draft[j])
                    rows.append(row[j])
        return tokens, rows

    def own_lengths(self) -> tuple[int, ...]:
        """[G'] each candidate's own tokens (l for all when no ``lengths`` were given)."""
        if self.lengths is not None:
            return self.lengths
        return (self.tokens.shape[1],) * self.count if self.count else ()


def pad_candidate(continuation: tuple[int, ...], length: int) -> list[int]:
    """``continuation`` cut or padded to ``length`` tokens, padding with its last token (a pool may
    hold continuations shorter than a step verifies): a candidate row of the step's width, whose
    padding the verifiers never accept (``Candidates.lengths``)."""
    tokens = list(continuation[:length])
    return tokens + tokens[-1:] * (length - len(tokens))


@dataclass(frozen=True)
class Verification:
    """What a verifier accepted: always at least one token (the model's own next token)."""

    tokens: list[int]  # committed this step, in order: matched candidate prefix + the bonus token
    candidate_index: int  # row of the accepted candidate in ``Candidates.tokens``; -1 if none matched
    matched: int  # how many candidate tokens matched (len(tokens) - 1)
    # [len(tokens)] x [V] float32: the processed scores at each committed token's position, when the
    # verifier computed them (None: the raw logits were the scores)
    scores: tuple[torch.Tensor, ...] | None = None


STEP_STAGES = ("pool", "propose", "mask", "forward", "verify", "update", "commit")


@dataclass
class DecodingMetrics:
    """Counters and timings of one ``generate`` call.

    ``steps`` counts decoding steps, the first of which is the prefill: its logits after the prompt
    give the first new token, as in ``generate`` (its stage times are the verification and update
    of that token; the prefill's wall time is ``prefill_s``). In a batch: steps of each row, summed over
    the rows, while ``forward_passes`` counts the batch's forward passes; they are equal for one
    sequence; ``compression_ratio`` is ``new_tokens / steps`` (1.0 for plain autoregressive decoding).
    ``accepted_histogram[k]`` is the number of steps that committed ``k`` tokens (1..N). ``time_s``
    splits the wall time of the decoding steps into stages (``STEP_STAGES``: pool lookup, propose,
    mask, forward, verify, update, cache commit); ``prefill_s`` and ``total_s`` are wall times of the
    prefill and of the whole call. ``source_steps`` counts, under auto with several draft sources
    (``pools.CombinedPool``), the forward passes that verified each source's candidates.
    """

    new_tokens: int = 0
    steps: int = 0
    forward_passes: int = 0
    prefill_s: float = 0.0
    total_s: float = 0.0
    accepted_histogram: Counter = field(default_factory=Counter)
    time_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STEP_STAGES, 0.0))
    tokens_per_step: list[int] = field(default_factory=list)  # [steps] tokens committed at each step
    step_sizes: list[int] = field(default_factory=list)  # [steps] tokens fed per row at each step
    verification_sizes: list[int] = field(default_factory=list)  # [steps] of which the verification branch
    candidate_counts: list[int] = field(default_factory=list)  # [steps] candidates verified at each step
    branch_steps: int = 0
    step_times_s: list[float] = field(default_factory=list)  # [forward_passes] wall time of each step
    # auto only ([forward_passes], else empty): the tokens the step's plan expected its batch to commit
    # (``StepPlan.predicted_tokens``) and the forward seconds it priced the step at; against
    # ``tokens_per_step`` and ``step_times_s`` they show how well the planner predicts
    planned_tokens: list[float] = field(default_factory=list)
    planned_s: list[float] = field(default_factory=list)
    source_steps: Counter = field(default_factory=Counter)  # forward passes per draft source (auto)
    # auto over several draft sources only ([forward_passes], else empty): the source each step
    # verified ("plain": none, and no branch), so the planner's calibration can be read per source
    step_sources: list[str] = field(default_factory=list)

    @property
    def compression_ratio(self) -> float:
        return self.new_tokens / self.steps if self.steps else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.total_s if self.total_s > 0 else 0.0

    @property
    def overhead_fraction(self) -> float:
        """Share of the decoding steps' time spent outside the model forward."""
        step_time = sum(self.time_s.values())
        return 1.0 - self.time_s["forward"] / step_time if step_time > 0 else 0.0


@dataclass
class GenerationResult(GenerateDecoderOnlyOutput):
    """Output of ``LookaheadDecoder.generate``: ``generate``'s own output type (``sequences`` [B, T + new],
    the prompts as given, padding kept, and the generated tokens; with ``return_dict_in_generate``,
    ``scores``/``logits``: one FloatTensor [B, V] per new token), plus the lookahead metrics, so
    ``model.compute_transition_scores(result.sequences, result.scores)`` works on it."""

    metrics: DecodingMetrics | None = None  # the whole call (in a batch: summed over the rows)
    # [B] each row's counts (steps, tokens, histogram, step sizes, per-step times); the stage times
    # (time_s, prefill_s) are the batch's, in ``metrics``, and each row's total_s is the call's
    row_metrics: list[DecodingMetrics] | None = None
