"""One ``generate`` call's state: its rows, their strategies, its verifier, planner and metrics.

Owns the copies a call decodes with, so the decoder is never changed by a call: each row gets its
own copy of the decoder's proposer and of its pool (or, with ``shared_pool``, the rows of a call
share one copy), and the call gets a fresh planner. So two identical calls of one decoder take the
same steps, and calls in two threads do not interfere. Learning across calls is explicit: a pool
built ``persistent`` is used itself (it keeps what it learnt, as in a multi-turn chat), and with
``learn_across_calls`` the decoder's one planner keeps its acceptance records from call to call.
The session never runs the model (``lade.executor``) and never reads the decoder.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from lade.autotune import Planner
from lade.calibration import BatchLatency, LatencyModel
from lade.executor import MaskBuffers
from lade.generation import CallSettings
from lade.interfaces import NGramPool, Proposer, Verifier
from lade.options import AUTO_WINDOWS, DecodingOptions
from lade.sequence import SequenceState, new_row
from lade.source_choice import SourceChooser
from lade.types import DecodingMetrics
from pools.combined import draft_sources
from strategies.greedy import GreedyVerifier
from strategies.sampling import SamplingVerifier


@dataclass
class DecodingSession:
    """A call being decoded.

    Attributes:
        settings: the call's resolved settings (``lade.generation``).
        options: the decoder's W, N, G.
        rows: one ``SequenceState`` per prompt, in batch order, each with its own proposer and pool.
        verifier: the call's verifier (its mode and generator).
        planner: the call's planner when any of W, N, G is auto, else None.
        metrics: the call's metrics (for one row, the row's own).
        buffers: the call's one-row mask buffers.
    """

    settings: CallSettings
    options: DecodingOptions
    rows: list[SequenceState]
    verifier: Verifier
    planner: SourceChooser | None
    metrics: DecodingMetrics
    buffers: MaskBuffers = field(default_factory=MaskBuffers)


def open_session(
    settings: CallSettings,
    options: DecodingOptions,
    proposer: Proposer,
    pool: NGramPool,
    verifier: Verifier,
    generator: torch.Generator | None,
    make_planner: Callable[[Proposer, int], SourceChooser] | None = None,
) -> DecodingSession:
    """A call's session: every row started (its proposer on its prompt, its pool seeded), and the
    planner ``make_planner(a started row proposer, rows)`` gives, started for the call's rows (None:
    no planner); ``proposer`` and ``pool`` are the decoder's, and are copied (see the module's
    docstring)."""
    ids, valid = settings.input_ids, settings.valid
    batch = ids.shape[0]
    metrics = DecodingMetrics()
    persistent = getattr(pool, "persistent", False)
    shared = pool if persistent else copy.deepcopy(pool)  # the one pool of shared and one-row calls
    rows = []
    for b in range(batch):
        row_proposer = copy.deepcopy(proposer)
        row_proposer.start(ids[b, valid[b]], generator)
        row_pool = shared if options.shared_pool or batch == 1 else copy.deepcopy(pool)
        row = new_row(settings, b, row_proposer, row_pool, options.ngram, metrics if batch == 1 else None)
        if row_pool is shared and options.shared_pool and b > 0:
            row_pool.join(row.committed)
        else:
            row_pool.start(row.committed)
        rows.append(row)
    planner = None
    if make_planner is not None:
        planner = make_planner(rows[0].proposer, batch)
        planner.start(batch, draft_sources(rows[0].pool) if batch == 1 else None)
    return DecodingSession(settings, options, rows, verifier, planner, metrics)


def new_planner(
    options: DecodingOptions,
    latency: LatencyModel,
    proposer: Proposer,
    batch_latency: BatchLatency | None,
    pool: NGramPool | None = None,
) -> SourceChooser:
    """The planners for the auto choices of ``options``, one per draft source of ``pool``
    (``pools.combined.draft_sources``; one for an ordinary pool or None), pricing steps with
    ``latency`` (one row) and ``batch_latency`` (batches, or None); ``proposer``: one like the rows'
    (whether it has a branch, whether its window can be resized). A source the branch does not feed
    gets a planner without the branch."""
    window = options.window if proposer.lookahead_branch().num_levels else 0
    sizes = AUTO_WINDOWS if options.auto_window and proposer.resizable else (window,)
    sources = [None] if pool is None else draft_sources(pool)
    planners = []
    for source in sources:
        fed = source is None or source.fed_by_branch or len(sources) == 1
        planner = Planner(
            latency,
            window=window if fed else 0,
            branch_levels=options.ngram - 1,
            max_guess=options.guess,
            max_length=options.candidate_length,
            auto_window=options.auto_window,
            auto_guess=options.auto_guess,
            auto_length=options.auto_ngram,
            windows=sizes,  # the planner keeps those up to `window`
            priors=options.priors,
        )
        planners.append(planner)
    chooser = SourceChooser(planners, follow_policies=options.follow_policies, token_tree=options.token_tree)
    chooser.batch_latency = batch_latency
    return chooser


def verifier_for(verifier: Verifier, do_sample: bool, generator: torch.Generator | None) -> Verifier:
    """``verifier`` when it implements the call's mode (``do_sample``), else the library's verifier of
    that mode; a call's generator replaces the verifier's (on a copy: the decoder's is left as it is)."""
    if verifier.samples != do_sample:
        verifier = SamplingVerifier() if do_sample else GreedyVerifier()
    if generator is not None and hasattr(verifier, "generator"):
        verifier = copy.copy(verifier)  # this call's randomness, the decoder's settings
        verifier.generator = generator
    return verifier
