"""N-gram pools and eviction policies."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lade.interfaces import EntryStats
from lade.types import pad_candidate
from pools import (
    BucketedNGramPool,
    FIFOEviction,
    LFUEviction,
    LRUEviction,
    NoEviction,
    PromptLookupPool,
    RandomEviction,
)

# ---------------------------------------------------------------- eviction policies on crafted histories

# (inserted, touched, hits)
HISTORY = [EntryStats(1, 9, 2), EntryStats(2, 3, 0), EntryStats(3, 4, 0), EntryStats(4, 8, 5)]


def test_lru_picks_least_recently_touched():
    assert LRUEviction().victim(HISTORY) == 1


def test_fifo_picks_first_inserted_even_if_touched_since():
    assert FIFOEviction().victim(HISTORY) == 0


def test_lfu_picks_fewest_hits_ties_to_oldest():
    assert LFUEviction().victim(HISTORY) == 1
    assert LFUEviction().victim([EntryStats(5, 5, 1), EntryStats(2, 9, 1), EntryStats(3, 3, 4)]) == 1


def test_no_eviction_declines():
    assert NoEviction().victim(HISTORY) is None


def test_random_is_deterministic_under_a_seed_and_resets():
    first = [RandomEviction(seed=7).victim(HISTORY) for _ in range(1)]
    policy = RandomEviction(seed=7)
    draws = [policy.victim(HISTORY) for _ in range(20)]
    assert draws[:1] == first and len(set(draws)) > 1 and all(0 <= d < 4 for d in draws)
    policy.reset()
    assert [policy.victim(HISTORY) for _ in range(20)] == draws


# ---------------------------------------------------------------- the bucketed pool


def test_lru_pool_evicts_least_recently_touched():
    pool = BucketedNGramPool(ngram=3, capacity=2)
    pool.add([(1, 2, 3), (1, 4, 5)])
    pool.add([(1, 2, 3)])  # refresh: (4, 5) is now the least recently touched
    pool.add([(1, 6, 7)])
    assert pool.bucket(1) == [(2, 3), (6, 7)]


def test_fifo_and_lfu_pools():
    fifo = BucketedNGramPool(ngram=2, capacity=2, eviction=FIFOEviction())
    fifo.add([(1, 2), (1, 3), (1, 2), (1, 4)])  # (2,) was first in: it goes although just refreshed
    assert sorted(fifo.bucket(1)) == [(3,), (4,)]
    lfu = BucketedNGramPool(ngram=2, capacity=2, eviction=LFUEviction())
    lfu.add([(1, 2), (1, 3)])
    lfu.record_hit([1], (2,))
    lfu.add([(1, 4)])  # (3,) has no hits
    assert sorted(lfu.bucket(1)) == [(2,), (4,)]


def test_reinsertion_does_not_duplicate():
    pool = BucketedNGramPool(ngram=2, capacity=3)
    pool.add([(9, 1), (9, 1), (9, 1)])
    assert pool.bucket(9) == [(1,)] and len(pool) == 1


def test_candidates_are_the_most_recent_oldest_first():
    pool = BucketedNGramPool(ngram=3, capacity=4)
    pool.add([(1, 2, 3), (1, 4, 5), (1, 6, 7), (2, 8, 9)])
    assert pool.candidates([1], limit=2) == [(4, 5), (6, 7)]
    assert pool.candidates([5, 1], limit=10) == [(2, 3), (4, 5), (6, 7)]
    assert pool.candidates([2], limit=1) == [(8, 9)]
    assert pool.candidates([3], limit=5) == [] and pool.candidates([1], limit=0) == []


def test_frequent_selection_serves_the_most_hit():
    pool = BucketedNGramPool(ngram=2, capacity=4, selection="frequent")
    pool.add([(1, 2), (1, 3), (1, 4)])
    pool.record_hit([1], (3,))
    pool.record_hit([1], (3,))
    pool.record_hit([1], (2,))
    assert pool.candidates([1], limit=2) == [(3,), (2,)]


def test_capacity_is_separate_from_the_number_verified():
    pool = BucketedNGramPool(ngram=2, capacity=10)
    pool.add([(1, t) for t in range(8)])
    assert len(pool.bucket(1)) == 8 and len(pool.candidates([1], limit=3)) == 3


def test_global_capacity_bounds_all_keys():
    pool = BucketedNGramPool(ngram=2, capacity=None, global_capacity=3)
    pool.add([(1, 2), (2, 3), (3, 4), (4, 5)])
    assert len(pool) == 3 and pool.bucket(1) == []  # the globally least recently touched left


def test_longer_keys_first_then_fall_back():
    pool = BucketedNGramPool(ngram=2, capacity=4, key_length=2)
    pool.add([(7, 1, 2), (8, 1, 3)])  # left context 7 / 8, then the n-gram
    assert pool.bucket((7, 1)) == [(2,)] and pool.bucket(1) == [(2,), (3,)]
    assert pool.candidates([8, 1], limit=1) == [(3,)]  # the 2-token key wins
    assert pool.candidates([8, 1], limit=5) == [(3,), (2,)]  # then the 1-token key fills up
    assert pool.candidates([9, 1], limit=5) == [(2,), (3,)]  # no 2-token bucket: fall back


def test_prompt_seeding_yields_every_ngram_of_the_prompt():
    prompt = [5, 6, 7, 5, 6, 8, 9]
    pool = BucketedNGramPool(ngram=3, capacity=None, seed_prompt=True)
    pool.start(prompt)
    expected = {tuple(prompt[i : i + 3]) for i in range(len(prompt) - 2)}
    stored = {(key, *c) for key in set(prompt) for c in pool.bucket(key)}
    assert stored == expected


def test_output_seeding_adds_ngrams_ending_in_new_tokens():
    pool = BucketedNGramPool(ngram=3, capacity=None, seed_output=True)
    pool.start([1, 2])
    assert len(pool) == 0
    pool.observe([1, 2, 3, 4], new_tokens=2)
    assert pool.bucket(1) == [(2, 3)] and pool.bucket(2) == [(3, 4)]


def test_span_stores_longer_copies_from_the_text_beside_harvested_ngrams():
    pool = BucketedNGramPool(ngram=3, capacity=None, seed_prompt=True, seed_output=True, span=4)
    pool.start([1, 2, 3, 4, 5, 6])
    assert pool.bucket(1) == [(2, 3, 4, 5)] and pool.bucket(2) == [(3, 4, 5, 6)]  # 1 + span tokens
    assert pool.bucket(3) == []  # fewer than span tokens follow it so far
    pool.observe([1, 2, 3, 4, 5, 6, 7], new_tokens=1)
    assert pool.bucket(3) == [(4, 5, 6, 7)]
    pool.add([(1, 9, 9)])  # a harvested n-gram keeps its N-1 tokens
    assert pool.bucket(1) == [(2, 3, 4, 5), (9, 9)]
    assert pool.candidates([1], limit=2) == [(2, 3, 4, 5), (9, 9)]
    with pytest.raises(ValueError, match="span"):
        BucketedNGramPool(ngram=4, capacity=1, span=2)


def test_pad_candidate_cuts_or_repeats_the_last_token():
    assert pad_candidate((4, 5), 4) == [4, 5, 5, 5]
    assert pad_candidate((4, 5, 6), 2) == [4, 5]


def test_persistent_pool_survives_start_until_reset():
    pool = BucketedNGramPool(ngram=2, capacity=2, persistent=True)
    pool.add([(1, 2)])
    pool.start([3, 4])
    assert pool.bucket(1) == [(2,)]
    pool.reset()
    assert len(pool) == 0
    plain = BucketedNGramPool(ngram=2, capacity=2)
    plain.add([(1, 2)])
    plain.start([3, 4])
    assert len(plain) == 0


def test_zero_capacity_stores_nothing():
    pool = BucketedNGramPool(ngram=2, capacity=0)
    pool.add([(1, 2), (1, 3)])
    assert len(pool) == 0 and pool.candidates([1], 5) == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ngram": 1, "capacity": 1}, "ngram"),
        ({"ngram": 2, "capacity": -1}, "capacity"),
        ({"ngram": 2, "capacity": 1, "key_length": 0}, "key_length"),
        ({"ngram": 2, "capacity": 1, "global_capacity": 0}, "global_capacity"),
        ({"ngram": 2, "capacity": 1, "selection": "best"}, "selection"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BucketedNGramPool(**kwargs)
    with pytest.raises(ValueError, match="at least 3"):
        BucketedNGramPool(ngram=3, capacity=1).add([(1, 2)])


POLICIES = {"lru": LRUEviction, "fifo": FIFOEviction, "lfu": LFUEviction, "random": lambda: RandomEviction(3)}
ngram_lists = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)), max_size=60)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.sampled_from(sorted(POLICIES)), ngram_lists)
def test_bucket_never_exceeds_capacity_and_keeps_the_latest(capacity, policy, ngrams):
    pool = BucketedNGramPool(ngram=3, capacity=capacity, eviction=POLICIES[policy]())
    for ngram in ngrams:
        pool.add([ngram])
        assert len(pool.bucket(ngram[0])) <= capacity
        assert ngram[1:] in pool.bucket(ngram[0])  # the latest insertion is always kept


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), ngram_lists)
def test_unbounded_never_evicts(capacity, ngrams):
    pool = BucketedNGramPool(ngram=3, capacity=capacity, eviction=NoEviction())
    pool.add(ngrams)
    assert len(pool) == len(set(ngrams))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 99), ngram_lists)
def test_random_pool_is_deterministic_under_a_seed(seed, ngrams):
    runs = []
    for _ in range(2):
        pool = BucketedNGramPool(ngram=3, capacity=1, eviction=RandomEviction(seed))
        pool.add(ngrams)
        runs.append({key: pool.bucket(key) for key in range(4)})
    assert runs[0] == runs[1]


# ---------------------------------------------------------------- prompt lookup


def test_prompt_lookup_serves_continuations_of_the_longest_match_most_recent_first():
    pool = PromptLookupPool(ngram=3, max_match=2)
    pool.start([1, 2, 3, 4, 1, 2, 5, 6, 1, 2])
    assert pool.candidates([2], limit=5) == [(5, 6), (3, 4)]  # "1 2" at 4 and 0 (not itself at 8)
    pool.observe([1, 2, 3, 4, 1, 2, 5, 6, 1, 2, 6], new_tokens=1)
    assert pool.candidates([6], limit=3) == [(1, 2)]  # no "2 6" before: falls back to "6" at 7
    pool.start([1, 2, 3])
    assert pool.candidates([3], limit=3) == []
