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
choosing among every source.

An ordinary pool is one source: the chooser then just runs its planner's plan. The planners share
one latency curve, so a step's prices are computed once for all of them (``step_pricer``).
"""

from __future__ import annotations

from collections.abc import Sequence

from lade.acceptance import AcceptanceStats
from lade.autotune import Planner, StepPlan, step_pricer
from lade.policy_tally import PolicyTally

NOT_RUN = StepPlan(False, 0, 1, 0.0, 1.0)  # what a planner whose source was not chosen is told ran


class SourceChooser:
    """One ``Planner`` per draft source (``planners``, in the pool's source order); the step's plan is
    the one of the highest predicted tokens per second (ties: the first source), among the sources of
    the policy that has realized the most (``PolicyTally``; all of them by default, and always
    without ``follow_policies``)."""

    def __init__(self, planners: Sequence[Planner], follow_policies: bool = True):
        if not planners:
            raise ValueError("a source chooser needs at least one planner")
        self.planners = list(planners)
        self.tally = PolicyTally(len(self.planners)) if follow_policies and len(self.planners) > 1 else None
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

    def start(self, rows: int = 1) -> None:
        """A call of ``rows`` rows begins (``Planner.start`` of every source)."""
        self.chosen = []
        self._pricer = None
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
        if self.tally is not None:
            best = self.tally.pick(plans)
        else:
            best = max(range(len(plans)), key=lambda s: (plans[s].rate, -s))
        for source, planner in enumerate(self.planners):
            planner.adopt(plans[source] if source == best else NOT_RUN)
        self.chosen.append(best)
        return best
