"""The bucketed n-gram pool and LRU eviction."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lade.interfaces import EntryStats
from pools import BucketedNGramPool, LRUEviction


def test_lru_evicts_least_recently_touched():
    pool = BucketedNGramPool(ngram=3, capacity=2)
    pool.add([(1, 2, 3), (1, 4, 5)])
    pool.add([(1, 2, 3)])  # refresh: (4, 5) is now the least recently touched
    pool.add([(1, 6, 7)])
    assert pool.bucket(1) == [(2, 3), (6, 7)]


def test_reinsertion_does_not_duplicate():
    pool = BucketedNGramPool(ngram=2, capacity=3)
    pool.add([(9, 1), (9, 1), (9, 1)])
    assert pool.bucket(9) == [(1,)]
    assert len(pool) == 1


def test_candidates_are_the_most_recent_oldest_first_and_keyed_by_first_token():
    pool = BucketedNGramPool(ngram=3, capacity=4)
    pool.add([(1, 2, 3), (1, 4, 5), (1, 6, 7), (2, 8, 9)])
    assert pool.candidates(1, limit=2) == [(4, 5), (6, 7)]
    assert pool.candidates(1, limit=10) == [(2, 3), (4, 5), (6, 7)]
    assert pool.candidates(2, limit=1) == [(8, 9)]
    assert pool.candidates(3, limit=5) == []
    assert pool.candidates(1, limit=0) == []


def test_zero_capacity_stores_nothing():
    pool = BucketedNGramPool(ngram=2, capacity=0)
    pool.add([(1, 2), (1, 3)])
    assert len(pool) == 0 and pool.candidates(1, 5) == []


def test_reset_empties_the_pool():
    pool = BucketedNGramPool(ngram=2, capacity=1)
    pool.add([(1, 2)])
    pool.reset()
    assert len(pool) == 0 and pool.candidates(1, 1) == []


def test_lru_policy_on_crafted_entries():
    entries = [EntryStats(1, 5, 0), EntryStats(2, 3, 9), EntryStats(3, 4, 0)]
    assert LRUEviction().victim(entries) == 1


def test_bad_arguments():
    with pytest.raises(ValueError, match="ngram"):
        BucketedNGramPool(ngram=1, capacity=1)
    with pytest.raises(ValueError, match="capacity"):
        BucketedNGramPool(ngram=2, capacity=-1)
    with pytest.raises(ValueError, match="n-grams of 3"):
        BucketedNGramPool(ngram=3, capacity=1).add([(1, 2)])


@settings(max_examples=50, deadline=None)
@given(
    st.integers(1, 4),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)), max_size=60),
)
def test_bucket_never_exceeds_capacity_and_keeps_the_latest(capacity, ngrams):
    pool = BucketedNGramPool(ngram=3, capacity=capacity)
    for ngram in ngrams:
        pool.add([ngram])
        assert len(pool.bucket(ngram[0])) <= capacity
        assert pool.bucket(ngram[0])[-1] == ngram[1:]  # the latest insertion is always kept, newest last
