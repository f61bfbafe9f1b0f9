"""Token Recycling (Luo et al. 2024) as a pool: drafts from the runner-up tokens of earlier steps.

Every step computes logits after each token it feeds (the last committed token and each candidate
token); their top-k are the tokens the model found likely next, most of which a step then throws
away. Token Recycling keeps them: an adjacency table maps each token id to the top-k tokens the model
predicted after it, the latest prediction replacing the older. Candidates are the root-to-leaf paths
of a draft tree grown breadth-first from the last committed token along the table, with a static
shape (``branching``: children per node at each depth); merged into a token trie
(``lade.trie``), the paths are that tree, verified in one pass. No extra forward: the table is filled
from logits the step computed anyway (``observe_logits``, called by the decoding loop).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lade.interfaces import NGramPool

CPU_BRANCHING = (4, 2, 2, 1, 1)  # a small tree for CPUs: 4 + 8 + 16 + 16 + 16 = 60 nodes at most, 16 paths


class TokenRecyclingPool(NGramPool):
    """Candidates from an adjacency table of each token's top-k next tokens, expanded as a draft tree.

    ``candidates(context, limit)`` grows the tree from ``context[-1]``: at depth d each node gets the
    first ``branching[d]`` tokens of its table row (a token never seen has no children, and its path
    ends there); the paths are served in rank order (the path of the top-ranked tokens first), so the
    first g candidates are the best g-path subtree. The branch's harvested n-grams are ignored
    (``add``): pair it with a proposer without a lookahead branch (``proposer=token_recycling``).

    Args:
        ngram: N of the decoder.
        branching: children per node at each depth; its length is the candidates' length (``span``).
        top_k: next tokens kept per table row (default: the widest branching).
        persistent: keep the table across ``generate`` calls (as the paper keeps it across queries).
    """

    reads_logits = True
    fed_by_branch = False

    def __init__(
        self,
        ngram: int,
        branching: Sequence[int] = CPU_BRANCHING,
        top_k: int | None = None,
        persistent: bool = True,
    ):
        if isinstance(ngram, bool) or not isinstance(ngram, int) or ngram < 2:
            raise ValueError(f"ngram must be an integer >= 2, got {ngram!r}")
        branching = tuple(branching)
        if not branching or min(branching) < 1:
            raise ValueError(f"branching needs one width >= 1 per depth, got {branching}")
        self.ngram = ngram
        self.branching = branching
        self.span = len(branching)
        self.top_k = max(branching) if top_k is None else top_k
        if self.top_k < max(branching):
            raise ValueError(f"top_k {self.top_k} is below the widest branching {max(branching)}")
        self.persistent = persistent
        self._table: dict[int, tuple[int, ...]] = {}

    def add(self, ngrams: Sequence[Sequence[int]]) -> None:
        return None

    def start(self, prompt: Sequence[int]) -> None:
        if not self.persistent:
            self.reset()

    def join(self, prompt: Sequence[int]) -> None:
        """A batch's rows may share the table: it holds what follows a token, whatever the text."""

    def observe_logits(self, tokens: Sequence[int], logits: torch.Tensor) -> None:
        """The step fed ``tokens`` [R] and computed ``logits`` [R, V] after each: each token's table row
        becomes the top-k of its logits."""
        top = logits.topk(self.top_k, dim=-1).indices.tolist()
        for token, following in zip(tokens, top, strict=True):
            self._table[int(token)] = tuple(following)

    def candidates(self, context: Sequence[int], limit: int) -> list[tuple[int, ...]]:
        ranked: list[tuple[tuple[int, ...], tuple[int, ...]]] = []  # (ranks along the path, path)
        frontier: list[tuple[int, tuple[int, ...], tuple[int, ...]]] = [(context[-1], (), ())]
        for width in self.branching:
            grown = []
            for last, path, ranks in frontier:
                children = self._table.get(last, ())[:width]
                if not children and path:
                    ranked.append((ranks, path))  # the table knows nothing after it: a shorter path
                grown.extend((child, (*path, child), (*ranks, rank)) for rank, child in enumerate(children))
            frontier = grown
        ranked.extend((ranks, path) for _, path, ranks in frontier)
        ranked.sort()  # lexicographic in the ranks: the top-ranked path first
        return [path for _, path in ranked[:limit]]

    def reset(self) -> None:
        self._table = {}

    def __len__(self) -> int:
        return len(self._table)
