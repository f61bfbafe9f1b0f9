"""Counterfactual acceptance records: what verifying the pool's candidates would have accepted.

Owns ``AcceptanceStats`` (one sequence's offers, scored once the committed text covers them) and
``RowRecords`` (a row's records overall, per confidence class and while the lookahead branch ran).
The planner (``lade.autotune``) reads them; they never choose a plan, and never see the model.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence


class AcceptanceStats:
    """Counterfactual acceptance of the pool's candidates over the last ``history`` steps that had any.

    ``offer`` notes the candidates at a step (all of them, verified or not) with which ones the
    lookahead branch harvested; ``resolve`` scores the pending offers whose span the committed
    sequence now covers. ``expected(g, l)`` is then the mean over the scored offers of
    ``min(l, max_{i<g} match_i)``, the tokens verifying the first g candidates cut to l tokens
    would have accepted (exact for greedy decoding, an estimate under sampling).
    """

    def __init__(self, max_guess: int, max_length: int, history: int = 64):
        if min(max_guess, max_length, history) < 1:
            raise ValueError("max_guess, max_length and history must be >= 1")
        self.max_guess = max_guess
        self.max_length = max_length
        self.history = history
        self._pending: deque[tuple[int, list[tuple[int, ...]], list[bool]]] = deque()
        # each record: per g = 1..G, the best match among the first g candidates, with and without
        # the harvested ones (``_best_by_guess``)
        self._records: deque[tuple[list[int], list[int]]] = deque()
        # running sums over the records of min(l, best of the first g), with and without harvested ones
        self._sum_all = [[0] * (max_length + 1) for _ in range(max_guess + 1)]
        self._sum_seed = [[0] * (max_length + 1) for _ in range(max_guess + 1)]
        # _ramp[b][l] = min(l, b): what a record whose best match is b adds at length l (precomputed:
        # scoring runs for every source's records at every step)
        self._ramp = [[min(cut, best) for cut in range(max_length + 1)] for best in range(max_length + 1)]
        self._harvest_records = 0  # records whose best matches change without the harvested candidates
        self._means: dict[bool, list[list[float]]] = {}  # ``means`` until the next record

    def __len__(self) -> int:
        """Scored offers in the history."""
        return len(self._records)

    def drop_pending(self) -> None:
        """Forget the offers not yet scored (their sequence ended)."""
        self._pending.clear()

    def offer(self, position: int, candidates: Sequence[Sequence[int]], harvested: Sequence[bool]) -> None:
        """Candidates offered for the tokens at ``position``, ``position + 1``, ... of the sequence."""
        if candidates:
            kept = [tuple(c[: self.max_length]) for c in candidates[: self.max_guess]]
            self._pending.append((position, kept, list(harvested[: self.max_guess])))

    def resolve(self, sequence: Sequence[int], final: bool = False) -> None:
        """Score the offers the committed ``sequence`` now covers (all of them when ``final``:
        the tokens past the end count as mismatches, as the verifier would have had them)."""
        while self._pending:
            position, candidates, harvested = self._pending[0]
            span = max(len(c) for c in candidates)
            if not final and len(sequence) < position + span:
                return
            self._pending.popleft()
            actual = sequence[position : position + span]
            matches = [common_prefix(c, actual) for c in candidates]
            self._add(matches, harvested)

    @property
    def harvest_matters(self) -> bool:
        """Whether leaving the harvested candidates out changes ``expected`` (else the two are equal:
        no record in the history has a harvested candidate that matched better than the others)."""
        return self._harvest_records > 0

    def expected(self, guesses: int, length: int, without_harvested: bool = False) -> float:
        """Mean accepted candidate tokens for the first ``guesses`` candidates cut to ``length``."""
        return self.means(without_harvested)[min(guesses, self.max_guess)][min(length, self.max_length)]

    def means(self, without_harvested: bool = False) -> list[list[float]]:
        """[G + 1][L + 1]: ``expected(g, l)`` for every g and l at once (the planner reads them all, and
        several times a step: computed once per record, and shared, so not to be modified)."""
        if without_harvested not in self._means:
            table = self._sum_seed if without_harvested else self._sum_all
            count = max(1, len(self._records))  # no records: the sums are zeros
            means = [[total / count for total in sums] for sums in table[1:]]
            self._means[without_harvested] = [[0.0] * (self.max_length + 1), *means]  # g = 0: nothing
        return self._means[without_harvested]

    def _add(self, matches: list[int], harvested: list[bool]) -> None:
        seed = [m for m, h in zip(matches, harvested, strict=True) if not h]
        record = (self._best_by_guess(matches), self._best_by_guess(seed))
        self._means.clear()
        self._apply(record, +1)
        self._records.append(record)
        self._harvest_records += record[0] != record[1]
        if len(self._records) > self.history:
            dropped = self._records.popleft()
            self._apply(dropped, -1)
            self._harvest_records -= dropped[0] != dropped[1]

    def _best_by_guess(self, matches: list[int]) -> list[int]:
        """[G] the best match among the first g candidates, g = 1..G (cut to ``max_length``)."""
        best_by_guess, best = [], 0
        for g in range(self.max_guess):
            if g < len(matches):
                best = max(best, min(matches[g], self.max_length))
            best_by_guess.append(best)
        return best_by_guess

    def _apply(self, record, sign: int) -> None:
        """Add (``sign`` +1) or remove (-1) a record's min(l, best of the first g) to the sums."""
        for table, best_by_guess in zip((self._sum_all, self._sum_seed), record, strict=True):
            for g, best in enumerate(best_by_guess, start=1):
                if best:  # a record without a match adds nothing
                    ramp = self._ramp[best]
                    table[g] = [total + sign * add for total, add in zip(table[g], ramp, strict=True)]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class RowRecords:
    """One row's acceptance records: all offers, the offers of each confidence class, and the offers
    made while the lookahead branch was running (the records its gain is measured on)."""

    def __init__(self, max_guess: int, max_length: int, history: int):
        self.all = AcceptanceStats(max_guess, max_length, history)
        self.by_class: dict[int, AcceptanceStats] = {}
        self.forget_branch()  # self.branch, and the steps it ran (branch_steps), those with offers

    def offer(self, position, candidates, harvested, confidence: int, during_branch: bool) -> None:
        self.all.offer(position, candidates, harvested)
        if during_branch:
            self.branch.offer(position, candidates, harvested)
            self.branch_steps += 1
            self.branch_offers += bool(candidates)
        if confidence not in self.by_class:
            self.by_class[confidence] = AcceptanceStats(
                self.all.max_guess, self.all.max_length, self.all.history
            )
        self.by_class[confidence].offer(position, candidates, harvested)

    def resolve(self, sequence: Sequence[int], final: bool) -> None:
        for stats in self._every():
            stats.resolve(sequence, final)

    def drop_pending(self) -> None:
        for stats in self._every():
            stats.drop_pending()

    def forget_branch(self) -> None:
        """Drop the branch's records (a retry: its gain is measured afresh)."""
        self.branch = AcceptanceStats(self.all.max_guess, self.all.max_length, self.all.history)
        self.branch_steps = self.branch_offers = 0

    def branch_gain(self, guesses: int, length: int) -> float:
        """Candidate tokens a step gained from the branch's harvests while it ran: the acceptance of
        its records with all candidates minus that without the ones only the branch harvested, over
        every step it ran (a step without any candidate gained nothing)."""
        stats = self.branch
        gain = stats.expected(guesses, length) - stats.expected(guesses, length, without_harvested=True)
        return max(0.0, gain) * self.branch_offers / max(1, self.branch_steps)

    def _every(self):
        return (self.all, self.branch, *self.by_class.values())

    def records(self, confidence: int, min_records: int) -> AcceptanceStats:
        """The class's records once there are enough of them, else all records."""
        stats = self.by_class.get(confidence)
        return stats if stats is not None and len(stats) >= min_records else self.all
