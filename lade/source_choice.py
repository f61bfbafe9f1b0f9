"""The auto planner over several draft sources: which source's candidates a step verifies.

A pool may hold several draft sources (``pools.CombinedPool``: the lookahead branch's n-gram pool, a
suffix tree, Token Recycling's table, ...). Each source gets a ``Planner`` of its own, with its own
counterfactual acceptance records: every step, every source's candidates are offered to its planner
and scored once the output has grown past them, whether or not they were verified. So each planner
predicts, every step, the tokens per second its source would give (its best (W, g, l) on the latency
curve); the step runs the plan with the highest predicted rate, and only the chosen planner's branch
state advances as having run. A source the branch does not feed (``NGramPool.fed_by_branch``) has a
planner without a branch, so the branch runs only for the sources whose candidates it grows.

Predicted rates are biased in favour of the winner (a source wins where the others predict little,
and there fares worse than its records' average), so with several sources the chooser also keeps a
``PolicyTally``: what each way of choosing (every source, each alone, all but one) realizes on the
steps run; the step runs the pick of the way that has realized the most, when it clearly beats
choosing among every source. The tally scores other ways on the steps the call ran, not on the steps
they would have run; a source whose candidates depend on the text alone (the suffix tree) can be run
by itself on the side exactly (``lade.solo_replay``): a one-row call follows that source alone for
the rest of the call once its replay has reached the same text for clearly fewer priced seconds.

An ordinary pool is one source: the chooser then just runs its planner's plan. The planners share
one latency curve, so a step's prices are computed once for all of them (``step_pricer``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from lade.acceptance import AcceptanceStats
from lade.autotune import Planner, StepPlan, step_pricer
from lade.interfaces import NGramPool
from lade.policy_tally import PolicyTally
from lade.solo_replay import CostTrace, SoloReplay

NOT_RUN = StepPlan(False, 0, 1, 0.0, 1.0)  # what a planner whose source was not chosen is told ran


class SourceChooser:
    """One ``Planner`` per draft source (``planners``, in the pool's source order); the step's plan is
    the one of the highest predicted tokens per second (ties: the first source), among the sources of
    the policy that has realized the most (``PolicyTally``; all of them by default, and always
    without ``follow_policies``).

    With ``follow_policies``, a one-row call also replays its first text-only source alone
    (``start``'s ``pools``; ``SoloReplay``, its steps priced as the call's, candidates fed as a trie
    when ``token_tree``): once the replay has covered ``replay_tokens`` tokens, if it reached its
    position in ``replay_margin`` times fewer priced seconds than the call's own steps did, the call
    runs that source's plans alone from then on (``alone``; the other sources are no longer asked);
    if the call's own steps reached it in ``replay_margin`` times fewer, the replay stops there (its
    host time is saved) and the call chooses as before. The margin and length were chosen on the dev
    prompts (``experiments/step_costs.py``, decisions only, both pinned curves)."""

    def __init__(
        self,
        planners: Sequence[Planner],
        follow_policies: bool = True,
        token_tree: bool = True,
        replay_margin: float = 1.05,
        replay_tokens: int = 24,
    ):
        if not planners:
            raise ValueError("a source chooser needs at least one planner")
        self.planners = list(planners)
        self.tally = PolicyTally(len(self.planners)) if follow_policies and len(self.planners) > 1 else None
        self.token_tree = token_tree
        self.replay_margin = replay_margin
        self.replay_tokens = replay_tokens
        self._replica: tuple[int, NGramPool] | None = None  # (source, replica) to replay, until the 1st step
        self._replay: tuple[int, SoloReplay] | None = None
        self._trace: CostTrace | None = None  # the call's own steps, priced
        self._step_seconds: float | None = None  # the latest adopted plan's, until its text is in
        self.alone: int | None = None  # the source followed alone for the rest of the call
        self.chosen: list[int] = []  # the source each step verified, in step order (for the metrics)
        self._pricer = None  # this step's prices, shared by the planners until ``adopt``
        self._priced_for = None  # the (rows, context) they are for

    @property
    def stats(self) -> AcceptanceStats:
        """The first source's records of all offers of row 0."""
        return self.planners[0].stats

    @property
    def batch_latency(self):
        return self.planners[0].batch_latency

    @batch_latency.setter
    def batch_latency(self, curve) -> None:
        for planner in self.planners:
            planner.batch_latency = curve
        self._pricer = None

    def start(self, rows: int = 1, pools: Sequence[NGramPool] | None = None) -> None:
        """A call of ``rows`` rows begins (``Planner.start`` of every source). ``pools``: a one-row
        call's draft sources, started on its prompt: the first whose candidates depend on the text
        alone (``NGramPool.text_replica``) is replayed alone beside the call (``SoloReplay``)."""
        self.chosen = []
        self._pricer = None
        self._replay, self._trace, self._step_seconds, self.alone = None, None, None, None
        self._replica = None
        if self.tally is not None and rows == 1 and pools is not None:
            replicas = ((source, pool.text_replica()) for source, pool in enumerate(pools))
            self._replica = next(((s, r) for s, r in replicas if r is not None), None)
        for planner in self.planners:
            planner.start(rows)
        if self.tally is not None:
            self.tally.start(rows)

    def keep_rows(self, rows: Sequence[int]) -> None:
        for planner in self.planners:
            planner.keep_rows(rows)
        if self.tally is not None:
            self.tally.keep_rows(rows)

    def offer(
        self,
        source: int,
        position: int,
        candidates: Sequence[Sequence[int]],
        harvested: Sequence[bool],
        confidence: int = 0,
        row: int = 0,
    ) -> None:
        """``Planner.offer`` of ``source``'s planner (and the tally's note of the candidates)."""
        self.planners[source].offer(position, candidates, harvested, confidence, row)
        if self.tally is not None:
            self.tally.offer(source, position, candidates, row)

    def resolve(self, sequence: Sequence[int], final: bool = False, row: int = 0) -> None:
        """Score every source's offers that ``row``'s committed ``sequence`` now covers."""
        for planner in self.planners:
            planner.resolve(sequence, final, row)
        if self.tally is not None:
            self.tally.resolve(sequence, final, row)
        if row == 0 and (self._replica is not None or self._replay is not None):
            self._follow_replay(sequence)

    def _follow_replay(self, sequence: Sequence[int]) -> None:
        """Advance the replay of a source alone to ``sequence``; once it has covered
        ``replay_tokens`` tokens, follow that source alone for the rest of the call when it reached
        the same position for ``replay_margin`` times fewer priced seconds than the call's own steps,
        or stop replaying when the call's steps took ``replay_margin`` times fewer."""
        if self._replica is not None:  # the call's first step (the prefill's token) is in: both start here
            (source, replica), self._replica = self._replica, None
            replica.observe(sequence, 1)  # the prefill's step commits one token
            planner = copy.deepcopy(self.planners[source])
            planner.start(1)
            self._replay = source, SoloReplay(replica, planner, len(sequence), self.token_tree)
            self._trace = CostTrace(len(sequence))
            return
        if self._step_seconds is not None:
            self._trace.step(len(sequence), self._step_seconds)
            self._step_seconds = None
        source, replay = self._replay
        replay.advance(sequence)
        position = replay.position
        if position - replay.trace.start < self.replay_tokens:
            return
        replayed, run = replay.trace.cost_at(position), self._trace.cost_at(position)
        if replayed * self.replay_margin < run:
            self.alone, self._replay = source, None
        elif run * self.replay_margin < replayed:  # the call is clearly ahead: stop paying for the replay
            self._replay = None

    def choose(
        self,
        source: int,
        available: int | Sequence[int],
        confidence: int | Sequence[int] = 0,
        context: int | None = None,
        behind: Sequence[bool] | None = None,
        fed: Sequence[Sequence[int]] | None = None,
    ) -> StepPlan:
        """``Planner.choose`` of ``source``'s planner (no planner state changes), pricing the step with
        the prices the step's other planners computed (for the same rows and ``context``)."""
        rows = 1 if isinstance(available, int) else len(available)
        if self._pricer is None or self._priced_for != (rows, context):
            first = self.planners[0]
            self._pricer = step_pricer(first.latency, first.batch_latency, rows, context)
            self._priced_for = (rows, context)
        return self.planners[source].choose(available, confidence, context, behind, fed, pricer=self._pricer)

    def plain_plan(self, rows: int, context: int) -> StepPlan:
        """What a plain step (no branch, no candidates) of ``rows`` rows, the last after ``context``
        cached tokens, is expected to commit and cost; no planner state changes."""
        first = self.planners[0]
        seconds = step_pricer(first.latency, first.batch_latency, rows, context)(1)
        return StepPlan(False, 0, 1, float(rows), seconds)

    def adopt(self, plans: Sequence[StepPlan]) -> int:
        """The step runs the best of ``plans`` (one per source, from ``choose``) among the sources of
        the leading policy: the index of its source. Every planner is told what ran for it (the
        chosen plan, or ``NOT_RUN``)."""
        if len(plans) != len(self.planners):
            raise ValueError(f"{len(plans)} plans for {len(self.planners)} sources")
        self._pricer = None  # the next step prices afresh
        if self.alone is not None:
            best = self.alone
        elif self.tally is not None:
            best = self.tally.pick(plans)
        else:
            best = max(range(len(plans)), key=lambda s: (plans[s].rate, -s))
        for source, planner in enumerate(self.planners):
            planner.adopt(plans[source] if source == best else NOT_RUN)
        self.chosen.append(best)
        if self._replay is not None:
            self._step_seconds = plans[best].predicted_seconds
        return best
