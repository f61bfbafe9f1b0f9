"""Several draft sources behind one pool (``pools.combined``) and the planner choosing among them step by
step (``lade.source_choice``): the pool's plumbing, the choice against hand-made records, and decoding
with every source against HF greedy (architectures, auto and fixed, batches)."""

from collections import Counter

import pytest
import torch

from lade import LookaheadDecoder
from lade.autotune import Planner
from lade.calibration import LatencyModel
from lade.config import validate
from lade.options import AUTO_SPAN, DRAFT_SOURCES, combined_pool, default_pool
from lade.source_choice import SourceChooser
from pools import BucketedNGramPool, CombinedPool, PromptLookupPool, SuffixTreePool, TokenRecyclingPool
from pools.combined import draft_names, draft_sources
from tests.conftest import ARCHITECTURES, hf_greedy, prompt
from tests.test_batch import hf_batched, left_padded
from tests.test_config import compose_config

FLAT = LatencyModel((1, 1024), (1.0, 1.05))  # extra tokens nearly free: candidates pay when they hold
STEEP = LatencyModel((1, 2, 4, 8, 16), (1.0, 1.1, 1.6, 1.9, 2.2))


def every_source(ngram: int = 6, guess: int = 7) -> CombinedPool:
    return CombinedPool(
        {
            "lookahead": default_pool(ngram, guess, auto=True),
            "suffix_tree": SuffixTreePool(ngram, span=10),
            "token_recycling": TokenRecyclingPool(ngram),
        }
    )


def test_each_source_sees_what_the_loop_tells_a_pool():
    sources = {"lookup": PromptLookupPool(4, max_match=2), "recycled": TokenRecyclingPool(4, (2, 1))}
    pool = CombinedPool(sources)
    assert pool.reads_logits and pool.persistent and pool.span == 3 and pool.key_length == 2
    pool.start([1, 2, 3, 4, 5, 1, 2])
    pool.observe_logits([2], torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0, 2.0]]))
    pool.observe_logits([7], torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 0.0]]))
    offers = pool.offers([1, 2], 4)
    assert offers == [[(3, 4, 5)], [(7, 8), (9,)]]  # prompt lookup after "1 2"; the table's tree after 2
    # without a planner: the sources' candidates in turn, best first, no repeats, at most ``limit``
    assert pool.candidates([1, 2], 4) == [(3, 4, 5), (7, 8), (9,)]
    assert pool.candidates([1, 2], 2) == [(3, 4, 5), (7, 8)]
    pool.observe([1, 2, 3, 4, 5, 1, 2, 3], 1)  # the lookup source follows the committed text
    assert pool.offers([2, 3], 4)[0] == [(4, 5, 1)]


def test_the_planner_is_offered_the_sources_together_as_one_more_source():
    sources = {"lookup": PromptLookupPool(4, max_match=2), "recycled": TokenRecyclingPool(4, (2, 1))}
    pool = CombinedPool(sources)
    assert draft_names(pool) == ["lookup", "recycled", "merged"] and pool.names == ("lookup", "recycled")
    merged = draft_sources(pool)[-1]
    assert not merged.fed_by_branch and merged.key_length == pool.key_length == 2
    pool.start([1, 2, 3, 4, 5, 1, 2])
    pool.observe_logits([2], torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0, 2.0]]))
    assert merged.candidates([1, 2], 4) == pool.candidates([1, 2], 4) == [(3, 4, 5), (7,), (9,)]
    merged.add([[1, 2, 3, 4]])  # a view: the n-grams go to the sources through the combined pool
    assert merged.candidates([1, 2], 4) == [(3, 4, 5), (7,), (9,)]
    # not merged, or one source alone: just the sources
    assert draft_names(CombinedPool(dict(sources), merged=False)) == ["lookup", "recycled"]
    assert draft_names(CombinedPool({"lookup": PromptLookupPool(4)})) == ["lookup"]
    assert draft_names(PromptLookupPool(4)) == ["PromptLookupPool"]


def test_sources_must_agree_on_ngram_and_be_pools():
    with pytest.raises(ValueError, match="different ngram"):
        CombinedPool({"a": TokenRecyclingPool(4), "b": SuffixTreePool(5)})
    with pytest.raises(ValueError, match="not an NGramPool"):
        CombinedPool({"a": TokenRecyclingPool(4), "b": [1, 2]})
    with pytest.raises(ValueError, match="at least one"):
        CombinedPool({})


def trained_planner(accepted_tokens: int, window: int = 0, latency=FLAT) -> Planner:
    """A planner whose one-candidate offers were always accepted for ``accepted_tokens`` tokens."""
    planner = Planner(latency, window=window, branch_levels=4, max_guess=1, max_length=4, min_records=4)
    planner.start(1)
    sequence = []
    for _ in range(12):
        planner.offer(len(sequence), [(1, 2, 3, 4)], [False])
        sequence += [1, 2, 3, 4][:accepted_tokens] + [9] * (4 - accepted_tokens)
        planner.resolve(sequence)
    return planner


def test_the_source_with_the_highest_predicted_rate_is_verified():
    chooser = SourceChooser([trained_planner(1), trained_planner(3), trained_planner(2)])
    plans = [chooser.choose(s, available=1) for s in range(3)]
    assert [plan.predicted_tokens for plan in plans] == pytest.approx([2.0, 4.0, 3.0])
    assert chooser.adopt(plans) == 1 and chooser.chosen == [1]
    # a tie goes to the first source
    tied = SourceChooser([trained_planner(2), trained_planner(2)])
    assert tied.adopt([tied.choose(s, available=1) for s in range(2)]) == 0


class CountingCurve:
    """A latency curve that counts the sizes it is asked to price."""

    def __init__(self, curve):
        self.curve, self.priced = curve, 0

    def __call__(self, size: int, context: int | None = None) -> float:
        self.priced += 1
        return self.curve(size, context)

    def floor(self, size: int, context: int | None = None) -> float:
        return self.curve.floor(size, context)


def test_the_planners_of_a_step_share_its_prices_and_plan_as_alone():
    curve = CountingCurve(STEEP)
    planners = [trained_planner(accepted, window, curve) for accepted, window in ((1, 3), (3, 0), (2, 0))]
    alone = [planner.choose(1, context=40) for planner in planners]  # each pricing on its own
    priced_alone, curve.priced = curve.priced, 0
    chooser = SourceChooser(planners)
    assert [chooser.choose(s, available=1, context=40) for s in range(3)] == alone
    assert 0 < curve.priced < priced_alone  # the sizes the first planner priced were not priced again
    curve.priced = 0
    chooser.choose(0, available=1, context=41)  # another context: priced afresh, even before adopt
    assert curve.priced > 0
    chooser.adopt(alone)
    curve.priced = 0
    chooser.choose(0, available=1, context=41)  # the next step prices afresh
    assert curve.priced > 0


def test_only_the_chosen_planner_counts_its_branch_as_run():
    with_branch = trained_planner(1, window=3)
    chooser = SourceChooser([with_branch, trained_planner(3)])
    plans = [chooser.choose(s, available=1) for s in range(2)]
    assert chooser.adopt(plans) == 1
    assert with_branch._branch_steps == 0 and with_branch._idle_steps == 1  # its branch did not run


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_source_under_auto_decodes_exactly(tiny_models, arch):
    model = tiny_models(arch, "sdpa")
    ids = prompt("repetitive", 5, length=24)
    decoder = LookaheadDecoder(model, pool=every_source(), latency=FLAT)
    result = decoder.generate(ids, max_new_tokens=48, eos_token_id=[])
    assert torch.equal(result.sequences, hf_greedy(model, ids, 48))
    used = result.metrics.source_steps
    assert sum(used.values()) == result.metrics.forward_passes
    assert Counter(result.metrics.step_sources) == used  # and step by step, in order
    assert len(result.metrics.step_sources) == len(result.metrics.planned_tokens)
    assert set(used) - {"plain"}  # some steps verified a source's drafts
    if arch in ("gpt2", "gemma3"):  # their tiny random models repeat enough for drafts to hold
        assert result.metrics.steps < 46


def test_every_source_with_fixed_settings_and_in_batches(tiny_models):
    model = tiny_models("llama", "sdpa")
    ids = prompt("random", 3, length=16)
    fixed = LookaheadDecoder(model, 3, 6, 6, pool=every_source(6, 6))
    result = fixed.generate(ids, max_new_tokens=40, eos_token_id=[])
    assert torch.equal(result.sequences, hf_greedy(model, ids, 40))
    assert not result.metrics.source_steps  # no planner: the sources' candidates in turn
    batch, mask = left_padded([9, 14, 6], seed=2)
    for decoder in (fixed, LookaheadDecoder(model, pool=every_source(), latency=FLAT)):
        out = decoder.generate(batch, attention_mask=mask, max_new_tokens=32, eos_token_id=[])
        assert torch.equal(out.sequences, hf_batched(model, batch, mask, 32))


def test_the_combination_from_the_sweep_config():
    cfg = compose_config("experiment=combined", "logger=none", "model=tiny")
    pool = validate(cfg).pool
    assert isinstance(pool, CombinedPool)
    assert pool.names == ("lookahead", "suffix_tree", "token_recycling")
    assert cfg.lookahead.window == "auto" and pool.span == 10


def test_a_fully_auto_decoder_defaults_to_every_source_started_afresh_each_call(tiny_models):
    """``LookaheadDecoder(model)`` verifies whichever draft source pays (``combined_pool``), with
    nothing kept from call to call: two identical calls take the same steps, and match HF greedy."""
    model = tiny_models("llama", "sdpa")
    decoder = LookaheadDecoder(model, latency=FLAT)
    assert isinstance(decoder.pool, CombinedPool) and decoder.pool.names == DRAFT_SOURCES
    assert decoder.pool.merged and not decoder.pool.persistent
    ids = prompt("repetitive", 4, length=24)
    first, second = (decoder.generate(ids, max_new_tokens=40, eos_token_id=[]) for _ in range(2))
    assert torch.equal(first.sequences, hf_greedy(model, ids, 40))
    assert torch.equal(second.sequences, first.sequences)
    assert second.metrics.step_sources == first.metrics.step_sources
    assert len(decoder.pool.sources["token_recycling"]) == 0  # the decoder's own table stays empty
    # any W, N or G fixed: the n-gram pool alone, as before
    for partial in (LookaheadDecoder(model, 7, 5, "auto"), LookaheadDecoder(model, 3, 6, 6)):
        assert isinstance(partial.pool, BucketedNGramPool)


def test_combined_pool_options():
    assert combined_pool(6, 7, auto=True, persistent=True).persistent
    assert combined_pool(6, 7, auto=True, only="suffix_tree").names == ("suffix_tree",)
    assert not combined_pool(6, 7, auto=True, only="suffix_tree").merged  # one source: nothing to merge
    fixed, auto = combined_pool(5, 7, auto=False), combined_pool(6, 7, auto=True)
    assert fixed.sources["lookahead"].span == fixed.sources["suffix_tree"].span == 4  # N-1 tokens
    assert auto.sources["lookahead"].span == auto.sources["suffix_tree"].span == AUTO_SPAN
    assert combined_pool(6, 7, auto=True, span=5).sources["suffix_tree"].span == 5
    with pytest.raises(ValueError, match="unknown draft source 'ngram'"):
        combined_pool(6, 7, auto=True, only="ngram")
    without = combined_pool(6, 7, auto=True, without="token_recycling")
    assert without.names == ("lookahead", "suffix_tree") and without.merged
    with pytest.raises(ValueError, match="unknown draft source 'recycling'"):
        combined_pool(6, 7, auto=True, without="recycling")
