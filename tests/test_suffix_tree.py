"""The suffix-tree pool (``pools.suffix_tree``): its index against a naive substring search, its ranking,
its memory bound, and decoding with it against HF greedy (one call, and a repeat that drafts from the
previous call's output)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lade import LookaheadDecoder
from lade.calibration import LatencyModel
from pools import SuffixIndex, SuffixTreePool
from strategies import AutoregressiveProposer
from tests.conftest import ARCHITECTURES, hf_greedy, prompt


def naive_longest_match(text, pattern, before, max_depth):
    """The longest suffix of ``pattern`` (<= max_depth) ending in ``text`` at some end < ``before``."""
    for depth in range(min(max_depth, len(pattern)), 0, -1):
        suffix = pattern[len(pattern) - depth :]
        ends = [
            end for end in range(depth, len(text) + 1) if text[end - depth : end] == suffix and end < before
        ]
        if ends:
            return depth, ends
    return 0, []


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 3), max_size=40),
    st.lists(st.integers(0, 3), min_size=1, max_size=6),
    st.integers(1, 5),
)
def test_longest_match_equals_a_naive_search(text, pattern, max_depth):
    index = SuffixIndex(max_depth)
    index.extend(text[:7])
    index.extend(text[7:])  # built in two parts, as a decode extends it
    assert index.text == text
    assert index.longest_match(pattern, len(text)) == naive_longest_match(text, pattern, len(text), max_depth)
    assert index.memory_entries() == len(text) + sum(min(max_depth, end) for end in range(1, len(text) + 1))


def test_candidates_follow_the_longest_match_most_frequent_first():
    pool = SuffixTreePool(5, min_length=4)
    # "1 2" is followed by "7 7 ..." twice and by "8 ..." once: the longest match of the end "... 1 2"
    pool.start([5, 1, 2, 8, 9, 9, 9, 3, 1, 2, 7, 7, 4, 4, 6, 1, 2, 7, 7, 4, 4, 0, 1, 2])
    candidates = pool.candidates([1, 2], 3)
    assert candidates[0] == (7, 7, 4, 4) and candidates[1] == (8, 9, 9, 9)
    assert pool.confidence([1, 2], candidates) == 2  # matched on "1 2"


def test_the_global_index_drafts_from_earlier_outputs_within_its_bound():
    pool = SuffixTreePool(4, global_tokens=6, persistent=True)
    pool.start([1, 2, 3])
    sequence = [1, 2, 3]
    for token in [10, 11, 12, 13, 14, 15, 16, 17]:
        sequence.append(token)
        pool.observe(sequence, 1)
    pool.start([9, 10, 11])  # a new call: the previous output (8 tokens) is kept, cut to the last 6
    assert pool._global.text == [12, 13, 14, 15, 16, 17]
    pool.start([9, 9, 14])
    # only the global index knows what followed 14; a 1-token match drafts max(2, 2 x 1) tokens
    assert pool.candidates([14], 2) == [(15, 16)]
    assert SuffixTreePool(4).memory_entries() == 0
    grown = SuffixTreePool(3, global_tokens=100, persistent=True)  # under its bound: grown in place
    for start, output in (([1], [5, 6, 5]), ([2], [6, 5, 7]), ([3], [])):
        grown.start(start)
        grown.observe(start + output, len(output))
    rebuilt = SuffixIndex(grown.max_depth)
    rebuilt.extend([5, 6, 5, 6, 5, 7])
    assert grown._global.text == rebuilt.text and grown._global.ends == rebuilt.ends


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_suffix_tree_pool_decodes_exactly_and_drafts_from_a_previous_call(tiny_models, arch):
    model = tiny_models(arch, "sdpa")
    ids = prompt("random", 8, length=16)
    reference = hf_greedy(model, ids, 40)
    pool = SuffixTreePool(6, persistent=True)
    decoder = LookaheadDecoder(model, 1, 6, 4, proposer=AutoregressiveProposer(ngram=6), pool=pool)
    first, second = (decoder.generate(ids, max_new_tokens=40, eos_token_id=[]) for _ in range(2))
    assert torch.equal(first.sequences, reference) and torch.equal(second.sequences, reference)
    # the repeat finds its whole output in the global index: long candidates, accepted
    assert second.metrics.steps < first.metrics.steps and max(second.metrics.tokens_per_step) >= 4


def test_suffix_tree_pool_under_auto(tiny_models):
    model = tiny_models("llama", "sdpa")
    ids = prompt("repetitive", 9, length=24)
    pool = SuffixTreePool(6, span=10)
    flat = LatencyModel((1, 1024), (1.0, 1.05))
    result = LookaheadDecoder(model, pool=pool, latency=flat).generate(
        ids, max_new_tokens=40, eos_token_id=[]
    )
    assert torch.equal(result.sequences, hf_greedy(model, ids, 40))
