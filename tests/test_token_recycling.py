"""Token Recycling (``pools.token_recycling``): the adjacency table from logits, the draft tree against
brute force, and decoding with it against HF greedy (one prompt, batches with a shared table)."""

import itertools

import pytest
import torch

from lade import LookaheadDecoder
from pools import TokenRecyclingPool
from pools.token_recycling import top_k_indices
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
    ids = prompt("repetitive", 1, length=24)
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


def test_the_likeliest_tree_follows_the_measured_rank_chances():
    pool = TokenRecyclingPool(2, nodes=3, depth=3, top_k=2)
    pool._table = {0: (1, 2), 1: (3, 4), 2: (5, 6), 3: (7, 8), 4: (9, 10)}
    logits = torch.zeros(1, 11)
    logits[0, 3] = 1.0  # after token 1 the model now ranks 3 first: its old row's rank 0
    for _ in range(600):  # every rebuild sees rank 0 taken each time
        pool.observe_logits([1], logits)
    assert pool.rank_acceptance()[0] > 0.9
    # three nodes, rank 0 all but always right: one chain along the top-ranked tokens
    assert pool.candidates([0], 8) == [(1, 3, 7)]


def test_the_likeliest_tree_checks_its_arguments():
    for bad in ({"nodes": 0}, {"nodes": 4, "depth": 0}, {"nodes": 4, "top_k": 0}):
        with pytest.raises(ValueError):
            TokenRecyclingPool(2, **bad)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_token_recycling_with_the_likeliest_tree_decodes_exactly(tiny_models, arch):
    model = tiny_models(arch, "sdpa")
    ids = prompt("repetitive", 5, length=24)
    pool = TokenRecyclingPool(2, nodes=12, depth=6)
    decoder = LookaheadDecoder(model, 1, 2, 12, proposer=AutoregressiveProposer(ngram=2), pool=pool)
    for _ in range(2):  # the second call starts from the first's table and rank counts
        result = decoder.generate(ids, max_new_tokens=48, eos_token_id=[])
        assert torch.equal(result.sequences, hf_greedy(model, ids, 48))
    assert result.metrics.steps < 48 and pool.ranks.seen > 0
    assert max(result.metrics.step_sizes) <= 1 + 12  # the root and the tree's nodes: leaves unpadded


def test_token_recycling_trees_accept_what_chains_accept(tiny_models):
    """Leaves of different depths: chains feed their padding, tries do not, neither accepts it."""
    model = tiny_models("llama", "sdpa")
    ids = prompt("repetitive", 6, length=24)
    metrics = {}
    for tree in (True, False):
        pool = TokenRecyclingPool(2, nodes=12, depth=6)
        decoder = LookaheadDecoder(
            model, 1, 2, 12, proposer=AutoregressiveProposer(ngram=2), pool=pool, token_tree=tree
        )
        result = decoder.generate(ids, max_new_tokens=48, eos_token_id=[])
        assert torch.equal(result.sequences, hf_greedy(model, ids, 48))
        metrics[tree] = result.metrics
    assert metrics[True].tokens_per_step == metrics[False].tokens_per_step
    assert sum(metrics[True].step_sizes) < sum(metrics[False].step_sizes)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_top_k_indices_give_topk_s_values_largest_first(dtype):
    """The two-pass top-k (block maxima, then the best blocks' entries) against ``torch.topk``: the same
    values in the same order for every row, ties included (bfloat16 logits tie often), the same
    indices where values differ, whole blocks or a tail past them, and a small vocabulary."""
    generator = torch.Generator().manual_seed(0)
    for vocab in (40, 4 * 4 * 256 - 1, 49152, 49152 + 77, 151936):
        distinct = torch.randn(9, vocab, generator=generator).to(dtype)
        tied = torch.randint(-6, 2, (9, vocab), generator=generator).to(dtype)
        tied[0] = -1.0  # one value everywhere
        tied[1, -3:] = 5.0  # the largest past the last whole block
        for logits in (distinct, tied):
            for k in (1, 4, 8):
                expected = logits.topk(k, dim=-1)
                index = top_k_indices(logits, k)
                assert index.shape == (9, k)
                assert torch.equal(logits.gather(1, index), expected.values)
                assert all(len(set(row)) == k for row in index.tolist())  # k distinct entries
        if dtype == torch.float32:  # distinct values: the very same indices
            assert torch.equal(top_k_indices(distinct, 4), distinct.topk(4, dim=-1).indices)
