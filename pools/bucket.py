"""The n-gram pool of lookahead decoding: buckets of continuations keyed by the last committed tokens."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from lade.interfaces import EntryStats, EvictionPolicy, NGramPool
from pools.eviction import LRUEviction

SELECTIONS = ("recent", "frequent")
Bucket = dict[tuple[int, ...], EntryStats]  # continuation (N-1 or span tokens) -> stats, in touch order


class BucketedNGramPool(NGramPool):
    """Maps a key to at most ``capacity`` continuations of N-1 tokens.

    The reference pool is ``key_length=1`` (the key is the n-gram's first token), LRU eviction,
    ``capacity`` = G, no seeding. The options, each one knob:

    * ``capacity``: per-key bucket size (``None``: unbounded; 0: store nothing). Independent of G,
      the number of candidates verified per step. ``global_capacity`` bounds the entries across all
      keys (per key length); the eviction policy then picks the victim among all of them.
    * ``eviction``: which entry leaves a full bucket (``pools.eviction``; ``NoEviction`` never evicts).
    * ``key_length`` k: n-grams are also indexed under their first token preceded by up to k-1
      tokens of left context; ``candidates`` tries the longest key the committed tokens give and
      falls back to shorter keys to fill its ``limit``.
    * ``selection``: which candidates a bucket serves when it holds more than asked: the most
      recently touched (``recent``, oldest first, as the reference) or the most often accepted
      (``frequent``, ties to the more recent).
    * ``seed_prompt`` / ``seed_output``: also insert every n-gram of the prompt (the reference's
      "prompt as reference") / of the committed output as it grows.
    * ``persistent``: keep the pool across ``generate`` calls (multi-turn chat, repeated requests)
      until ``reset()``; otherwise each call starts empty.
    * ``span``: continuation tokens of the n-grams seeded from the prompt and output (default N-1,
      as the harvested ones). Longer ones let a step verify a long copy from the text (as prompt
      lookup does) while the lookahead branch keeps N-1 levels: buckets then hold continuations of
      both lengths, and a step verifying l tokens pads the shorter ones (``lade.types.pad_candidate``).

    Re-inserting a stored n-gram refreshes it (``touched``) instead of duplicating it.
    """

    def __init__(
        self,
        ngram: int,
        capacity: int | None,
        eviction: EvictionPolicy | None = None,
        key_length: int = 1,
        global_capacity: int | None = None,
        selection: str = "recent",
        seed_prompt: bool = False,
        seed_output: bool = False,
        persistent: bool = False,
        span: int | None = None,
    ):
        if isinstance(ngram, bool) or not isinstance(ngram, int) or ngram < 2:
            raise ValueError(f"ngram must be an integer >= 2, got {ngram!r}")
        for name, value, minimum in (("capacity", capacity, 0), ("global_capacity", global_capacity, 1)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < minimum
            ):
                raise ValueError(f"{name} must be an integer >= {minimum} or None, got {value!r}")
        if isinstance(key_length, bool) or not isinstance(key_length, int) or key_length < 1:
            raise ValueError(f"key_length must be an integer >= 1, got {key_length!r}")
        if span is not None and (isinstance(span, bool) or not isinstance(span, int) or span < ngram - 1):
            raise ValueError(f"span must be an integer >= ngram - 1 = {ngram - 1} or None, got {span!r}")
        if selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
        self.ngram = ngram
        self.capacity = capacity
        self.eviction = eviction or LRUEviction()
        self.key_length = key_length
        self.global_capacity = global_capacity
        self.selection = selection
        self.seed_prompt = seed_prompt
        self.seed_output = seed_output
        self.persistent = persistent
        self.span = ngram - 1 if span is None else span
        self._indexes: list[dict[tuple[int, ...], Bucket]] = [{} for _ in range(key_length)]  # by key length
        self._sizes = [0] * key_length
        self._tick = 0

    # ------------------------------------------------------------------ NGramPool

    def add(self, ngrams: Sequence[Sequence[int]]) -> None:
        self._add(ngrams, harvested=True, size=self.ngram)

    def _add(self, ngrams: Sequence[Sequence[int]], harvested: bool, size: int) -> None:
        """Insert n-grams of ``size`` tokens, each after its left context (the tokens before them)."""
        for sequence in ngrams:
            if len(sequence) < size:
                raise ValueError(f"expected n-grams of at least {size} tokens, got {len(sequence)}")
            sequence = tuple(sequence)
            split = len(sequence) - size  # tokens before the n-gram: left context
            continuation = sequence[split + 1 :]
            for length in range(1, min(self.key_length, split + 1) + 1):
                self._insert(length, sequence[split + 1 - length : split + 1], continuation, harvested)

    def candidates(self, context: Sequence[int], limit: int) -> list[tuple[int, ...]]:
        found: list[tuple[int, ...]] = []
        for length in range(min(self.key_length, len(context)), 0, -1):
            if len(found) >= limit:
                break
            bucket = self._indexes[length - 1].get(tuple(context[-length:]))
            if bucket:
                for continuation in self._select(bucket, limit):
                    if continuation not in found and len(found) < limit:
                        found.append(continuation)
        return found

    def start(self, prompt: Sequence[int]) -> None:
        if not self.persistent:
            self.reset()
        if self.seed_prompt:
            self._add_ngrams_ending(prompt, range(self.span, len(prompt)))

    def join(self, prompt: Sequence[int]) -> None:
        if self.seed_prompt:
            self._add_ngrams_ending(prompt, range(self.span, len(prompt)))

    def observe(self, sequence: Sequence[int], new_tokens: int) -> None:
        if self.seed_output:
            self._add_ngrams_ending(
                sequence, range(max(self.span, len(sequence) - new_tokens), len(sequence))
            )

    def record_hit(self, context: Sequence[int], continuation: tuple[int, ...]) -> None:
        for length in range(1, min(self.key_length, len(context)) + 1):
            bucket = self._indexes[length - 1].get(tuple(context[-length:]))
            if bucket is not None and continuation in bucket:
                bucket[continuation] = replace(bucket[continuation], hits=bucket[continuation].hits + 1)

    def harvested(self, context: Sequence[int], continuations: Sequence[tuple[int, ...]]) -> list[bool]:
        flags = []
        for continuation in continuations:
            flag = False
            for length in range(min(self.key_length, len(context)), 0, -1):
                entry = self._indexes[length - 1].get(tuple(context[-length:]), {}).get(continuation)
                if entry is not None:
                    flag = entry.harvested
                    break
            flags.append(flag)
        return flags

    def confidence(self, context: Sequence[int], continuations: Sequence[tuple[int, ...]]) -> int:
        """``2 * depth + hit``: depth is the longest key (1..k tokens of context) with stored n-grams,
        hit whether the first candidate was accepted before. 0 when nothing is stored."""
        for length in range(min(self.key_length, len(context)), 0, -1):
            bucket = self._indexes[length - 1].get(tuple(context[-length:]))
            if bucket:
                first = bucket.get(continuations[0]) if continuations else None
                return 2 * length + int(first is not None and first.hits > 0)
        return 0

    def reset(self) -> None:
        for index in self._indexes:
            index.clear()
        self._sizes = [0] * self.key_length
        self._tick = 0
        if hasattr(self.eviction, "reset"):
            self.eviction.reset()

    # ------------------------------------------------------------------ inspection

    def __len__(self) -> int:
        """Stored n-grams (under their one-token keys)."""
        return self._sizes[0]

    def bucket(self, key: int | Sequence[int]) -> list[tuple[int, ...]]:
        """Continuations stored under ``key`` (a token or a tuple of tokens), oldest touched first."""
        key = (key,) if isinstance(key, int) else tuple(key)
        return list(self._indexes[len(key) - 1].get(key, {}))

    # ------------------------------------------------------------------ internals

    def _add_ngrams_ending(self, sequence: Sequence[int], ends: range) -> None:
        """Add the n-grams of 1 + ``span`` tokens of ``sequence`` that end at the positions ``ends``,
        with left context."""
        context, size = self.key_length - 1, self.span + 1
        self._add([sequence[max(0, end + 1 - size - context) : end + 1] for end in ends], False, size)

    def _select(self, bucket: Bucket, limit: int) -> list[tuple[int, ...]]:
        if self.selection == "recent":
            return list(bucket)[-limit:]
        ranked = sorted(bucket, key=lambda c: (bucket[c].hits, bucket[c].touched), reverse=True)
        return ranked[:limit]

    def _insert(
        self, length: int, key: tuple[int, ...], continuation: tuple[int, ...], harvested: bool
    ) -> None:
        self._tick += 1
        if self.capacity == 0:  # nothing would ever be verified from it
            return
        index = self._indexes[length - 1]
        bucket = index.setdefault(key, {})
        entry = bucket.pop(continuation, None)
        if entry is not None:  # re-insertion: move to the most recent end, keep its history
            bucket[continuation] = replace(entry, touched=self._tick, harvested=entry.harvested and harvested)
            return
        if self.capacity is not None and len(bucket) >= self.capacity:
            stored = list(bucket)
            victim = self.eviction.victim([bucket[c] for c in stored])
            if victim is not None:
                del bucket[stored[victim]]
                self._sizes[length - 1] -= 1
        bucket[continuation] = EntryStats(
            inserted=self._tick, touched=self._tick, hits=0, harvested=harvested
        )
        self._sizes[length - 1] += 1
        if self.global_capacity is not None and self._sizes[length - 1] > self.global_capacity:
            self._evict_globally(index, length)

    def _evict_globally(self, index: dict[tuple[int, ...], Bucket], length: int) -> None:
        """Drop one entry chosen by the eviction policy among all entries of this key length."""
        everything = [(key, continuation) for key, bucket in index.items() for continuation in bucket]
        victim = self.eviction.victim([index[key][continuation] for key, continuation in everything])
        if victim is None:
            return
        key, continuation = everything[victim]
        del index[key][continuation]
        if not index[key]:
            del index[key]
        self._sizes[length - 1] -= 1
