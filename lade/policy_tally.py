"""What fixed ways of choosing among draft sources would have realized on the steps run, measured.

The source chooser (``lade.source_choice``) picks, each step, the source of the highest predicted
rate. Predictions are averages of each source's records, and a source tends to win where the others
predict little: there its candidates are accepted less than its records' average (selection), so
the step-by-step choice can commit fewer tokens per second than one source alone would.

``PolicyTally`` measures this at no forward cost. A *policy* is a set of sources, run each step as
the plan of the highest predicted rate among them: all the sources (the default), each source
alone, all but one. Every step, each source's plan and the candidates it would verify are kept;
once the committed text covers them, each plan's realized tokens (1 + the longest verified candidate
prefix that matches: what the greedy verifier accepts) and priced seconds are summed for every
policy that would have run it. A policy's sums are not selected on its own outcomes, so its realized
rate estimates what following it gives, on the same steps as every other policy (a paired
comparison). The chooser follows the policy that has realized the most tokens per second over the
recent steps when it beats the default's by a margin.

Only the candidates verified right away are counted: a plan that runs the lookahead branch gets no
credit for the n-grams it harvests (they pay off on later steps), so a policy that relies on the
branch is measured conservatively; under sampling the realized tokens are the greedy estimate the
acceptance records use too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from lade.acceptance import common_prefix


class PolicyTally:
    """Realized tokens and seconds of choosing policies over the last ``history`` scored steps of each
    row. A policy is a set of sources: each step it runs the plan of the highest predicted rate among
    them. ``policies`` (default ``default_policies``): the first is the one followed by default, every
    source's.

    Per step: ``offer`` (each source's candidates of a row), ``adopt`` (each source's plan), then
    ``resolve`` as the row's text grows. ``pick(plans)``: the source the leading policy runs this step;
    the leader is the policy with the highest realized rate once ``min_steps`` steps are scored, if it
    beats the default's by ``margin``, else the default."""

    def __init__(
        self,
        sources: int,
        policies: Sequence[Sequence[int]] | None = None,
        history: int = 64,
        min_steps: int = 16,
        margin: float = 1.05,
    ):
        if sources < 1 or history < 1:
            raise ValueError("a policy tally needs at least one source and a history of >= 1 step")
        self.sources = sources
        self.policies = [tuple(p) for p in (policies or default_policies(sources))]
        self.history = history
        self.min_steps = min_steps
        self.margin = margin
        self._offers: list[dict[int, tuple[int, list[tuple[int, ...]]]]] = []  # per row: source -> offer
        self._pending: list[deque] = []  # per row: steps waiting for their text
        self.start()
        self._scored: deque[tuple[list[int], list[float]]] = deque()  # (tokens, seconds) per policy
        self._tokens = [0.0] * len(self.policies)
        self._seconds = [0.0] * len(self.policies)

    def start(self, rows: int = 1) -> None:
        """A call of ``rows`` rows begins: pending steps are dropped, scored ones kept."""
        self._offers = [{} for _ in range(rows)]
        self._pending = [deque() for _ in range(rows)]

    def keep_rows(self, rows: Sequence[int]) -> None:
        self._offers = [self._offers[i] for i in rows]
        self._pending = [self._pending[i] for i in rows]

    def offer(self, source: int, position: int, candidates: Sequence[Sequence[int]], row: int = 0) -> None:
        """``source``'s candidates for the tokens at ``position``, ... of ``row`` this step."""
        self._offers[row][source] = (position, [tuple(c) for c in candidates])

    def picks(self, plans: Sequence) -> list[int]:
        """The source each policy runs given this step's ``plans`` (one ``StepPlan`` per source)."""
        return [max(policy, key=lambda s: (plans[s].rate, -s)) for policy in self.policies]

    def pick(self, plans: Sequence) -> int:
        """The source to run this step: the leading policy's pick; the step is noted for scoring."""
        picks = self.picks(plans)
        leader = self.leader()
        for offers, pending in zip(self._offers, self._pending, strict=True):
            if len(offers) < self.sources:
                continue
            position = offers[0][0]
            verified = [
                [c[: plan.length] for c in offers[s][1][: plan.guesses]] for s, plan in enumerate(plans)
            ]
            seconds = [plan.predicted_seconds for plan in plans]
            pending.append((position, verified, seconds, picks))
            offers.clear()
        return picks[leader]

    def resolve(self, sequence: Sequence[int], final: bool = False, row: int = 0) -> None:
        """Score ``row``'s steps that its committed ``sequence`` now covers (all when ``final``)."""
        pending = self._pending[row] if row < len(self._pending) else ()
        while pending:
            position, verified, seconds, picks = pending[0]
            span = max((len(c) for candidates in verified for c in candidates), default=0)
            if not final and len(sequence) < position + span:
                return
            pending.popleft()
            actual = sequence[position : position + span]
            tokens = [1 + max((common_prefix(c, actual) for c in cs), default=0) for cs in verified]
            self._add([tokens[s] for s in picks], [seconds[s] for s in picks])

    def rate(self, policy: int) -> float:
        """Realized tokens per predicted second of ``policy`` over the scored steps (0: none)."""
        return self._tokens[policy] / self._seconds[policy] if self._seconds[policy] else 0.0

    def __len__(self) -> int:
        return len(self._scored)

    def leader(self) -> int:
        """The policy to follow: the default (0) until ``min_steps`` steps are scored, then the policy
        of the highest realized rate if it beats the default's by ``margin``."""
        if len(self._scored) < self.min_steps:
            return 0
        best = max(range(len(self.policies)), key=lambda p: (self.rate(p), p == 0))
        return best if self.rate(best) > self.rate(0) * self.margin else 0

    def _add(self, tokens: list[int], seconds: list[float]) -> None:
        self._scored.append((tokens, seconds))
        for p in range(len(self.policies)):
            self._tokens[p] += tokens[p]
            self._seconds[p] += seconds[p]
        if len(self._scored) > self.history:
            old_tokens, old_seconds = self._scored.popleft()
            for p in range(len(self.policies)):
                self._tokens[p] -= old_tokens[p]
                self._seconds[p] -= old_seconds[p]


def default_policies(sources: int) -> list[tuple[int, ...]]:
    """Every source; each source alone; every source but one (when there are three or more)."""
    everything = tuple(range(sources))
    policies = [everything, *((s,) for s in everything)]
    if sources >= 3:
        policies += [tuple(t for t in everything if t != s) for s in everything]
    return policies
