"""The four extension points of the decoding loop, as small abstract base classes.

A strategy never owns the loop (``lade.decoding`` does): it is asked for tokens, handed logits,
and returns plain data (``lade.types``). A new strategy is one subclass.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from lade.types import Candidates, LookaheadBranch, Verification


class Proposer(ABC):
    """Owns the lookahead window: which guesses run each step, and how they evolve."""

    def start(self, prompt: torch.Tensor, generator: torch.Generator | None = None) -> None:  # noqa: B027
        """Begin a new sequence. ``prompt``: LongTensor [T] (on the model's input device)."""

    @abstractmethod
    def lookahead_branch(self) -> LookaheadBranch:
        """The levels to run this step: LongTensor [L, W] inside a ``LookaheadBranch`` (L may be 0)."""

    def levels_read(self, num_levels: int) -> int:
        """How many of the newest levels' logits ``update`` reads (default: all ``num_levels``);
        the loop skips the LM head on the others."""
        return num_levels

    @abstractmethod
    def update(self, level_logits: torch.Tensor | None, accepted: Verification) -> list[tuple[int, ...]]:
        """Advance the window after a step and return the n-grams it harvested.

        Args:
            level_logits: FloatTensor [R, W, V], the model's logits at the newest R =
                ``levels_read(L)`` levels (the token at level r, column c predicts position
                p + 2 + r + c), or None when R is 0.
            accepted: what the verifier committed this step.

        Returns:
            n-grams for the pool: each tuple ends with N tokens (N = the proposer's n-gram size),
            optionally preceded by left context.
        """

    resizable: bool = False  # whether ``resize`` can change W between steps (auto window sizes)

    def resize(self, window: int) -> None:
        """Change the window to ``window`` columns between steps (only when ``resizable``)."""
        raise NotImplementedError(f"{type(self).__name__} cannot change its window size")

    def skip(self, accepted: Verification) -> None:  # noqa: B027
        """A step ran without the lookahead branch (an auto plan) and committed ``accepted``; the
        window is kept as it is for a later step."""


@dataclass(frozen=True)
class EntryStats:
    """Bookkeeping an eviction policy may look at, counted in pool insertions ("ticks")."""

    inserted: int  # tick of the first insertion
    touched: int  # tick of the latest insertion (re-inserting an n-gram touches it)
    hits: int  # times it was returned as a candidate and fully or partly accepted
    harvested: bool = False  # only the lookahead branch put it there (no prompt/output seeding did)


class EvictionPolicy(ABC):
    """Picks which entry of a full bucket to drop. Pure: the same entries give the same victim."""

    @abstractmethod
    def victim(self, entries: Sequence[EntryStats]) -> int | None:
        """Index into ``entries`` (non-empty) of the entry to evict, or None to keep them all."""


class NGramPool(ABC):
    """Stores n-grams and serves the candidates to verify after the committed tokens.

    ``key_length`` is how many of the last committed tokens ``candidates`` wants as context;
    ``reads_logits``: whether the loop passes it every step's logits (``observe_logits``);
    ``fed_by_branch``: whether it keeps the lookahead branch's n-grams (``add``), so that the auto
    planner only credits the branch to sources it feeds.
    """

    key_length: int = 1
    reads_logits: bool = False
    fed_by_branch: bool = True

    @abstractmethod
    def add(self, ngrams: Sequence[Sequence[int]]) -> None:
        """Insert n-grams: each sequence's last N tokens are the n-gram (its first token the key),
        any tokens before them are left context (used by pools keyed on several tokens)."""

    @abstractmethod
    def candidates(self, context: Sequence[int], limit: int) -> list[tuple[int, ...]]:
        """At most ``limit`` continuations (N-1 tokens each) to verify after ``context``, the last
        committed tokens (newest last, at least one)."""

    def start(self, prompt: Sequence[int]) -> None:  # noqa: B027
        """A ``generate`` call begins with ``prompt`` (token ids)."""

    def join(self, prompt: Sequence[int]) -> None:
        """Another sequence of a batch starts sharing this pool (``shared_pool=True``): take its
        prompt in as ``start`` would, keeping what the pool holds. Pools that follow one sequence
        (prompt lookup) cannot be shared; the default refuses."""
        raise NotImplementedError(f"{type(self).__name__} cannot be shared between the rows of a batch")

    def observe(self, sequence: Sequence[int], new_tokens: int) -> None:  # noqa: B027
        """A step committed the last ``new_tokens`` tokens of ``sequence`` (prompt + output so far)."""

    def record_hit(self, context: Sequence[int], continuation: tuple[int, ...]) -> None:  # noqa: B027
        """A continuation served as a candidate after ``context`` was (partly) accepted."""

    def harvested(self, context: Sequence[int], continuations: Sequence[tuple[int, ...]]) -> list[bool]:
        """For each continuation served after ``context``: whether only the lookahead branch's n-grams
        (``add``) put it in the pool. The auto planner credits those to the branch. Default: none."""
        return [False] * len(continuations)

    def confidence(self, context: Sequence[int], continuations: Sequence[tuple[int, ...]]) -> int:
        """A small integer class of how likely these candidates are to be accepted (e.g. how many
        context tokens they were matched on); the auto planner keeps acceptance statistics per
        class, so it can verify long candidates where they tend to hold and skip them elsewhere.
        Default: one class."""
        return 0

    def observe_logits(self, tokens: Sequence[int], logits) -> None:  # noqa: B027
        """Only when ``reads_logits``: a step fed ``tokens`` [R] (the last committed token, then the
        last token of each distinct candidate prefix, ``Candidates.prefix_rows``: no padding) and the
        model computed ``logits`` [R, V] after each."""

    def reset(self) -> None:  # noqa: B027
        """Forget everything."""

    def text_replica(self) -> NGramPool | None:
        """A pool that serves from now on exactly what this one would, fed the same text, without
        changing this one (for replaying this source alone, ``lade.solo_replay``); None (the
        default) where the candidates depend on more than the committed text (the branch's n-grams,
        the model's logits)."""
        return None


class Verifier(ABC):
    """Decides which tokens to commit from the model's logits over the verification branch.

    ``samples`` says which of ``generate``'s modes the verifier implements (``do_sample``): a call
    whose settings ask for the other mode gets the library's verifier of that mode instead.
    """

    samples: bool = False

    def generation_defaults(self) -> dict:
        """``generate`` keyword arguments this verifier stands for (e.g. ``{"do_sample": True,
        "temperature": 0.7}``): defaults of the decoder built with it, under a call's own."""
        return {"do_sample": self.samples}

    @abstractmethod
    def verify(self, logits: torch.Tensor, candidates: Candidates, scoring=None) -> Verification:
        """Accept the longest valid prefix of one candidate plus one token from the model.

        Args:
            logits: FloatTensor [1 + R, V]. Row 0 holds the logits after the last committed
                token; row ``candidates.row_map()[i][j]`` those after token ``j`` of candidate ``i``
                (``1 + i * (N-1) + j`` for chains, R = G' * (N-1); fewer rows for a token trie).
            candidates: LongTensor [G', N-1] inside a ``Candidates``, with the rows of a trie.
            scoring: the call's logits processing for this row
                (``strategies.processing.RowScoring``: ``scoring(accepted, logits[row])`` gives the
                processed scores [V] of the position after the committed tokens and ``accepted``), or
                None when the call has no processors (the raw logits are the scores).

        Returns:
            a ``Verification`` with at least one token (and, when it computed processed scores, the
            scores of each committed token's position).
        """
