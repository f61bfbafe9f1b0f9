"""SoloReplay: a text-only draft source replayed alone on the committed text takes exactly the steps it
takes when it decodes alone; the source chooser follows it when it reaches the text for fewer seconds."""

import pytest
import torch

from lade import LookaheadDecoder
from lade.autotune import Planner, StepPlan
from lade.calibration import LatencyModel
from lade.priors import PlannerPriors
from lade.session import new_planner
from lade.solo_replay import CostTrace, SoloReplay
from lade.source_choice import SourceChooser
from pools import SuffixTreePool
from pools.combined import draft_names, draft_sources
from strategies.plain import AutoregressiveProposer
from tests.conftest import hf_greedy, prompt
from tests.test_combined import every_source

STEEP = LatencyModel((1, 2, 4, 8, 16), (1.0, 1.1, 1.6, 1.9, 2.2))
FLAT = LatencyModel((1, 1024), (1.0, 1.05))
SURE = PlannerPriors(branch=0.0, trial=8, candidate=0.99)  # candidates verified from the first step


def test_a_cost_trace_spreads_a_step_evenly_over_its_tokens():
    trace = CostTrace(10)
    trace.step(13, 3.0)
    trace.step(14, 1.0)
    assert trace.end == 14
    assert [trace.cost_at(p) for p in (10, 11, 13, 14)] == pytest.approx([0.0, 1.0, 3.0, 4.0])


@pytest.mark.parametrize("seed", [1, 3])
def test_the_replay_takes_the_steps_the_source_takes_decoding_alone(tiny_models, seed):
    """A decoder with the suffix tree as its only source (no branch) and the replay of that source on
    the decoder's output: the same tokens per step at the same priced seconds, step for step."""
    model = tiny_models("gpt2", "sdpa")
    ids = prompt("repetitive", seed, length=24)
    decoder = LookaheadDecoder(
        model, proposer=AutoregressiveProposer(1, 6), pool=SuffixTreePool(6, span=10), latency=STEEP
    )
    result = decoder.generate(ids, max_new_tokens=64, eos_token_id=[])
    sequence = result.sequences[0].tolist()
    metrics = result.metrics
    assert metrics.steps < 64  # some steps accepted drafts: the replay has something to reproduce

    replica = SuffixTreePool(6, span=10)
    replica.start(sequence[:24])
    replica.observe(sequence[:25], 1)  # the prefill's token
    planner = new_planner(decoder.options, STEEP, decoder.proposer, None, replica).planners[0]
    planner.start(1)
    replay = SoloReplay(replica, planner, 25, decoder.options.token_tree)
    for end in range(25, len(sequence) + 1, 3):  # the text arrives in pieces, as a call commits it
        replay.advance(sequence[:end])
    replay.advance(sequence)
    tokens = [b - a for a, b in zip(replay.trace.positions, replay.trace.positions[1:], strict=False)]
    seconds = [b - a for a, b in zip(replay.trace.seconds, replay.trace.seconds[1:], strict=False)]
    assert tokens == metrics.tokens_per_step[1:]  # the call's steps after the prefill's
    assert seconds == pytest.approx(metrics.planned_s[1:])


def test_a_replay_waits_for_the_text_its_candidates_reach_into():
    replica = SuffixTreePool(4, span=3)
    text = [1, 2, 3, 4, 1, 2, 3, 4, 1]
    replica.start(text)
    planner = Planner(FLAT, window=0, branch_levels=3, max_guess=1, max_length=3, priors=SURE)
    replay = SoloReplay(replica, planner, len(text))
    replay.advance(text + [2])  # it verifies (2, 3, 4): it may still hold in full
    assert replay.position == len(text)
    replay.advance(text + [2, 3, 9])  # it held for 2 tokens, and 9 is the bonus token
    assert replay.position == len(text) + 3
    assert replay.trace.cost_at(len(text) + 3) == pytest.approx(FLAT(4, len(text)))


def test_the_chooser_follows_the_source_alone_once_its_replay_reaches_the_text_cheaper():
    """Every plan the chooser is given costs 2 s a token; the replayed suffix tree, with no match in
    the text, runs plain steps at the curve's 1 s: after ``replay_tokens`` tokens the chooser runs the
    suffix tree's plans for the rest of the call, and starts over with the next call."""
    pool = every_source()
    pool.start([1, 2, 3, 4])
    sources = draft_sources(pool)
    suffix = draft_names(pool).index("suffix_tree")
    chooser = SourceChooser([Planner(STEEP, 0, 5, 7, 10) for _ in sources], replay_tokens=4)
    chooser.start(1, sources)
    text = [1, 2, 3, 4, 5]
    chooser.resolve(text)  # the prefill's token: the replay starts here
    dear = [StepPlan(False, 0, 1, 1.0, 2.0 + 0.1 * s) for s in range(len(sources))]
    for token in range(6, 10):
        assert chooser.alone is None
        assert chooser.adopt(dear) == 0  # the highest predicted rate
        text.append(token)
        chooser.resolve(text)
    assert chooser.alone == suffix  # 4 tokens for 4 s replayed, 8 s run
    assert chooser.adopt(dear) == suffix
    chooser.start(1, sources)
    assert chooser.alone is None


def test_the_chooser_stops_replaying_once_its_own_steps_are_clearly_cheaper():
    pool = every_source()
    pool.start([1, 2, 3, 4])
    sources = draft_sources(pool)
    chooser = SourceChooser([Planner(STEEP, 0, 5, 7, 10) for _ in sources], replay_tokens=4)
    chooser.start(1, sources)
    text = [1, 2, 3, 4, 5]
    chooser.resolve(text)
    cheap = [StepPlan(False, 0, 1, 1.0, 0.5) for _ in sources]  # half the replay's plain step
    for token in range(6, 10):
        assert chooser._replay is not None
        chooser.adopt(cheap)
        text.append(token)
        chooser.resolve(text)
    assert chooser._replay is None and chooser.alone is None
    assert chooser.adopt(cheap) == 0


def test_no_replay_in_batches_without_a_tally_or_without_a_text_only_source():
    pool = every_source()
    pool.start([1, 2, 3])
    sources = draft_sources(pool)
    chooser = SourceChooser([Planner(STEEP, 0, 5, 7, 10) for _ in sources])
    chooser.start(2, sources)
    assert chooser._replica is None
    chooser = SourceChooser([Planner(STEEP, 0, 5, 7, 10) for _ in sources], follow_policies=False)
    chooser.start(1, sources)
    assert chooser._replica is None
    assert [s.text_replica() is not None for s in sources] == [n == "suffix_tree" for n in draft_names(pool)]


def test_decoding_with_the_replay_stays_exact(tiny_models):
    model = tiny_models("gpt2", "sdpa")
    decoder = LookaheadDecoder(model, latency=STEEP)
    for seed in range(3):
        ids = prompt("repetitive", seed, length=24)
        result = decoder.generate(ids, max_new_tokens=64, eos_token_id=[])
        assert torch.equal(result.sequences, hf_greedy(model, ids, 64))
