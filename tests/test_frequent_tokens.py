"""The call's most frequent tokens as a draft source (``pools.FrequentTokensPool``): its counts and
ranking, and decoding with it beside the default sources against HF greedy (auto, batches)."""

import pytest
import torch

from lade import LookaheadDecoder
from lade.calibration import LatencyModel
from lade.options import combined_pool
from pools import FrequentTokensPool
from tests.conftest import ARCHITECTURES, hf_greedy, prompt
from tests.test_batch import hf_batched, left_padded

# a one-token step dearer than a two-token one, as bfloat16 on some CPUs: any guess is worth feeding
ONE_TOKEN_DEAR = LatencyModel((1, 2, 4, 16), (1.0, 0.95, 1.0, 1.2))


def test_candidates_are_the_most_frequent_tokens_first_seen_first_among_ties():
    pool = FrequentTokensPool()
    pool.start([5, 3, 5, 7, 3, 9])
    assert pool.candidates([9], 2) == [(5,), (3,)]  # 5 and 3 twice each: 5 was seen first
    assert pool.candidates([9], 10) == [(5,), (3,), (7,), (9,)]
    pool.observe([5, 3, 5, 7, 3, 9, 7, 7], new_tokens=2)  # only the new tokens count
    assert pool.candidates([7], 1) == [(7,)] and len(pool) == 4
    pool.join([1, 1, 1, 1])  # a batch row's prompt joins the counts
    assert pool.candidates([7], 1) == [(1,)]
    pool.start([2])  # a new call starts afresh
    assert pool.candidates([2], 3) == [(2,)]
    pool.reset()
    assert pool.candidates([2], 3) == [] and len(pool) == 0


def test_it_ignores_the_branch_and_sits_beside_sources_of_any_ngram():
    pool = FrequentTokensPool()
    assert not pool.fed_by_branch and pool.key_length == 1 and pool.span == 1
    pool.add([[1, 2, 3]])  # the branch's n-grams are not its business
    assert len(pool) == 0
    combined = combined_pool(6, 7, True, frequent_tokens=True)
    assert combined.ngram == 6 and "frequent_tokens" in combined.planned


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_decoding_with_it_under_auto_is_exact(tiny_models, arch):
    model = tiny_models(arch, "sdpa")
    ids = prompt("random", 5, length=20)
    decoder = LookaheadDecoder(
        model, pool=combined_pool(6, 7, True, frequent_tokens=True), latency=ONE_TOKEN_DEAR
    )
    result = decoder.generate(ids, max_new_tokens=40, eos_token_id=[])
    assert torch.equal(result.sequences, hf_greedy(model, ids, 40))
    # where a one-token step costs more, a step with no other source's candidate verifies one of these
    assert result.metrics.source_steps.get("frequent_tokens", 0) > 0


def test_batches_with_it_are_exact(tiny_models):
    model = tiny_models("llama", "sdpa")
    batch, mask = left_padded([9, 14, 6], seed=3)
    decoder = LookaheadDecoder(
        model, pool=combined_pool(6, 7, True, frequent_tokens=True), latency=ONE_TOKEN_DEAR
    )
    out = decoder.generate(batch, attention_mask=mask, max_new_tokens=24, eos_token_id=[])
    assert torch.equal(out.sequences, hf_batched(model, batch, mask, 24))
