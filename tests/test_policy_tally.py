"""PolicyTally: what fixed ways of choosing among sources realize, and which one the chooser follows."""

import pytest
import torch

from lade import LookaheadDecoder
from lade.autotune import StepPlan
from lade.calibration import LatencyModel
from lade.policy_tally import PolicyTally, default_policies
from lade.source_choice import SourceChooser
from tests.conftest import hf_greedy, prompt
from tests.test_batch import hf_batched, left_padded


def plan(guesses: int, length: int, tokens: float, seconds: float) -> StepPlan:
    return StepPlan(False, guesses, length, tokens, seconds)


def step(tally: PolicyTally, position: int, offers: list, plans: list) -> int:
    for source, candidates in enumerate(offers):
        tally.offer(source, position, candidates)
    return tally.pick(plans)


def test_default_policies_are_all_each_alone_and_all_but_one():
    assert default_policies(2) == [(0, 1), (0,), (1,)]
    assert default_policies(3) == [(0, 1, 2), (0,), (1,), (2,), (1, 2), (0, 2), (0, 1)]


def test_each_policy_picks_the_highest_predicted_rate_among_its_sources():
    tally = PolicyTally(3)
    plans = [plan(1, 2, 2.0, 1.0), plan(1, 2, 3.0, 1.0), plan(1, 2, 2.5, 1.0)]
    assert tally.picks(plans) == [1, 0, 1, 2, 1, 2, 1]
    tied = [plan(1, 2, 2.0, 1.0)] * 3
    assert tally.picks(tied)[0] == 0  # ties: the first source


def test_realized_tokens_are_what_greedy_verification_would_accept():
    tally = PolicyTally(2, min_steps=1)
    text = [5, 6, 7, 8, 9]
    # source 0 verifies two candidates cut to 2 tokens: the second matches 2; source 1 verifies its
    # first candidate at full length 3: it matches 1
    offers = [[(1, 1, 1), (5, 6, 0)], [(5, 0, 0), (5, 6, 7)]]
    step(tally, 0, offers, [plan(2, 2, 9.0, 2.0), plan(1, 3, 1.5, 1.0)])
    tally.resolve(text[:2])
    assert len(tally) == 0  # the candidates reach past the text: not scored yet
    tally.resolve(text)
    assert len(tally) == 1
    assert tally.rate(1) == pytest.approx(3 / 2.0)  # source 0 alone: 1 + 2 tokens in 2 s
    assert tally.rate(2) == pytest.approx(2 / 1.0)  # source 1 alone: 1 + 1 in 1 s
    assert tally.rate(0) == tally.rate(1)  # both: source 0 predicted the higher rate


def test_a_plain_plan_realizes_the_one_token_it_commits():
    tally = PolicyTally(2, min_steps=1)
    step(tally, 0, [[(4, 4)], []], [plan(0, 2, 1.0, 0.5), plan(0, 2, 1.0, 0.5)])
    tally.resolve([4, 4, 4])
    assert tally.rate(0) == pytest.approx(2.0)


def run_steps(tally: PolicyTally, count: int) -> list[int]:
    """Source 0 always predicts more than source 1 but its candidates never hold; source 1's always
    do: the sources each step runs."""
    text = list(range(1000))
    ran = []
    for n in range(count):
        position = 3 * n
        right = tuple(text[position : position + 2])
        offers = [[(999, 999)], [right]]
        ran.append(step(tally, position, offers, [plan(1, 2, 3.0, 1.0), plan(1, 2, 2.5, 1.0)]))
        tally.resolve(text[: position + 3])
    return ran


def test_the_chooser_follows_a_policy_that_realizes_more_once_it_has_the_steps():
    tally = PolicyTally(2, min_steps=4, margin=1.05)
    ran = run_steps(tally, 8)
    assert ran[:4] == [0, 0, 0, 0]  # before min_steps: the default policy's picks
    assert ran[5:] == [1, 1, 1]
    assert tally.leader() == 2  # source 1 alone: 3 tokens a second against 1


def test_the_default_stays_when_no_policy_beats_it_by_the_margin():
    tally = PolicyTally(2, min_steps=2, margin=1.05)
    text = list(range(100))
    for n in range(6):
        offers = [[tuple(text[2 * n : 2 * n + 2])], [tuple(text[2 * n : 2 * n + 2])]]
        assert step(tally, 2 * n, offers, [plan(1, 2, 3.0, 1.0), plan(1, 2, 2.9, 1.0)]) == 0
        tally.resolve(text[: 2 * n + 3])
    assert tally.leader() == 0  # source 0 alone realizes exactly what the default does


def test_rows_are_scored_separately_and_leave_the_batch():
    tally = PolicyTally(2, min_steps=1)
    tally.start(rows=2)
    for row, candidates in enumerate(([(1, 2)], [(7, 7)])):
        for source in range(2):
            tally.offer(source, 0, candidates, row=row)
    tally.pick([plan(1, 2, 2.0, 1.0), plan(1, 2, 2.0, 1.0)])
    tally.keep_rows([1])  # row 0 finished before its text covered the candidates
    tally.resolve([7, 7, 7], row=0)
    assert len(tally) == 1
    assert tally.rate(0) == pytest.approx(3.0)


def test_a_tally_needs_sources_and_history():
    with pytest.raises(ValueError):
        PolicyTally(0)
    with pytest.raises(ValueError):
        PolicyTally(2, history=0)


def test_the_source_chooser_has_a_tally_only_with_several_sources():
    class Stub:
        stats = batch_latency = None

    assert SourceChooser([Stub()]).tally is None
    assert SourceChooser([Stub(), Stub()]).tally is not None
    assert SourceChooser([Stub(), Stub()], follow_policies=False).tally is None


@pytest.mark.parametrize("follow", [True, False])
def test_decoding_follows_policies_or_not_and_stays_exact(tiny_models, follow):
    """The tally changes which source a step verifies, never the output: single and batched calls
    match HF greedy both ways, on a curve where extra tokens are dear (so the choice matters)."""
    steep = LatencyModel((1, 2, 4, 8, 16), (1.0, 1.1, 1.6, 1.9, 2.2))
    model = tiny_models("gpt2", "sdpa")
    decoder = LookaheadDecoder(model, latency=steep, follow_policies=follow)
    assert decoder.options.follow_policies is follow
    ids = prompt("repetitive", 5, length=24)
    result = decoder.generate(ids, max_new_tokens=64, eos_token_id=[])
    assert torch.equal(result.sequences, hf_greedy(model, ids, 64))
    batch, mask = left_padded([9, 14, 6], seed=2)
    out = decoder.generate(batch, attention_mask=mask, max_new_tokens=40, eos_token_id=[])
    assert torch.equal(out.sequences, hf_batched(model, batch, mask, 40))
