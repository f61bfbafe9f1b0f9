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


def naive_longest_match(documents, pattern, before, max_depth):
    """The longest suffix of ``pattern`` (<= max_depth) that ends inside one of ``documents`` (their
    concatenation's positions) at some end < ``before``, with a token after it in that document."""
    for depth in range(min(max_depth, len(pattern)), 0, -1):
        suffix, ends, offset = pattern[len(pattern) - depth :], [], 0
        for document in documents:
            last = len(document) if offset + len(document) == sum(map(len, documents)) else len(document) - 1
            ends += [
                offset + end
                for end in range(depth, last + 1)
                if document[end - depth : end] == suffix and offset + end < before
            ]
            offset += len(document)
        if ends:
            return depth, ends
    return 0, []


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 3), max_size=40),
    st.lists(st.integers(0, 3), min_size=1, max_size=6),
    st.integers(1, 5),
    st.lists(st.integers(1, 39), max_size=3),
)
def test_longest_match_equals_a_naive_search(text, pattern, max_depth, cuts):
    index = SuffixIndex(max_depth)
    index.extend(text[:7])
    index.extend(text[7:])  # built in two parts, as a decode extends it
    assert index.text == text
    assert index.longest_match(pattern, len(text)) == naive_longest_match(
        [text], pattern, len(text), max_depth
    )
    assert index.memory_entries() == len(text) + sum(min(max_depth, end) for end in range(1, len(text) + 1))

    # the same text as documents (as the global index holds outputs): nothing crosses a boundary
    bounds = sorted({0, *(c for c in cuts if c < len(text)), len(text)})
    documents = [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    index = SuffixIndex(max_depth)
    for document in documents:
        index.extend(document, new_document=True)
    assert index.text == text and index.starts == (bounds[:-1] or [0])
    matched, ends = index.longest_match(pattern, len(text))
    assert (matched, ends) == naive_longest_match(documents, pattern, len(text), max_depth)
    for end in ends:  # continuations stop at their document's end
        document_end = next(b for b in bounds if b > end)
        assert index.continuation(end, 10) == tuple(text[end : min(end + 10, document_end)])
    within = sum(  # a closed document's last position is not indexed: nothing follows it there
        min(max_depth, end - a)
        for a, b in zip(bounds, bounds[1:], strict=False)
        for end in range(a + 1, b + (b == len(text)))
    )
    assert index.memory_entries() == len(text) + within


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
    rebuilt.extend([5, 6, 5])
    rebuilt.extend([6, 5, 7], new_document=True)
    assert grown._global.text == rebuilt.text and grown._global.ends == rebuilt.ends
    assert grown._global.ends[(5, 6)] == [2]  # 5 | 6 across the two outputs is not a path


def test_the_global_index_does_not_draft_across_two_outputs():
    """Two earlier outputs are two documents: the end of one is not followed by the start of the next."""
    pool = SuffixTreePool(4, persistent=True)
    for output in ([10, 11, 12], [13, 14, 15], []):
        pool.start([1])
        pool.observe([1, *output], len(output))
    assert pool._global.text == [10, 11, 12, 13, 14, 15]
    pool.start([7, 7, 12])
    assert pool.candidates([12], 2) == []  # 12 ended an output: nothing follows it
    pool.start([7, 11])
    assert pool.candidates([11], 3) == [(12,)]  # cut at its output's end, not 12 13
    pool.start([7, 12, 13])
    assert pool.candidates([12, 13], 2) == [(14, 15)]  # only the one-token match "13" occurs
    assert pool._matched == 1


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
