"""The call's most frequent tokens as one-token candidates: a draft source for steps no other has.

Where a step's last token is new to the text (a translation, a first mention), the n-gram pool, the
suffix tree and Token Recycling's table have nothing to offer, and the step feeds one token. On some
CPUs a one-token step is not the cheapest: Qwen2.5-Coder-1.5B in bfloat16 on an AVX512-BF16 EPYC took
longer for one new token than for two or three (``experiments/results/step_costs/qwen15_bf16_dev``),
so a second token costs nothing there, and a guess that sometimes holds is a gain. This source offers
the tokens seen most often in the prompt and output so far, at every step; the auto planner's records
of their acceptance and the latency curve decide when a step verifies one (where the other sources
have candidates, theirs usually pay more).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from lade.interfaces import NGramPool


class FrequentTokensPool(NGramPool):
    """The ``limit`` tokens most frequent in the call's text (prompt + output), one token each, most
    frequent first (ties: the one seen first). Ignores the branch's n-grams (``fed_by_branch`` False)."""

    fed_by_branch = False
    key_length = 1

    span = 1  # tokens per candidate

    def __init__(self):
        self._counts: Counter[int] = Counter()

    def add(self, ngrams: Sequence[Sequence[int]]) -> None:
        return None

    def start(self, prompt: Sequence[int]) -> None:
        self._counts = Counter(prompt)

    def join(self, prompt: Sequence[int]) -> None:
        self._counts.update(prompt)

    def observe(self, sequence: Sequence[int], new_tokens: int) -> None:
        self._counts.update(sequence[len(sequence) - new_tokens :])

    def candidates(self, context: Sequence[int], limit: int) -> list[tuple[int, ...]]:
        return [(token,) for token, _ in self._counts.most_common(limit)]

    def reset(self) -> None:
        self._counts = Counter()

    def __len__(self) -> int:
        return len(self._counts)
