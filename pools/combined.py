"""Several draft sources behind one pool, for the auto planner to choose among step by step.

Each source is a pool of its own (the lookahead branch's n-gram pool, a suffix tree, Token Recycling's
table, prompt lookup): every one of them sees what the loop tells a pool (the prompt, each step's
commits and logits, the branch's n-grams), so each stays as it would be on its own. Each step the
auto planner reads every source's candidates (``offers``), keeps acceptance records per source, and
verifies the candidates of the source with the most predicted tokens per second
(``lade.source_choice``). Without a planner (fixed G) a step verifies ``candidates``: the sources'
candidates taken in turn, best first, without repeats.

With ``merged`` (the default, for two sources or more) the planner is offered one more source,
``MergedSources``: those same candidates taken together. Verified as one token trie, a step can then
hold whichever source turns out right at that position, for the price of the trie's extra nodes; its
counterfactual records say, like any source's, when that pays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from lade.interfaces import NGramPool


class CombinedPool(NGramPool):
    """Draft sources named by ``sources`` (name -> pool, in priority order: ties go to the first).

    ``persistent`` when any source is: the pool is then used itself by every call, and each source's
    own ``start`` decides what it keeps (a non-persistent source starts afresh, as when copied).
    ``span`` is the longest a source offers; ``key_length`` the longest context a source wants.
    ``merged``: offer the planner the sources' candidates together as well (``MergedSources``).
    """

    def __init__(self, sources: Mapping[str, NGramPool], merged: bool = True):
        if not sources:
            raise ValueError("a combined pool needs at least one source")
        for name, source in sources.items():
            if not isinstance(source, NGramPool):
                raise ValueError(f"source {name!r} is a {type(source).__name__}, not an NGramPool")
        ngrams = {getattr(source, "ngram", None) for source in sources.values()} - {None}
        if len(ngrams) > 1:
            raise ValueError(f"the sources have different ngram sizes {sorted(ngrams)}")
        self.sources = dict(sources)
        self.names = tuple(self.sources)
        if ngrams:
            self.ngram = ngrams.pop()
        self.span = max(getattr(s, "span", getattr(s, "ngram", 2) - 1) for s in self.sources.values())
        self.key_length = max(source.key_length for source in self.sources.values())
        self.reads_logits = any(source.reads_logits for source in self.sources.values())
        self.persistent = any(getattr(source, "persistent", False) for source in self.sources.values())
        self.merged = merged and len(self.sources) > 1
        # the sources the auto planner chooses among, by name: each source, then all of them together
        self.planned: dict[str, NGramPool] = dict(self.sources)
        if self.merged:
            self.planned[MERGED] = MergedSources(self)

    def offers(self, context: Sequence[int], limit: int) -> list[list[tuple[int, ...]]]:
        """Each source's candidates after ``context`` (at most ``limit`` each), in ``names`` order."""
        return [self._candidates_of(source, context, limit) for source in self.sources.values()]

    def candidates(self, context: Sequence[int], limit: int) -> list[tuple[int, ...]]:
        """The sources' candidates in turn (every source's first, then every second, ...), repeats
        dropped, at most ``limit``."""
        merged: dict[tuple[int, ...], None] = {}
        offers = self.offers(context, limit)
        for rank in range(limit):
            for offered in offers:
                if rank < len(offered):
                    merged.setdefault(offered[rank])
        return list(merged)[:limit]

    def harvested(self, context: Sequence[int], continuations: Sequence[tuple[int, ...]]) -> list[bool]:
        """Harvested by the branch when any source fed by it says so."""
        flags = [False] * len(continuations)
        for source in self.sources.values():
            for i, flag in enumerate(source.harvested(context[-source.key_length :], continuations)):
                flags[i] = flags[i] or flag
        return flags

    def add(self, ngrams: Sequence[Sequence[int]]) -> None:
        for source in self.sources.values():
            source.add(ngrams)

    def start(self, prompt: Sequence[int]) -> None:
        for source in self.sources.values():
            source.start(prompt)

    def join(self, prompt: Sequence[int]) -> None:
        for source in self.sources.values():
            source.join(prompt)

    def observe(self, sequence: Sequence[int], new_tokens: int) -> None:
        for source in self.sources.values():
            source.observe(sequence, new_tokens)

    def record_hit(self, context: Sequence[int], continuation: tuple[int, ...]) -> None:
        for source in self.sources.values():
            source.record_hit(context[-source.key_length :], continuation)

    def observe_logits(self, tokens: Sequence[int], logits: torch.Tensor) -> None:
        for source in self.sources.values():
            if source.reads_logits:
                source.observe_logits(tokens, logits)

    def reset(self) -> None:
        for source in self.sources.values():
            source.reset()

    def __len__(self) -> int:
        return sum(len(source) for source in self.sources.values() if hasattr(source, "__len__"))

    @staticmethod
    def _candidates_of(source: NGramPool, context: Sequence[int], limit: int) -> list[tuple[int, ...]]:
        return source.candidates(context[-source.key_length :], limit)


MERGED = "merged"  # the name of the sources taken together, among a combined pool's planned sources


class MergedSources(NGramPool):
    """A combined pool's sources taken together, as one more draft source for the auto planner: its
    candidates are ``CombinedPool.candidates`` (every source's first, then every second, ..., repeats
    dropped). A view: what the loop tells a pool goes to the combined pool and its sources, so this
    keeps nothing of its own. The branch is credited to the lookahead source's own planner, not to
    this one (``fed_by_branch`` False), so one planner keeps the branch's state."""

    fed_by_branch = False

    def __init__(self, combined: CombinedPool):
        self.combined = combined
        self.key_length = combined.key_length
        self.ngram = getattr(combined, "ngram", 2)

    def candidates(self, context: Sequence[int], limit: int) -> list[tuple[int, ...]]:
        return self.combined.candidates(context, limit)

    def harvested(self, context: Sequence[int], continuations: Sequence[tuple[int, ...]]) -> list[bool]:
        return self.combined.harvested(context, continuations)

    def add(self, ngrams: Sequence[Sequence[int]]) -> None:
        """Nothing: the combined pool's sources take the n-grams."""


def draft_sources(pool: NGramPool) -> list[NGramPool]:
    """The pools a planner keeps records for: a combined pool's planned sources (its sources, and
    them together when ``merged``), else the pool itself."""
    return list(pool.planned.values()) if isinstance(pool, CombinedPool) else [pool]


def draft_names(pool: NGramPool) -> list[str]:
    """The names of ``draft_sources(pool)``, in their order (an ordinary pool's: its class name)."""
    return list(pool.planned) if isinstance(pool, CombinedPool) else [type(pool).__name__]
