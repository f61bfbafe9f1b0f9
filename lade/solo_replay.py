"""The run one draft source would make by itself, replayed exactly on the committed text.

The source chooser (``lade.source_choice``) picks among several draft sources step by step on
predictions, and predictions mislead it: a source wins a step where the others predict little, and
there it fares worse than its records say. So the combination can commit fewer tokens per second
than its best source alone. ``PolicyTally`` scores other ways of choosing on the steps the
combination ran; those are not the steps another way would have run (it lands elsewhere in the text).

A source whose candidates depend on the committed text alone (a suffix tree, prompt lookup: no
logits, no branch; ``NGramPool.text_replica``) can be run by itself on the side, exactly: its own
pool (a replica fed the committed text), its own planner (a copy of the chooser's, started afresh),
its own steps, each step's candidates scored against the committed text once the text covers them,
which is what the greedy verifier would have accepted. ``SoloReplay`` does that as the text grows,
at no forward cost, and prices each of its steps with the same latency curve as the run's own, so
the two can be compared on the same text: the seconds each took to reach the same position.
Under sampling the replay's acceptance is the greedy estimate the acceptance records use too (what
matches the committed text), not a draw of the sampling verifier.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from lade.acceptance import common_prefix
from lade.autotune import Planner
from lade.interfaces import NGramPool
from lade.trie import trie_sizes


class CostTrace:
    """Priced seconds spent to reach each position of a text, step by step: ``cost_at(position)``
    interpolates linearly within a step (its tokens are spread evenly over its seconds)."""

    def __init__(self, start: int):
        self.positions = [start]
        self.seconds = [0.0]

    @property
    def start(self) -> int:
        return self.positions[0]

    @property
    def end(self) -> int:
        return self.positions[-1]

    @property
    def total(self) -> float:
        """Seconds to reach ``end``."""
        return self.seconds[-1]

    def step(self, position: int, seconds: float) -> None:
        """A step that ended at ``position`` (past the last one: a step commits a token at least)
        took ``seconds`` (priced)."""
        self.positions.append(position)
        self.seconds.append(self.seconds[-1] + seconds)

    def cost_at(self, position: int) -> float:
        """Seconds to reach ``position`` (``start <= position <= end``)."""
        i = bisect.bisect_left(self.positions, position)
        if self.positions[i] == position:
            return self.seconds[i]
        low, high = self.positions[i - 1], self.positions[i]
        fraction = (position - low) / (high - low)
        return self.seconds[i - 1] + fraction * (self.seconds[i] - self.seconds[i - 1])


class SoloReplay:
    """One draft source run alone on the side of a one-row call, replayed on its committed text.

    ``pool``: the source's replica (``NGramPool.text_replica``), holding the text up to ``start``;
    ``planner``: a planner for it alone (started for one row); ``token_tree``: whether the call feeds
    candidates as a trie (the replay then prices its steps the same way). ``advance(sequence)`` runs
    every step the committed ``sequence`` decides; ``trace``: the seconds its steps took to reach each
    position (from ``start``)."""

    def __init__(self, pool: NGramPool, planner: Planner, start: int, token_tree: bool = True):
        self.pool = pool
        self.planner = planner
        self.token_tree = token_tree
        self.position = start  # the replay's committed length
        self.trace = CostTrace(start)
        self._step: tuple[list[tuple[int, ...]], float] | None = None  # planned, waiting for its text

    def advance(self, sequence: Sequence[int]) -> None:
        """Run the replay's steps as far as ``sequence`` (the call's committed text) decides them."""
        while self.position < len(sequence):
            if self._step is None:
                self._step = self._plan(sequence)
            verified, seconds = self._step
            span = max((len(c) for c in verified), default=0)
            actual = sequence[self.position : self.position + span]
            accepted = max((common_prefix(c, actual) for c in verified), default=0)
            if accepted == len(actual) < span:
                return  # the candidates may match further: wait for the text
            end = self.position + accepted + 1  # the accepted tokens and the bonus token
            if end > len(sequence):
                return
            committed = sequence[:end]  # what a run at this point has seen, no more (records included)
            self.pool.observe(committed, accepted + 1)
            self.planner.resolve(committed)
            self.position = end
            self.trace.step(end, seconds)
            self._step = None

    def _plan(self, sequence: Sequence[int]) -> tuple[list[tuple[int, ...]], float]:
        """The step at the replay's position of ``sequence``: the candidates it verifies and its priced
        seconds."""
        planner, position = self.planner, self.position
        context = sequence[max(0, position - self.pool.key_length) : position]
        candidates = self.pool.candidates(context, planner.max_guess)
        confidence = self.pool.confidence(context, candidates)
        planner.offer(position, candidates, self.pool.harvested(context, candidates), confidence)
        fed = trie_sizes(candidates, planner.max_guess, planner.max_length) if self.token_tree else None
        plan = planner.plan(len(candidates), confidence, position, None, fed)
        return [c[: plan.length] for c in candidates[: plan.guesses]], plan.predicted_seconds
