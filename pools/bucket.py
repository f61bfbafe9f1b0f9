"""The reference n-gram pool: one bucket per first token, a per-key capacity, an eviction policy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from lade.interfaces import EntryStats, EvictionPolicy, NGramPool
from pools.eviction import LRUEviction


class BucketedNGramPool(NGramPool):
    """Maps a key token to at most ``capacity`` continuations of N-1 tokens.

    Re-inserting a stored n-gram refreshes it (``touched``) instead of duplicating it. When a new
    n-gram arrives at a full bucket, ``eviction`` chooses the victim. ``candidates`` returns the
    ``limit`` most recently touched continuations, oldest first. ``capacity=None`` never evicts;
    ``capacity=0`` stores nothing.
    """

    def __init__(self, ngram: int, capacity: int | None, eviction: EvictionPolicy | None = None):
        if ngram < 2:
            raise ValueError(f"ngram must be >= 2, got {ngram}")
        if capacity is not None and (
            isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0
        ):
            raise ValueError(f"capacity must be an integer >= 0 or None, got {capacity!r}")
        self.ngram = ngram
        self.capacity = capacity
        self.eviction = eviction or LRUEviction()
        self._buckets: dict[int, dict[tuple[int, ...], EntryStats]] = {}
        self._tick = 0

    def add(self, ngrams: Sequence[Sequence[int]]) -> None:
        for ngram in ngrams:
            if len(ngram) != self.ngram:
                raise ValueError(f"expected n-grams of {self.ngram} tokens, got {len(ngram)}")
            self._tick += 1
            key, continuation = ngram[0], tuple(ngram[1:])
            bucket = self._buckets.setdefault(key, {})
            entry = bucket.pop(continuation, None)
            if entry is not None:  # re-insertion: move to the most recent end, keep its history
                bucket[continuation] = replace(entry, touched=self._tick)
                continue
            if self.capacity == 0:  # G = 0: nothing is ever verified, so nothing is worth storing
                continue
            if self.capacity is not None and len(bucket) >= self.capacity:
                stored = list(bucket)
                del bucket[stored[self.eviction.victim([bucket[c] for c in stored])]]
            bucket[continuation] = EntryStats(inserted=self._tick, touched=self._tick, hits=0)

    def candidates(self, key: int, limit: int) -> list[tuple[int, ...]]:
        bucket = self._buckets.get(key)
        if not bucket or limit <= 0:
            return []
        stored = list(bucket)  # insertion dicts keep touch order: oldest first
        return stored[-limit:]

    def record_hit(self, key: int, continuation: tuple[int, ...]) -> None:
        bucket = self._buckets.get(key)
        if bucket is not None and continuation in bucket:
            bucket[continuation] = replace(bucket[continuation], hits=bucket[continuation].hits + 1)

    def reset(self) -> None:
        self._buckets.clear()
        self._tick = 0

    def __len__(self) -> int:
        return sum(len(bucket) for bucket in self._buckets.values())

    def bucket(self, key: int) -> list[tuple[int, ...]]:
        """Continuations stored under ``key``, oldest first (for inspection and tests)."""
        return list(self._buckets.get(key, {}))
