"""Batched lookahead decoding: B prompts, one forward pass per step, every row lossless.

Each row keeps its own proposer (its own lookahead window), its own pool (or one shared pool), its
own candidates and its own accepted length; the batch shares one step layout per forward pass
(``lade.layout``): the lookahead branch and the candidate count and length are the same for every
row, and a row with fewer candidates than the step verifies is filled up with filler candidates whose
logits are never read (so they cannot change what the row commits).

Ragged acceptance: "holes" in one batch cache. The cache is one tensor [B, H, slots, D], so every
row has the same number of slots. After a step, row b keeps the keys/values of its k_b accepted
tokens (the last token and the accepted candidate tokens), gathered into the first k_b of
M = max_b k_b new slots; its other M - k_b slots are holes, marked invalid in that row's part of the
4D mask (``batch_visibility``), and each valid slot records its token's position (for
sliding-window layers). So nothing is recomputed and nothing is shifted; the price is that the
attention reads the holes too (masked), at most N-1 slots per step per row. The alternatives cost
more: re-feeding the rejected part of the longer rows recomputes tokens; padding every row's
acceptance to the shortest throws accepted tokens away; moving each row's cache to its own length
means a copy of the whole cache per step. Left padding of the prompts is handled the same way: pad
slots are invalid keys, and positions count real tokens only (as HF's ``generate`` does).

Rows that finish (EOS or ``max_new_tokens``) leave the batch: their cache rows are dropped, so later
steps feed only the rows still decoding.
"""

from __future__ import annotations

import copy
import time

import torch

from lade.autotune import StepPlan
from lade.cache import commit_rows, new_cache
from lade.flex import block_masks
from lade.generation import CallSettings
from lade.interfaces import Verifier
from lade.layout import additive_mask, batch_visibility
from lade.sequence import SequenceState, new_row
from lade.types import Candidates, DecodingMetrics, pad_candidate


def decode_batch(
    decoder,
    settings: CallSettings,
    generator: torch.Generator | None,
    verifier: Verifier,
    metrics: DecodingMetrics,
    shared_pool: bool,
) -> list[SequenceState]:
    """Decode every row of a left-padded batch; return the rows (in batch order) with their output.

    Args:
        decoder: the ``LookaheadDecoder`` whose settings and strategies (copied per row) are used.
        settings: the call's (``lade.generation``): ``input_ids`` [B, T] left-padded on the model's input
            device, ``valid`` [B, T] (False at padding; every row ends with a real token), the stopping
            rule (``max_new_tokens`` >= 1), the processors and what to record.
        generator, verifier, metrics: as in ``LookaheadDecoder._decode``; ``metrics`` receives
            the stage times, ``forward_passes`` and the per-forward step times.
        shared_pool: all rows read and fill ``decoder.pool``; otherwise each row gets a copy.
    """
    ids, valid = settings.input_ids, settings.valid
    stop, max_new_tokens = settings.stop, settings.max_new_tokens
    record = settings.record_scores or settings.record_logits
    batch, width = ids.shape
    device = ids.device
    prefill_start = time.perf_counter()
    cache = new_cache()
    positions = (valid.long().cumsum(1) - 1).clamp(min=0)
    key_valid, key_positions = valid[:, :-1], positions[:, :-1]  # [B, P]: the prefill's slots
    if width > 1:  # the last prompt token of every row is fed by the first step
        _prefill(decoder, ids[:, :-1], key_valid, key_positions, cache)
    metrics.prefill_s = time.perf_counter() - prefill_start

    rows = []
    for b in range(batch):
        proposer = copy.deepcopy(decoder.proposer)
        proposer.start(ids[b, valid[b]], generator)
        pool = decoder.pool if shared_pool else copy.deepcopy(decoder.pool)
        row = new_row(settings, b, proposer, pool, decoder.ngram)
        if shared_pool and b > 0:
            pool.join(row.committed)
        else:
            pool.start(row.committed)
        rows.append(row)
    key_length = getattr(decoder.pool, "key_length", 1)
    planner = None
    if decoder.is_auto:
        planner = decoder._planner(rows[0].proposer, batch)
        planner.batch_latency = decoder.batch_latency(batch)

    active = list(rows)
    prefix_len = key_valid.shape[1]  # slots per row in the cache
    step_clock = time.perf_counter()
    while active:
        step_started = step_clock
        contexts = [row.committed[-key_length:] for row in active]
        offered = [
            row.pool.candidates(context, decoder.guess) for row, context in zip(active, contexts, strict=True)
        ]
        plan = _plan(decoder, planner, active, contexts, offered, prefix_len, max_new_tokens)
        guesses = [min(plan.guesses, len(continuations)) for continuations in offered]
        count, length = max(guesses), plan.length
        candidates = torch.tensor(
            [
                [pad_candidate(c, length) for c in continuations[:g]]
                + [[row.committed[-1]] * length] * (count - g)
                for row, continuations, g in zip(active, offered, guesses, strict=True)
            ],
            dtype=torch.long,
            device=device,
        ).view(len(active), count, length)  # [B', G', l]; filler candidates repeat the last token
        _lap(metrics, "pool", step_clock)
        step_clock = time.perf_counter()

        levels = _levels(decoder, active, plan, device)  # [B', L, W]
        layout = decoder._layout(levels.shape[1], levels.shape[2], count, length)
        roots = torch.tensor([[row.committed[-1]] for row in active], dtype=torch.long, device=device)
        tokens = torch.cat([roots, levels.flatten(1), candidates.flatten(1)], dim=1)  # [B', S]
        start = torch.tensor([row.position for row in active], device=device)
        step_positions = start[:, None] + layout.depths[None]  # [B', S]
        if decoder.context_length is not None:  # only guesses past the end of the budget reach it
            step_positions = step_positions.clamp(max=decoder.context_length - 1)
        num_levels = layout.num_levels
        read = active[0].proposer.levels_read(num_levels) if decoder.lean_logits else num_levels
        read_rows = decoder._rows_read(layout, read)
        _lap(metrics, "propose", step_clock)
        step_clock = time.perf_counter()

        masks = batch_masks(decoder, layout.tree_mask, key_valid, key_positions, step_positions)
        _lap(metrics, "mask", step_clock)
        step_clock = time.perf_counter()
        logits = batch_forward(decoder, tokens, step_positions, masks, cache, read_rows)  # [B', R, V]
        metrics.forward_passes += 1
        _lap(metrics, "forward", step_clock)
        step_clock = time.perf_counter()

        verified = 1 + count * length  # rows come root, candidates, levels
        verifications = [
            verifier.verify(logits[i, : 1 + g * length], Candidates(candidates[i, :g]), row.scoring())
            for i, (row, g) in enumerate(zip(active, guesses, strict=True))
        ]
        _lap(metrics, "verify", step_clock)
        step_clock = time.perf_counter()

        keep = []
        for i, (row, verification) in enumerate(zip(active, verifications, strict=True)):
            level_logits = logits[i, verified:].view(read, layout.window, -1) if read else None
            _, rows_kept = row.settle(
                verification,
                plan.branch,
                level_logits,
                contexts[i],
                offered[i],
                layout,
                stop,
                logits[i, : 1 + guesses[i] * length] if record else None,
            )
            keep.append(rows_kept)
            if planner is not None:
                planner.resolve(row.committed, row=i)
        _lap(metrics, "update", step_clock)
        step_clock = time.perf_counter()

        still = [i for i, row in enumerate(active) if not row.finished]
        if still:
            keep = [[0] if row.finished else k for row, k in zip(active, keep, strict=True)]  # leaving
            kept = max(len(k) for k in keep)
            counts = torch.tensor([len(k) for k in keep], device=device)
            slots = torch.arange(kept, device=device)
            # [B', M]; a row's spare slots stay where they are (holes: masked, never copied)
            index = torch.tensor([k + list(range(len(k), kept)) for k in keep], device=device)
            commit_rows(cache, prefix_len, layout.size, index)
            key_valid = torch.cat([key_valid, slots[None] < counts[:, None]], dim=1)
            key_positions = torch.cat([key_positions, start[:, None] + slots[None]], dim=1)
            prefix_len += kept
            if len(still) < len(active):  # finished rows leave the batch
                selected = torch.tensor(still, device=device)
                for layer in cache.layers:
                    layer.batch_select_indices(selected)
                key_valid, key_positions = key_valid[selected], key_positions[selected]
                if planner is not None:
                    planner.keep_rows(still)
        _lap(metrics, "commit", step_clock)
        step_clock = time.perf_counter()
        for row in active:
            row.metrics.step_times_s.append(step_clock - step_started)
        metrics.step_times_s.append(step_clock - step_started)
        active = [active[i] for i in still]
    return rows


def _lap(metrics: DecodingMetrics, stage: str, since: float) -> None:
    metrics.time_s[stage] += time.perf_counter() - since


def _plan(decoder, planner, active, contexts, offered, prefix_len: int, max_new_tokens: int) -> StepPlan:
    """The batch's plan: the planner's (per-row records, one plan, paced by the rows with the most
    tokens left: the batch ends when they do) when any of W, N, G is auto, else everything offered,
    up to the most any row offers."""
    if planner is None:
        most = max(len(continuations) for continuations in offered)
        return StepPlan(True, most, decoder.candidate_length, 0.0, 0.0, decoder.window)
    confidences = []
    for i, (row, context, continuations) in enumerate(zip(active, contexts, offered, strict=True)):
        confidence = row.pool.confidence(context, continuations)
        harvested = row.pool.harvested(context, continuations)
        planner.offer(len(row.committed), continuations, harvested, confidence, row=i)
        confidences.append(confidence)
    left = [max_new_tokens - len(row.generated) for row in active]
    behind = [tokens == max(left) for tokens in left]
    return planner.plan([len(c) for c in offered], confidences, prefix_len, behind)


def _levels(decoder, active: list[SequenceState], plan: StepPlan, device) -> torch.Tensor:
    """The rows' lookahead branches stacked: LongTensor [B', L, W] (L = 0 when the plan has none)."""
    if not plan.branch:
        return torch.empty(len(active), 0, decoder.window, dtype=torch.long, device=device)
    branches = []
    for row in active:
        branch = row.proposer.lookahead_branch()
        if decoder.auto_window and row.proposer.resizable and branch.window != plan.window:
            row.proposer.resize(plan.window)  # an auto window changed size
            branch = row.proposer.lookahead_branch()
        branches.append(branch.levels.to(device))
    shapes = {tuple(levels.shape) for levels in branches}
    if len(shapes) > 1:
        raise RuntimeError(
            f"the rows' proposers returned lookahead branches of different shapes {sorted(shapes)}; "
            "a batch step needs one shape (proposers must advance in step)"
        )
    return torch.stack(branches)


def batch_masks(decoder, tree_mask, key_valid, key_positions, positions, extra_visible=None):
    """The step's additive masks [B', 1, S, P + S], one per attention kind (a dict for hybrid models)."""
    masks = {}
    for kind, window in decoder.mask_plan.windows.items():
        visible = batch_visibility(tree_mask, key_valid, key_positions, positions, window)
        if extra_visible is not None:
            visible = extra_visible(visible)
        masks[kind] = additive_mask(visible, decoder.model.dtype)[0, 0][:, None]
    return masks if decoder.mask_plan.by_layer_type else next(iter(masks.values()))


def batch_forward(decoder, tokens, positions, attention_mask, cache, rows):
    """Run the model over the batch's step tokens [B', S]; the logits [B', len(rows), V] of ``rows``
    (None for no logits: the prefill)."""
    extra = {}
    if decoder._keeps_logits:  # the LM head runs only on the rows that are read
        extra["logits_to_keep"] = 1 if rows is None else rows
    if decoder.flex:
        attention_mask = block_masks(attention_mask)
    out = decoder.model(
        input_ids=tokens,
        position_ids=positions,
        attention_mask=attention_mask,
        cache=cache,
        use_cache=True,
        **extra,
    )
    if rows is None:
        return None
    return out.logits if decoder._keeps_logits else out.logits[:, rows]


def _prefill(decoder, tokens, key_valid, key_positions, cache) -> None:
    """Fill the cache with every row's prompt but its last token: tokens [B, T-1], left-padded.

    A padding query sees only itself (so no query row of the mask is empty); real tokens see the
    real tokens before them.
    """
    size = tokens.shape[1]
    chain = torch.ones(size, size, dtype=torch.bool, device=tokens.device).tril_()
    empty = key_valid[:, :0]
    diagonal = torch.eye(size, dtype=torch.bool, device=tokens.device)

    def real_keys_only(visible):
        return (visible & key_valid[:, None, :]) | diagonal

    masks = batch_masks(decoder, chain, empty, key_positions[:, :0], key_positions, real_keys_only)
    batch_forward(decoder, tokens, key_positions, masks, cache, None)
