"""Cost-aware choice of W, N and G, step by step: ``window="auto"``, ``ngram="auto"``, ``guess="auto"``.

Each step the planner picks what to feed the model: whether to run the lookahead branch (W guesses
x (N-1) levels), how many of the pool's candidates to verify (g <= G) and how many tokens of each
(l <= N-1). It maximises predicted tokens per second:

    predicted tokens = 1 + A(g, l) [+ branch gain]        (the bonus token is always committed)
    predicted time   = latency(1 + T(g, l) [+ W*(N-1)], P)    (``lade.calibration``; P = cached tokens)

``T(g, l)`` is what the candidates feed: g*l as chains, the trie's nodes when they are merged into a
token trie (``lade.trie``).

``A(g, l)`` is the expected number of accepted candidate tokens when the first g candidates, cut to
l tokens, are verified. It is estimated from *counterfactual* records (``AcceptanceStats``): every
step, the pool's candidates are noted whether or not they are verified, and once the output has
grown past them, their match length against what was actually committed is exactly what the greedy
verifier would have accepted. So every (g, l) is scored on every step, at no extra forward cost,
including during plain steps: lookahead restarts by itself when the text becomes predictable again.
Before a call's first offers have been scored, ``A`` is a prior (``PlannerPriors.candidate``: the chance
that each next token of the first candidate holds), so a call verifies candidates from its first step
where the curve makes them cheap, instead of waiting ~N + ``min_records`` plain steps for records.
Plain decoding (no branch, g = 0) is always one of the options: when nothing is predicted to win,
the step is a plain step.

The branch's gain is indirect and amortised (its n-grams enter the pool and are verified on later
steps); it is measured, on the steps it ran, as the records' expected acceptance with all candidates
minus that with only the candidates the branch did not harvest. Whether the branch runs is chosen
by that steady state (candidates without its harvests, plus its gain); which candidates a step then
verifies is chosen from all it is offered, the branch's harvests included. Until the branch has
run long enough to measure it, a prior is used (``PlannerPriors.branch``), so the branch is only tried
where the prior could pay for its tokens on this hardware; its size W is chosen among the allowed
sizes the same way.

Owns the plan (``StepPlan``) and the branch's trial state; the records are ``lade.acceptance``'s, the
latency curves ``lade.calibration``'s. The planner never sees the model, the pool or the cache: the
loop hands it what the pool offers and what was committed. One planner serves one call (its rows),
unless the decoder is told to learn across calls.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from lade.acceptance import AcceptanceStats, RowRecords
from lade.calibration import LatencyModel
from lade.priors import DEFAULT_PRIORS, PlannerPriors, prior_acceptance

AUTO = "auto"


def is_auto(value) -> bool:
    return isinstance(value, str) and value == AUTO


@dataclass(frozen=True)
class StepPlan:
    """What one step feeds the model."""

    branch: bool  # run the lookahead branch
    guesses: int  # g: candidates verified (0..G)
    length: int  # l: tokens verified of each candidate (1..N-1; irrelevant when g = 0)
    predicted_tokens: float  # expected tokens committed
    predicted_seconds: float  # expected forward time
    window: int = 0  # W of the branch when it runs

    @property
    def rate(self) -> float:
        return self.predicted_tokens / self.predicted_seconds


class Planner:
    """Chooses each step's ``StepPlan`` from the latency curve and the acceptance records.

    A batch of B rows shares one plan (one forward pass, one step layout), so the planner keeps
    acceptance records per row (``row=`` of ``offer``/``resolve``) and one branch state, and plans
    for the batch: predicted tokens are summed over the rows (or paced by the rows behind, see
    ``plan``), the predicted time is that of B rows of the step's tokens: ``batch_latency(B, S)``
    when set (curves measured per batch size, ``lade.calibration.BatchLatency``), else
    ``latency(B * S)`` (one row of B*S tokens: an approximation that misses the B caches a batch reads).

    Args:
        latency: forward seconds vs tokens per step on this hardware.
        window: W of the lookahead branch (0: no branch available), the largest it may take.
        windows: the branch sizes an auto window chooses among (default: just ``window``); the decoder
            resizes the proposer's window when the plan's W changes.
        branch_levels: N-1, the branch's levels when full.
        max_guess: G, most candidates a step may verify.
        max_length: N-1, most tokens of a candidate a step may verify.
        auto_window / auto_guess / auto_length: which of branch on/off, g, l the planner chooses;
            the others stay at their maximum (fixed W, G, N as given by the user).
        min_records: scored offers a row needs before its records replace the candidate prior.
        priors: what the planner assumes until the call has measured it (``PlannerPriors``).
        branch_retry: steps after which a branch measured as useless is tried again (from the prior).
        margin: an option must beat plain decoding's rate by this factor to be chosen, so noise in
            the estimates does not make lookahead slower than plain decoding.
    """

    def __init__(
        self,
        latency: LatencyModel,
        window: int,
        branch_levels: int,
        max_guess: int,
        max_length: int,
        auto_window: bool = True,
        auto_guess: bool = True,
        auto_length: bool = True,
        min_records: int = 8,
        priors: PlannerPriors = DEFAULT_PRIORS,
        branch_retry: int = 256,
        margin: float = 1.02,
        history: int = 64,
        windows: tuple[int, ...] | None = None,
        switch_margin: float = 1.05,
    ):
        self.latency = latency
        self.window = window
        self.windows = tuple(w for w in (windows or (window,)) if 0 < w <= window)  # () when window = 0
        self.switch_margin = switch_margin
        self._current_window = window  # the branch size in use (switched only for a clear gain)
        self.branch_levels = branch_levels
        self.max_guess = max_guess
        self.max_length = max_length
        self.auto_window = auto_window
        self.auto_guess = auto_guess
        self.auto_length = auto_length
        self.min_records = min_records
        self.priors = priors
        # the prior's accepted tokens at each length l (index l), computed once, not per step and shape
        self._prior_by_length = [prior_acceptance(priors.candidate, cut) for cut in range(max_length + 1)]
        self.branch_retry = branch_retry
        self.margin = margin
        self.history = history
        self._rows = [RowRecords(max(max_guess, 1), max(max_length, 1), history)]
        self.batch_latency = None  # (rows, S, context) -> seconds for batches; set per call by the decoder
        self._branch_steps = 0  # steps the branch has run since it was last (re)started
        self._idle_steps = 0  # steps since the branch last ran
        self._branch_ran = False  # whether the latest plan ran the branch (its harvests are in the pool)

    @property
    def stats(self) -> AcceptanceStats:
        """Row 0's records of all offers (the only row of an unbatched decode)."""
        return self._rows[0].all

    def start(self, rows: int = 1) -> None:
        """New sequences begin, ``rows`` of them: pending offers are dropped, the scored records are
        kept (they are the best guess for the next sequence of the same model and pool until its own
        replace them); rows beyond the ones kept start as copies of row 0's records."""
        del self._rows[rows:]
        while len(self._rows) < rows:
            self._rows.append(copy.deepcopy(self._rows[0]))
        for records in self._rows:
            records.drop_pending()

    def _restart_branch(self) -> None:
        """The branch's gain is measured afresh: the prior until it has run ``priors.trial`` steps again."""
        self._branch_steps = self._idle_steps = 0
        self._branch_ran = False
        for records in self._rows:
            records.forget_branch()

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only these rows' records, in this order (rows that finished leave the batch)."""
        self._rows = [self._rows[i] for i in rows]

    def offer(
        self,
        position: int,
        candidates: Sequence[Sequence[int]],
        harvested: Sequence[bool],
        confidence: int = 0,
        row: int = 0,
    ) -> None:
        """Note the pool's candidates at this step of ``row`` (see ``AcceptanceStats.offer``), in the
        overall records and in those of their confidence class (``NGramPool.confidence``)."""
        self._rows[row].offer(position, candidates, harvested, confidence, during_branch=self._branch_ran)

    def resolve(self, sequence: Sequence[int], final: bool = False, row: int = 0) -> None:
        """Score the offers of ``row`` that its committed ``sequence`` now covers."""
        self._rows[row].resolve(sequence, final)

    def branch_gain(self, window: int | None = None) -> float:
        """Extra accepted tokens per step, summed over the rows, credited to running a lookahead
        branch of ``window`` columns (default: the size in use). Its value is amortised: the n-grams
        it harvests now are verified on later steps, so it is credited even on a step without
        candidates. Measured, once the branch has run ``priors.trial`` steps, on the offers made while
        it ran (offers from before, a warm-up or an earlier text, held none of its harvests), as their
        acceptance at full G and N-1 with all candidates minus that without the ones only the branch
        harvested, spread over all the steps it ran; the prior before. Other sizes scale by
        log2(1 + W) (the paper's compression grows about logarithmically in W)."""
        return sum(self._row_gains(window))

    def _row_gains(self, window: int | None) -> list[float]:
        """``branch_gain`` of each row."""
        window = self._current_window if window is None else window
        if self.window == 0 or window == 0:
            return [0.0] * len(self._rows)
        scale = math.log2(1 + window)
        gains = []
        for records in self._rows:
            if self._branch_steps >= self.priors.trial:
                measured = records.branch_gain(self.max_guess, self.max_length)
                gains.append(measured * scale / math.log2(1 + self._current_window))
            else:
                gains.append(self.priors.branch * scale)
        return gains

    def plan(self, *args, **kwargs) -> StepPlan:
        """``choose`` (same arguments) then ``adopt``: the plan the step runs."""
        return self.adopt(self.choose(*args, **kwargs))

    def choose(
        self,
        available: int | Sequence[int],
        confidence: int | Sequence[int] = 0,
        context: int | None = None,
        behind: Sequence[bool] | None = None,
        fed: Sequence[Sequence[int]] | None = None,
        pricer=None,
    ) -> StepPlan:
        """The best plan when the pool offers ``available`` candidates of class ``confidence`` (one
        value, or one per row of a batch), with ``context`` tokens in the cache (latency grows with
        it). For a batch, ``guesses`` is the most any row verifies (each row verifies at most what
        its pool offers) and the predicted tokens are the batch's.

        ``behind`` marks the rows that bound the batch's completion (those with the most tokens
        still to produce). A static batch runs until its slowest row is done, so extra tokens of the
        rows ahead do not shorten it: with ``behind`` given, the plan counts the acceptance of the
        least accepting row behind, for every row (``B * min``); without, the sum over the rows (the
        throughput of a batch whose finished rows are replaced at once).

        ``fed[g][l]``: the tokens per row a step verifying (g, l) feeds (``lade.trie.trie_sizes``:
        candidates merged into a trie feed shared prefixes once); default g * l (chains).

        ``pricer``: the step's ``step_pricer`` for these rows and ``context``, when several planners
        price the same step (``lade.source_choice``); default: one of this planner's own."""
        available = [available] if isinstance(available, int) else list(available)
        if isinstance(confidence, int):
            confidence = [confidence] * len(available)
        if len(available) != len(self._rows) or len(confidence) != len(available):
            raise ValueError(f"plan for {len(available)} rows, but the planner holds {len(self._rows)}")
        rows = len(available)
        trusted = [len(records.all) >= self.min_records for records in self._rows]
        records = [r.records(c, self.min_records) for r, c in zip(self._rows, confidence, strict=True)]
        window_options = (0, *self.windows) if self.auto_window else (self.window,)

        seconds_for = pricer or step_pricer(self.latency, self.batch_latency, rows, context)

        plain_seconds = seconds_for(1)
        plain_rate = rows / plain_seconds
        if self.auto_window and self._idle_steps >= self.branch_retry:
            self._restart_branch()  # measured as useless long ago: the prior gets another chance
        counted = [b for b in range(rows) if behind is None or behind[b]] or list(range(rows))

        def combine(values: list[float]) -> float:
            return sum(values) if behind is None else rows * min(values)

        def row_accepted(b: int, g: int, cut: int, without_harvested: bool) -> float:
            if not (g and available[b]):
                return 0.0
            if not trusted[b]:
                return self._prior_by_length[cut]
            return records[b].means(without_harvested)[min(g, available[b])][cut]  # g <= G, l <= N-1

        def accepted(g: int, cut: int, without_harvested: bool) -> float:
            if rows == 1:  # one sequence: its own acceptance (what combining one value gives)
                return row_accepted(0, g, cut, without_harvested)
            return combine([row_accepted(b, g, cut, without_harvested) for b in counted])

        top = min(max(available), self.max_guess)
        predicted = any(trusted) or self.priors.candidate > 0  # records, or the prior, predict acceptance
        allowed = list(candidate_shapes(top, self.max_length, self.auto_guess, self.auto_length, predicted))
        # (g, l) -> tokens a step verifying it feeds, the root included
        sizes = {(g, cut): 1 + (g * cut if fed is None else fed[g][cut]) for g, cut in allowed}
        # expected accepted tokens without the branch's harvests: what the candidates give in the long
        # run whatever the branch does (its harvests are credited as its gain)
        shapes = best_by_size(sizes, lambda g, cut: accepted(g, cut, True))
        most_accepted = max(tokens for _, _, tokens in shapes)
        best_by_window: dict[int, StepPlan] = {}
        best_rate = 0.0
        for window in window_options:
            extra = window * self.branch_levels
            gains = self._row_gains(window)
            gain = combine([gains[b] for b in counted])
            if window and (rows + most_accepted + gain) / seconds_for.floor(1 + extra) <= best_rate:
                continue  # even its best case loses: skip its shapes (keeps the plan cheap on a CPU)
            top, top_rate = None, 0.0
            for size, (g, cut), tokens in shapes:
                seconds = seconds_for(size + extra)
                rate = (rows + tokens + gain) / seconds
                if rate > top_rate:
                    top, top_rate = (g, cut, rows + tokens + gain, seconds), rate
            best_by_window[window] = StepPlan(window > 0, top[0], top[1], top[2], top[3], window)
            best_rate = max(best_rate, top_rate)
        best = max(best_by_window.values(), key=lambda plan: plan.rate)
        staying = best_by_window.get(self._current_window)
        if best.branch and staying is not None and best.window != self._current_window:
            if best.rate < staying.rate * self.switch_margin:  # resizing the window is not free
                best = staying
        plain = StepPlan(False, 0, self.max_length, float(rows), plain_seconds)
        can_be_plain = (self.auto_window or self.window == 0) and (self.auto_guess or max(available) == 0)
        if can_be_plain and best.rate < plain_rate * self.margin:
            best = plain
        elif best.guesses or best.branch:
            harvests = any(trusted[b] and records[b].harvest_matters for b in counted)
            offered = best_by_size(sizes, lambda g, cut: accepted(g, cut, False)) if harvests else shapes
            best = offered_shape(best, offered, seconds_for, rows, self.branch_levels)
        return best

    def adopt(self, plan: StepPlan) -> StepPlan:
        """The step runs ``plan`` (one ``choose`` gave, or another source's plan: then pass a plan
        without the branch): the branch's trial state follows it. Returns ``plan``."""
        if plan.branch:
            self._current_window = plan.window
            self._branch_steps += 1
            self._idle_steps = 0
        else:
            self._idle_steps += 1
        self._branch_ran = plan.branch
        return plan


def step_pricer(latency: LatencyModel, batch_latency, rows: int, context: int | None):
    """``seconds_for(size)``: one step of ``size`` tokens per row for ``rows`` rows after ``context``
    cached tokens (``latency``, or ``batch_latency(rows, size, context)`` for batches when set), each
    size priced once (many (W, g, l) feed the same number of tokens); ``seconds_for.floor(size)``: the
    least any step of ``size`` or more tokens per row costs (a larger step may cost less), each size
    bounded once."""
    priced: dict[int, float] = {}
    floors: dict[int, float] = {}
    batched = rows > 1 and batch_latency is not None

    def seconds_for(size: int) -> float:
        if size not in priced:
            priced[size] = batch_latency(rows, size, context) if batched else latency(rows * size, context)
        return priced[size]

    def floor(size: int) -> float:
        if size not in floors:
            if batched:
                floors[size] = batch_latency.floor(rows, size, context)
            else:
                floors[size] = latency.floor(rows * size, context)
        return floors[size]

    seconds_for.floor = floor
    return seconds_for


def best_by_size(sizes: dict, accepted) -> list[tuple[int, tuple[int, int], float]]:
    """For each number of tokens fed, the shape (g, l) of ``sizes`` (shape -> tokens fed, in order of
    preference) whose ``accepted(g, l)`` is the highest, the first such: a step's rate depends on the
    tokens it feeds and accepts alone, so no other shape can be the best. Returns (tokens fed,
    (g, l), accepted) per size, in the order of preference."""
    best: dict[int, tuple[int, int, tuple[int, int], float]] = {}
    for rank, (shape, size) in enumerate(sizes.items()):
        tokens = accepted(*shape)
        if size not in best or tokens > best[size][3]:
            best[size] = (rank, size, shape, tokens)
    return [item[1:] for item in sorted(best.values())]


def offered_shape(chosen: StepPlan, offered: list, seconds_for, rows: int, branch_levels: int) -> StepPlan:
    """With the branch decided (``chosen``'s), the shape (g, l) that verifies the most tokens per
    second from what the pool offers now (``offered``: (tokens fed, (g, l), expected accepted tokens)
    per shape considered, in order of preference at equal rates), the branch's harvests included. The
    choice of the branch leaves them out (its gain stands for them); choosing the shape that way would
    verify none of them where the other candidates fail, and the branch would run for nothing.
    ``seconds_for(size)``: a step feeding ``size`` tokens, the branch's included."""
    extra = chosen.window * branch_levels if chosen.branch else 0
    size, (g, cut), tokens = max(offered, key=lambda item: (rows + item[2]) / seconds_for(item[0] + extra))
    return replace(
        chosen,
        guesses=g,
        length=cut,
        predicted_tokens=rows + tokens,
        predicted_seconds=seconds_for(size + extra),
    )


def candidate_shapes(top: int, max_length: int, auto_guess: bool, auto_length: bool, trusted: bool):
    """The (g, l) pairs a step may verify: g up to ``top`` candidates (only ``top`` unless G is auto;
    none but g = 0 while nothing predicts their acceptance, neither records nor a prior: ``trusted``
    False, and G is auto), l up to ``max_length`` tokens (only ``max_length`` unless N is auto)."""
    guesses = range(0, top + 1) if auto_guess else (top,)
    lengths = range(1, max_length + 1) if auto_length else (max_length,)
    for g in guesses:
        if g == 0:
            yield 0, max_length
        elif trusted or not auto_guess:
            for cut in lengths:
                yield g, cut
