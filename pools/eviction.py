"""Eviction policies: pick the entry to drop from a full bucket (or decline to drop any)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from lade.interfaces import EntryStats, EvictionPolicy


def _oldest(entries: Sequence[EntryStats], indices) -> int:
    return min(indices, key=lambda i: entries[i].inserted)


class LRUEviction(EvictionPolicy):
    """Least recently inserted or re-inserted entry goes first (the reference implementation's rule)."""

    def victim(self, entries: Sequence[EntryStats]) -> int:
        return min(range(len(entries)), key=lambda i: entries[i].touched)


class FIFOEviction(EvictionPolicy):
    """First inserted goes first; re-inserting an n-gram does not make it younger."""

    def victim(self, entries: Sequence[EntryStats]) -> int:
        return _oldest(entries, range(len(entries)))


class LFUEviction(EvictionPolicy):
    """Fewest verification hits goes first; ties go to the oldest inserted."""

    def victim(self, entries: Sequence[EntryStats]) -> int:
        fewest = min(entry.hits for entry in entries)
        return _oldest(entries, [i for i, entry in enumerate(entries) if entry.hits == fewest])


class RandomEviction(EvictionPolicy):
    """A uniformly random entry, from a generator seeded at construction (runs repeat exactly)."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        self._random = random.Random(seed)

    def victim(self, entries: Sequence[EntryStats]) -> int:
        return self._random.randrange(len(entries))

    def reset(self) -> None:
        """Restart the random stream (the pool calls this when it is reset)."""
        self._random = random.Random(self.seed)


class NoEviction(EvictionPolicy):
    """Unbounded: never evicts, so buckets grow past any capacity."""

    def victim(self, entries: Sequence[EntryStats]) -> None:
        return None
