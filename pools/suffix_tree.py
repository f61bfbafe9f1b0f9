"""Suffix-tree drafts as a pool (after SuffixDecoding, Oliaro et al. 2025): candidates are what followed
earlier occurrences of the longest suffix of the text that occurred before, ranked by frequency.

Two indexes: one over this call's prompt and output, rebuilt every call, and a bounded global one over
earlier calls' outputs (kept across calls when ``persistent``), so repeated requests and agentic loops
draft from what the model wrote before. Each index is a suffix trie cut at ``max_depth`` tokens: the
node of a path of k tokens holds the positions where that path ended (``SuffixIndex``), so the
longest match is found in at most ``max_depth`` lookups and its continuations are read from the text.
The global index keeps each output a document of its own: no path and no continuation runs from the
end of one output into the start of the next, text the model never wrote in that order.
Memory is the text plus at most ``max_depth`` positions per token (``memory_entries`` reports it); the
global index holds at most ``global_tokens`` tokens, the oldest outputs dropped first.
"""

from __future__ import annotations

import copy
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence

from lade.interfaces import NGramPool


class SuffixIndex:
    """A suffix trie of a growing token text, cut at ``max_depth`` tokens.

    The text is a series of documents (``starts``: where each begins); paths do not cross from one into
    the next. ``ends[path]``: the positions right after each occurrence of ``path`` (1 to ``max_depth``
    tokens) in the text, in text order; a position is where the continuation of that occurrence starts.
    """

    def __init__(self, max_depth: int):
        self.max_depth = max_depth
        self.text: list[int] = []
        self.ends: dict[tuple[int, ...], list[int]] = {}
        self.starts: list[int] = [0]

    def extend(self, tokens: Sequence[int], new_document: bool = False) -> None:
        """Append ``tokens`` to the text (as a new document, if asked and the text is not empty),
        indexing every path that ends at each new position within its document."""
        if new_document and len(self.text) > self.starts[-1]:
            self._close_document()
        for token in tokens:
            self.text.append(token)
            end = len(self.text)
            for depth in range(1, min(self.max_depth, end - self.starts[-1]) + 1):
                self.ends.setdefault(tuple(self.text[end - depth : end]), []).append(end)

    def longest_match(self, pattern: Sequence[int], before: int) -> tuple[int, list[int]]:
        """The longest suffix of ``pattern`` (up to ``max_depth`` tokens) that occurs in the text ending
        before position ``before`` with at least one token after it in its document: ``(its length, the
        positions after those occurrences)``; ``(0, [])`` when not even its last token does."""
        best: tuple[int, list[int]] = (0, [])
        for depth in range(1, min(self.max_depth, len(pattern)) + 1):
            ends = self.ends.get(tuple(pattern[len(pattern) - depth :]), [])
            found = ends[: bisect_left(ends, before)]  # ends are in text order
            if not found:
                break  # a longer suffix cannot occur where this one does not
            best = (depth, found)
        return best

    def _close_document(self) -> None:
        """End the current document: forget the occurrences that end at its last token (nothing follows
        them there, so no lookup should find them) and start the next one at the text's end."""
        end = len(self.text)
        for depth in range(1, min(self.max_depth, end - self.starts[-1]) + 1):
            path = tuple(self.text[end - depth : end])
            self.ends[path].pop()  # ``end`` is the last position appended: the list's last entry
            if not self.ends[path]:
                del self.ends[path]
        self.starts.append(end)

    def continuation(self, end: int, length: int) -> tuple[int, ...]:
        """Up to ``length`` tokens from position ``end`` on, within the document they start in."""
        following = bisect_right(self.starts, end)
        stop = self.starts[following] if following < len(self.starts) else len(self.text)
        return tuple(self.text[end : min(end + length, stop)])

    def memory_entries(self) -> int:
        """Tokens of text plus positions held: the index's size in list entries."""
        return len(self.text) + sum(len(ends) for ends in self.ends.values())


class SuffixTreePool(NGramPool):
    """Candidates from the suffix indexes of this call's text and of earlier calls' outputs.

    For the last committed tokens, the longest earlier match of length m (at most ``max_depth``) is
    found in this call's text, else in the global index; the continuations after its occurrences are
    counted, and the distinct ones served most frequent first (ties: the most recent), each of
    ``min(span, max(min_length, length_per_match * m))`` tokens: longer matches draft longer, as in
    SuffixDecoding. The branch's harvested n-grams are ignored (``add``): pair it with
    ``proposer=prompt_lookup`` or use it with auto, which runs the branch where it pays.

    Args:
        ngram: N of the decoder (candidates of N-1 tokens unless ``span`` is set).
        span: the most tokens a candidate offers (default N-1); the decoder verifies up to it.
        max_depth: the longest match looked for.
        min_length, length_per_match: candidate length for a match of m tokens.
        global_tokens: the most output tokens the global index keeps (0: no global index).
        persistent: keep the global index across ``generate`` calls.
    """

    fed_by_branch = False

    def __init__(
        self,
        ngram: int,
        span: int | None = None,
        max_depth: int = 8,
        min_length: int = 2,
        length_per_match: int = 2,
        global_tokens: int = 65536,
        persistent: bool = False,
    ):
        if isinstance(ngram, bool) or not isinstance(ngram, int) or ngram < 2:
            raise ValueError(f"ngram must be an integer >= 2, got {ngram!r}")
        if min(max_depth, min_length, length_per_match) < 1 or global_tokens < 0:
            raise ValueError("max_depth, min_length, length_per_match must be >= 1 and global_tokens >= 0")
        self.ngram = ngram
        self.span = ngram - 1 if span is None else span
        if self.span < 1:
            raise ValueError(f"span must be >= 1, got {span}")
        self.max_depth = max_depth
        self.key_length = max_depth
        self.min_length = min_length
        self.length_per_match = length_per_match
        self.global_tokens = global_tokens
        self.persistent = persistent
        self._local = SuffixIndex(max_depth)
        self._global = SuffixIndex(max_depth)
        self._outputs: list[list[int]] = []  # the outputs the global index holds, oldest first
        self._prompt_length = 0
        self._matched = 0

    def add(self, ngrams: Sequence[Sequence[int]]) -> None:
        return None

    def start(self, prompt: Sequence[int]) -> None:
        if self.persistent:
            self._retire_output()
        else:  # the global index then only ever holds nothing
            self._global, self._outputs = SuffixIndex(self.max_depth), []
        self._local = SuffixIndex(self.max_depth)
        self._local.extend(prompt)
        self._prompt_length = len(prompt)

    def observe(self, sequence: Sequence[int], new_tokens: int) -> None:
        self._local.extend(sequence[len(sequence) - new_tokens :])

    def candidates(self, context: Sequence[int], limit: int) -> list[tuple[int, ...]]:
        text = self._local.text
        for index in (self._local, self._global):  # this call's text first (its own end excluded)
            matched, ends = index.longest_match(text[-self.max_depth :], len(index.text))
            if matched:
                self._matched = matched
                return self._ranked(index, ends, matched, limit)
        self._matched = 0
        return []

    def confidence(self, context: Sequence[int], continuations: Sequence[tuple[int, ...]]) -> int:
        """The match length behind the latest candidates, in classes 0 (none), 1, 2, 3-4, 5+."""
        matched = self._matched
        return 0 if not continuations else min(matched, 3) if matched < 5 else 4

    def reset(self) -> None:
        self._local, self._global, self._outputs = (
            SuffixIndex(self.max_depth),
            SuffixIndex(self.max_depth),
            [],
        )
        self._prompt_length = 0

    def text_replica(self) -> SuffixTreePool:
        """This pool as it stands, its call's index copied and the global index shared (a replica
        only reads it: ``start`` is never called on one)."""
        replica = copy.copy(self)
        replica._local = SuffixIndex(self.max_depth)
        replica._local.extend(self._local.text)
        return replica

    def memory_entries(self) -> int:
        """Entries both indexes hold (tokens of text plus positions): what bounds the pool's memory."""
        return self._local.memory_entries() + self._global.memory_entries()

    def __len__(self) -> int:
        return len(self._local.text) + len(self._global.text)

    def _ranked(self, index: SuffixIndex, ends: list[int], matched: int, limit: int) -> list[tuple[int, ...]]:
        """The distinct continuations after ``ends`` in ``index``, most frequent first (ties: most
        recent)."""
        length = min(self.span, max(self.min_length, self.length_per_match * matched))
        continuations = [index.continuation(end, length) for end in reversed(ends)]  # most recent first
        counts = Counter(c for c in continuations if c)
        order = {c: i for i, c in reversed(list(enumerate(continuations)))}  # first (most recent) index
        ranked = sorted(counts, key=lambda c: (-counts[c], order[c]))
        return ranked[:limit]

    def _retire_output(self) -> None:
        """Move the finished call's output into the global index, dropping the oldest beyond the bound."""
        output = self._local.text[self._prompt_length :]
        if not output or self.global_tokens == 0:
            return
        self._outputs.append(output)
        if sum(len(o) for o in self._outputs) <= self.global_tokens:  # nothing to drop: extend in place
            self._global.extend(output, new_document=True)
            return
        while sum(len(o) for o in self._outputs) > self.global_tokens and len(self._outputs) > 1:
            self._outputs.pop(0)
        if sum(len(o) for o in self._outputs) > self.global_tokens:
            self._outputs[0] = self._outputs[0][-self.global_tokens :]
        self._global = SuffixIndex(self.max_depth)
        for kept in self._outputs:
            self._global.extend(kept, new_document=True)
