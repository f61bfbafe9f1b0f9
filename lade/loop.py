"""The lookahead decoding loop, for one prompt or a batch. The loop is not a strategy: proposers,
pools and verifiers plug in.

One step = one forward pass of the unmodified model over ``[last token | lookahead branch |
verification branch]`` (``lade.layout``) for every row still decoding, with explicit positions and a
4D mask against a cache holding the committed prefixes (``lade.executor``); the first step's forward
pass is the prefill itself, whose logits after the prompt give the first token (as in ``generate``:
a call of n tokens runs at most n forward passes). The verifier commits at
least one token per row; each row's proposer advances its window and harvests n-grams into its
pool; the cache keeps the accepted tokens' keys/values (``lade.slots``). A batch shares one step
layout per forward pass: the lookahead branch and the candidate count and length are the same for
every row, and a row with fewer candidates than the step verifies is filled up with filler
candidates whose logits are never read (so they cannot change what the row commits). Rows that
finish (EOS or ``max_new_tokens``) leave the batch; a batch of one is one prompt, on the one-row
fast paths (no hole masks, reused mask buffers, an in-place commit).

The loop owns the order of a step's stages and their timing; the model is the executor's, the
tokens and strategies the session's rows', the plan the session's planner's.
"""

from __future__ import annotations

import time

import torch

from lade.autotune import StepPlan
from lade.cache import new_cache
from lade.executor import StepExecutor
from lade.sequence import SequenceState
from lade.session import DecodingSession
from lade.slots import KeySlots
from lade.source_choice import NOT_RUN
from lade.timer import StageTimer
from lade.trie import trie_sizes
from lade.verification_branch import verification_branch
from pools.combined import draft_names, draft_sources


def decode(session: DecodingSession, executor: StepExecutor) -> None:
    """Decode every row of ``session`` to its end (its tokens, records and metrics in its rows).

    ``session.settings``: ``input_ids`` [B, T] left-padded on the model's input device, ``valid``
    [B, T] (False at padding; every row ends with a real token), ``max_new_tokens`` >= 1, the stopping
    rule, the processors, what to record and a streamer (one row only)."""
    settings, options, metrics = session.settings, session.options, session.metrics
    planner, verifier = session.planner, session.verifier
    ids, valid = settings.input_ids, settings.valid
    if ids.shape[0] == 1:  # one prompt: its padding is not fed at all
        ids = ids[:, valid[0]]
        valid = valid[:, valid[0]]
    device = ids.device
    stop, streamer = settings.stop, settings.streamer
    record = settings.record_scores or settings.record_logits

    prefill_start = time.perf_counter()
    cache = new_cache()
    slots = KeySlots.of_prompts(valid)
    # The prefill is the first step's forward pass: its logits after the last prompt token give the
    # first new token, as in generate (feeding that token again in a step would cost a forward more).
    first_logits = executor.prefill(ids, slots, cache)  # [B, 1, V]
    metrics.prefill_s = time.perf_counter() - prefill_start

    key_length = getattr(session.rows[0].pool, "key_length", 1)
    active = list(session.rows)
    timer = StageTimer(metrics.time_s, device)
    while active:
        step_started = timer.now()
        recorded = _step_metrics(metrics, active)  # where this step's per-pass values go
        contexts = [row.committed[-key_length:] for row in active]
        from_prefill = first_logits is not None  # the first step: its forward was the prefill
        if from_prefill:  # a plain step, its logits the prefill's, its root already cached
            plan, offered, source = _first_plan(session, len(active), slots.length)
        else:
            plan, offered, source = _plan(session, active, contexts, slots.length + 1)
        if source is not None:
            metrics.source_steps[source] += 1
        if planner is not None:  # what the plan expects, beside what the step then commits and takes
            for step_metrics in recorded:
                step_metrics.planned_tokens.append(plan.predicted_tokens)
                step_metrics.planned_s.append(plan.predicted_seconds)
                if source is not None:
                    step_metrics.step_sources.append(source)
        guesses = [min(plan.guesses, len(continuations)) for continuations in offered]
        lasts = [row.committed[-1] for row in active]
        branch = verification_branch(lasts, offered, guesses, plan.length, options.token_tree, device)
        timer.lap("pool")

        levels = _levels(session, active, plan, device)  # [B', L, W]
        num_levels, window = levels.shape[1], levels.shape[2]
        row_layouts = None
        if branch.tries is None:
            layout = executor.layout(num_levels, window, max(guesses), plan.length)
        else:
            row_layouts = [executor.trie_layout(num_levels, window, t, plan.length) for t in branch.tries]
            layout, row_layouts = row_layouts[0], row_layouts if len(row_layouts) > 1 else None
        roots = torch.tensor([[last] for last in lasts], dtype=torch.long, device=device)
        tokens = torch.cat([roots, levels.flatten(1), branch.tokens], dim=1)  # [B', S]
        read = active[0].proposer.levels_read(num_levels) if options.lean_logits else num_levels
        read_rows = executor.rows_read(layout, read)
        timer.lap("propose")

        if from_prefill:
            logits, first_logits = first_logits, None
        else:
            logits = executor.step(
                tokens, layout, slots, cache, read_rows, session.buffers, timer, row_layouts
            )  # [B', R, V]
        metrics.forward_passes += 1
        timer.lap("forward")

        verified = 1 + layout.size - layout.candidates.start  # rows come root, candidates, levels
        verifications = [
            verifier.verify(logits[i, : branch.verified[i]], branch.candidates[i], row.scoring())
            for i, row in enumerate(active)
        ]
        timer.lap("verify")

        keep = []
        for i, (row, verification) in enumerate(zip(active, verifications, strict=True)):
            new, rows_kept = row.settle(
                verification,
                plan.branch,
                logits[i, verified:].view(read, layout.window, -1) if read else None,
                contexts[i],
                offered[i],
                layout,
                stop,
                logits[i, : branch.verified[i]] if record else None,
                branch.candidates[i],
            )
            if row.pool.reads_logits:  # e.g. Token Recycling: what the model predicted after each token
                tokens, rows = branch.prefixes(i)
                read_rows = torch.tensor([0, *rows], device=logits.device)
                row.pool.observe_logits([lasts[i], *tokens], logits[i].index_select(0, read_rows))
            keep.append([0] if row.finished else rows_kept)  # a finished row leaves: keep anything
            if planner is not None:
                planner.resolve(row.committed, row=i)
        if streamer is not None:  # one row
            streamer.put(torch.tensor([new])) if hasattr(streamer, "put") else streamer(new)
        timer.lap("update")

        still = [i for i, row in enumerate(active) if not row.finished]
        if still:
            if not from_prefill:  # the prefill cached the prompts whole
                slots.commit(cache, layout.size, keep)
            if len(still) < len(active):  # finished rows leave the batch
                slots.keep_rows(cache, still)
                if planner is not None:
                    planner.keep_rows(still)
            slots.compact_if_worthwhile(cache)
        timer.lap("commit")
        step_time = timer.now() - step_started
        for step_metrics in recorded:
            step_metrics.step_times_s.append(step_time)
        active = [active[i] for i in still]


def _step_metrics(metrics, active: list[SequenceState]) -> list:
    """The metrics a per-forward-pass value goes to: the call's and each active row's (one row's
    metrics are the call's)."""
    return [metrics, *(row.metrics for row in active if row.metrics is not metrics)]


def _plan(session: DecodingSession, active, contexts, context: int) -> tuple[StepPlan, list, str | None]:
    """The step's plan, the candidates it verifies, per row, and the name of the draft source they
    come from when the planner chose among several (``"plain"``: none, and no branch; else None).
    Without a planner (fixed W, N, G): everything the pool offers, up to the most any row offers.
    With one (any of W, N, G auto): every draft source's candidates
    (``pools.combined.draft_sources``) offered to its planner, each planner's best plan (per-row
    records, one plan for the batch, paced by the rows with the most tokens left: the batch ends
    when they do), and the plan of the highest predicted rate run (``lade.source_choice``).
    ``context``: tokens in the cache once the step's root is fed."""
    planner, options = session.planner, session.options
    if planner is None:
        offered = [row.pool.candidates(c, options.guess) for row, c in zip(active, contexts, strict=True)]
        most = max(len(continuations) for continuations in offered)
        return StepPlan(True, most, options.candidate_length, 0.0, 0.0, options.window), offered, None
    left = [session.settings.max_new_tokens - len(row.generated) for row in active]
    behind = [tokens == max(left) for tokens in left]
    plans, offers = [], []
    for source in range(len(planner.planners)):
        if planner.alone not in (None, source):  # the call follows one source alone: no other is asked
            plans.append(NOT_RUN)
            offers.append([])
            continue
        offered, confidences = [], []
        for i, (row, context_tokens) in enumerate(zip(active, contexts, strict=True)):
            pool = draft_sources(row.pool)[source]
            context_tokens = context_tokens[-pool.key_length :]
            continuations = pool.candidates(context_tokens, options.guess)
            confidence = pool.confidence(context_tokens, continuations)
            harvested = pool.harvested(context_tokens, continuations)
            planner.offer(source, len(row.committed), continuations, harvested, confidence, row=i)
            offered.append(continuations)
            confidences.append(confidence)
        fed = None
        if options.token_tree:  # a batch row feeds as many as the largest trie
            sizes = [trie_sizes(c, options.guess, options.candidate_length) for c in offered]
            fed = [[max(column) for column in zip(*rows, strict=True)] for rows in zip(*sizes, strict=True)]
        plans.append(planner.choose(source, [len(c) for c in offered], confidences, context, behind, fed))
        offers.append(offered)
    chosen = planner.adopt(plans)
    ran, source = plans[chosen], None
    if len(plans) > 1:
        source = draft_names(active[0].pool)[chosen] if ran.guesses or ran.branch else "plain"
    return ran, offers[chosen], source


def _first_plan(session: DecodingSession, rows: int, context: int) -> tuple[StepPlan, list, str | None]:
    """``_plan``'s answer for the step whose forward was the prefill: a plain step of ``rows`` rows
    (``context`` tokens cached) verifying nothing, priced as the planner prices a plain step (so
    planned rates count it as before); its source ``"plain"`` where the planner chooses among several."""
    planner, options = session.planner, session.options
    nothing = [[] for _ in range(rows)]
    if planner is None:
        return StepPlan(False, 0, options.candidate_length, 0.0, 0.0, options.window), nothing, None
    return planner.plain_plan(rows, context), nothing, "plain" if len(planner.planners) > 1 else None


def _levels(session: DecodingSession, active: list[SequenceState], plan: StepPlan, device) -> torch.Tensor:
    """The rows' lookahead branches stacked: LongTensor [B', L, W] (L = 0 when the plan has none)."""
    options = session.options
    if not plan.branch:
        return torch.empty(len(active), 0, options.window, dtype=torch.long, device=device)
    branches = []
    for row in active:
        branch = row.proposer.lookahead_branch()
        if options.auto_window and row.proposer.resizable and branch.window != plan.window:
            row.proposer.resize(plan.window)  # an auto window changed size
            branch = row.proposer.lookahead_branch()
        branches.append(branch.levels.to(device))
    if len(branches) == 1:
        return branches[0][None]
    shapes = {tuple(levels.shape) for levels in branches}
    if len(shapes) > 1:
        raise RuntimeError(
            f"the rows' proposers returned lookahead branches of different shapes {sorted(shapes)}; "
            "a batch step needs one shape (proposers must advance in step)"
        )
    return torch.stack(branches)
