"""Token Recycling (``pools.token_recycling``): the adjacency table from logits, the draft tree against
brute force, and decoding with it against HF greedy (one prompt, batches with a shared table)."""

import itertools

import pytest
import torch

from lade import LookaheadDecoder
from pools import TokenRecyclingPool
from strategies import AutoregressiveProposer
from tests.conftest import ARCHITECTURES, hf_greedy, prompt
from tests.test_batch import hf_batched, left_padded


def test_the_table_keeps_each_tokens_latest_top_k():
    pool = TokenRecyclingPool(2, branching=(2, 1))
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0], [5.0, 0.0, 4.0, 0.0]])
    pool.observe_logits([7, 1], logits)
    assert pool._table == {7: (1, 3), 1: (0, 2)}
    pool.observe_logits([7], logits[1:])  # a later step replaces the row
    assert pool._table[7] == (0, 2) and len(pool) == 2


def test_candidates_are_the_draft_trees_paths_in_rank_order():
    pool = TokenRecyclingPool(2, branching=(3, 2, 1))
    table = {0: (1, 2, 3), 1: (4, 5), 2: (6,), 4: (7,), 5: (8,), 6: (9,)}
    pool._table = dict(table)
    # brute force: every path along ranks < width at each depth, cut where the table has no row
    expected = []
    for ranks in itertools.product(range(3), range(2), range(1)):
        path, last = [], 0
        for rank in ranks:
            children = table.get(last, ())
            if rank >= len(children):
                break
            last = children[rank]
            path.append(last)
        if path and tuple(path) not in expected and (len(path) == 3 or last not in table):
            expected.append(tuple(path))
    assert pool.candidates([5, 0], 10) == expected == [(1, 4, 7), (1, 5, 8), (2, 6, 9), (3,)]
    assert pool.candidates([0], 2) == expected[:2]  # the first g paths: the best g-path subtree
    assert pool.candidates([42], 5) == []  # an unseen token: no draft


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_token_recycling_decodes_exactly(tiny_models, arch):
    model = tiny_models(arch, "sdpa")
    ids = prompt("repetitive", 3, length=24)
    decoder = LookaheadDecoder(
        model, 1, 2, 8, proposer=AutoregressiveProposer(ngram=2), pool=TokenRecyclingPool(2)
    )
    result = decoder.generate(ids, max_new_tokens=48, eos_token_id=[])
    assert torch.equal(result.sequences, hf_greedy(model, ids, 48))
    assert result.metrics.steps < 48  # drafts from recycled tokens were accepted
    assert len(decoder.pool) > 0  # persistent (the default): the decoder's table keeps what it learnt


def test_token_recycling_batches_share_one_table(tiny_models):
    model = tiny_models("qwen2", "sdpa")
    ids, mask = left_padded([9, 14, 6], seed=4)
    for shared in (False, True):
        decoder = LookaheadDecoder(
            model,
            1,
            2,
            8,
            proposer=AutoregressiveProposer(ngram=2),
            pool=TokenRecyclingPool(2),
            shared_pool=shared,
        )
        result = decoder.generate(ids, attention_mask=mask, max_new_tokens=32, eos_token_id=[])
        assert torch.equal(result.sequences, hf_batched(model, ids, mask, 32)), shared
