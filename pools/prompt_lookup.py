"""Prompt lookup decoding as a pool: candidates copied from earlier occurrences of the last tokens."""

from __future__ import annotations

from collections.abc import Sequence

from lade.interfaces import NGramPool


class PromptLookupPool(NGramPool):
    """Serves the N-1 tokens that followed earlier occurrences of the last ``m`` committed tokens.

    As in prompt lookup decoding (Saxena 2023; ``prompt_lookup_num_tokens`` in transformers), the
    sequence searched is the prompt plus the output so far. ``m`` goes from ``max_match`` down to
    ``min_match``; the first length with any match wins, and its matches are served most recent
    first, distinct, at most ``limit``. It ignores harvested n-grams: pair it with a proposer
    without lookahead branch (``proposer=prompt_lookup``) for the classic method.
    """

    fed_by_branch = False

    def __init__(self, ngram: int, max_match: int = 3, min_match: int = 1):
        if isinstance(ngram, bool) or not isinstance(ngram, int) or ngram < 2:
            raise ValueError(f"ngram must be an integer >= 2, got {ngram!r}")
        if not 1 <= min_match <= max_match:
            raise ValueError(f"need 1 <= min_match <= max_match, got {min_match}, {max_match}")
        self.ngram = ngram
        self.max_match = max_match
        self.min_match = min_match
        self.key_length = max_match
        self._sequence: list[int] = []
        self._matched = 0  # match length behind the latest candidates

    def add(self, ngrams: Sequence[Sequence[int]]) -> None:
        return None

    def start(self, prompt: Sequence[int]) -> None:
        self._sequence = list(prompt)

    def observe(self, sequence: Sequence[int], new_tokens: int) -> None:
        self._sequence.extend(sequence[len(sequence) - new_tokens :])

    def candidates(self, context: Sequence[int], limit: int) -> list[tuple[int, ...]]:
        sequence, length = self._sequence, self.ngram - 1
        for match in range(min(self.max_match, len(sequence) - 1), self.min_match - 1, -1):
            pattern = sequence[-match:]
            found: list[tuple[int, ...]] = []
            for start in range(len(sequence) - match - 1, -1, -1):  # most recent occurrence first
                if sequence[start : start + match] == pattern:
                    continuation = tuple(sequence[start + match : start + match + length])
                    if len(continuation) == length and continuation not in found:
                        found.append(continuation)
                        if len(found) >= limit:
                            return found
            if found:
                self._matched = match
                return found
        self._matched = 0
        return []

    def confidence(self, context: Sequence[int], continuations: Sequence[tuple[int, ...]]) -> int:
        """How many of the last tokens the candidates were matched on (0: no match)."""
        return self._matched

    def reset(self) -> None:
        self._sequence = []
        self._matched = 0
