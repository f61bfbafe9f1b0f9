"""Eviction policies: pick the entry to drop from a full bucket."""

from __future__ import annotations

from collections.abc import Sequence

from lade.interfaces import EntryStats, EvictionPolicy


class LRUEviction(EvictionPolicy):
    """Least recently inserted or re-inserted entry goes first (the reference implementation's rule)."""

    def victim(self, entries: Sequence[EntryStats]) -> int:
        return min(range(len(entries)), key=lambda i: entries[i].touched)
