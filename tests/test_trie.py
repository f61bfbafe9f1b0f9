"""Token-trie verification (``lade.trie``): the trie and its layout against brute force, and decoding
with tries against chains (the same tokens and steps, fewer tokens fed) and against HF greedy."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lade import LookaheadDecoder
from lade.calibration import LatencyModel
from lade.layout import step_layout, trie_layout
from lade.trie import build_trie, pad_trie
from tests.conftest import ARCHITECTURES, hf_greedy, prompt

candidate_sets = st.integers(1, 4).flatmap(
    lambda length: st.lists(st.lists(st.integers(0, 3), min_size=length, max_size=length), max_size=6)
)


@settings(max_examples=80, deadline=None)
@given(candidate_sets)
def test_trie_has_one_node_per_distinct_prefix(candidates):
    trie = build_trie(candidates)
    prefixes = {tuple(c[: j + 1]) for c in candidates for j in range(len(c))}
    assert trie.size == len(prefixes)
    assert all(parent < node for node, parent in enumerate(trie.parents))
    for candidate, path in zip(candidates, trie.candidate_nodes, strict=True):
        assert [trie.tokens[node] for node in path] == candidate  # each path spells its candidate
        assert [trie.parents[node] for node in path] == [-1, *path[:-1]]


@settings(max_examples=60, deadline=None)
@given(candidate_sets, st.integers(0, 3), st.integers(1, 4))
def test_trie_layout_matches_the_chains_it_merges(candidates, levels, window):
    """Every candidate token's row sees the same tokens at the same depths as in the chain layout:
    so its logits are the chain's."""
    length = len(candidates[0]) if candidates else 1
    trie = build_trie(candidates)
    tree = trie_layout(levels, window, trie.parents, trie.candidate_nodes, length)
    chains = step_layout(levels, window, len(candidates), length)
    tokens_tree = [None] * tree.size
    tokens_chain = [None] * chains.size
    for i, candidate in enumerate(candidates):
        for j, token in enumerate(candidate):
            tokens_tree[tree.candidate_row(i, j)] = token
            tokens_chain[chains.candidate_row(i, j)] = token
    assert tree.size == 1 + levels * window + trie.size
    assert torch.equal(
        tree.tree_mask[: chains.candidates.start, : chains.candidates.start],
        chains.tree_mask[: chains.candidates.start, : chains.candidates.start],
    )
    for i, candidate in enumerate(candidates):
        for j in range(len(candidate)):
            row_tree, row_chain = tree.candidate_row(i, j), chains.candidate_row(i, j)
            assert tree.depths[row_tree] == chains.depths[row_chain] == j + 1
            seen_tree = [
                (int(tree.depths[k]), tokens_tree[k]) for k in tree.tree_mask[row_tree].nonzero().flatten()
            ]
            seen_chain = [
                (int(chains.depths[k]), tokens_chain[k])
                for k in chains.tree_mask[row_chain].nonzero().flatten()
            ]
            assert seen_tree == seen_chain


def test_a_candidates_padding_gets_no_node():
    """Padding past a candidate's own tokens is never accepted: it maps to its last own node, unfed."""
    trie = build_trie([[1, 2, 2, 2], [1, 3, 4, 4]], lengths=[2, 3])
    assert trie.tokens == (1, 2, 3, 4) and trie.parents == (-1, 0, 0, 2)
    assert trie.candidate_nodes == ((0, 1, 1, 1), (0, 2, 3, 3))
    with pytest.raises(ValueError, match="no token"):
        build_trie([[1, 1]], lengths=[0])


def test_padding_adds_fillers_below_the_root():
    trie = pad_trie(build_trie([[1, 2], [1, 3]]), 5, filler=9)
    assert trie.tokens == (1, 2, 3, 9, 9) and trie.parents == (-1, 0, 0, -1, -1)
    with pytest.raises(ValueError):
        pad_trie(trie, 2, filler=9)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_tries_accept_what_chains_accept_for_fewer_tokens(tiny_models, arch):
    model = tiny_models(arch, "sdpa")
    ids = prompt("repetitive", 5, length=24)
    reference = hf_greedy(model, ids, 60)
    results = {
        tree: LookaheadDecoder(model, 3, 4, 6, token_tree=tree).generate(
            ids, max_new_tokens=60, eos_token_id=[]
        )
        for tree in (True, False)
    }
    tries, chains = results[True].metrics, results[False].metrics
    for result in results.values():
        assert torch.equal(result.sequences, reference)
    assert tries.tokens_per_step == chains.tokens_per_step  # the same acceptance, step by step
    assert all(t <= c for t, c in zip(tries.step_sizes, chains.step_sizes, strict=True))
    assert sum(tries.step_sizes) < sum(chains.step_sizes)  # shared prefixes were fed once
    saved = [c - t for t, c in zip(tries.step_sizes, chains.step_sizes, strict=True)]
    branch = [c - t for t, c in zip(tries.verification_sizes, chains.verification_sizes, strict=True)]
    assert saved == branch and len(tries.verification_sizes) == tries.steps  # all saved in that branch


def test_batched_tries_of_different_sizes_decode_exactly(tiny_models):
    """Rows with tries of different sizes share one step: each row's own mask and positions."""
    from tests.test_batch import hf_batched, left_padded

    model = tiny_models("gemma3", "sdpa")  # sliding-window layers read the per-row positions
    ids, mask = left_padded([9, 14, 6, 12], seed=11)
    reference = hf_batched(model, ids, mask, 32)
    flat = LatencyModel((1, 1024), (1.0, 1.05))
    for config in [(3, 4, 6), ("auto", "auto", "auto")]:
        result = LookaheadDecoder(model, *config, latency=flat).generate(
            ids, attention_mask=mask, max_new_tokens=32, eos_token_id=[]
        )
        assert torch.equal(result.sequences, reference), config


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=5), max_size=6),
    st.integers(1, 7),
    st.integers(1, 5),
)
def test_trie_sizes_price_what_a_step_would_feed(candidates, max_guess, max_length):
    """What the auto planner prices for (g, l): the nodes of the trie of the first g candidates cut or
    padded to l tokens, as the step would build it (their padding unfed)."""
    from lade.trie import trie_sizes
    from lade.types import pad_candidate

    sizes = trie_sizes(candidates, max_guess, max_length)
    for g in range(max_guess + 1):
        for length in range(1, max_length + 1):
            chosen = [pad_candidate(tuple(c), length) for c in candidates[:g]]
            own = [min(len(c), length) for c in candidates[:g]]
            assert sizes[g][length] == build_trie(chosen, own).size
