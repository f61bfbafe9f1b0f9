"""Token Recycling (Luo et al. 2024) as a pool: drafts from the runner-up tokens of earlier steps.

Every step computes logits after each token it feeds (the last committed token and each candidate
token); their top-k are the tokens the model found likely next, most of which a step then throws
away. Token Recycling keeps them: an adjacency table maps each token id to the top-k tokens the model
predicted after it, the latest prediction replacing the older. Candidates are the root-to-leaf paths
of a draft tree grown from the last committed token along the table (``pools.draft_tree``): either a
static shape (``branching``: children per node at each depth, as the paper's template) or the
``nodes`` likeliest nodes, by how often the model's next token had each rank in the table so far.
Merged into a token trie (``lade.trie``), the paths are that tree, verified in one pass. No extra
forward: the table is filled from logits the step computed anyway (``observe_logits``, called by the
decoding loop).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lade.interfaces import NGramPool
from pools.draft_tree import RankAcceptance, likeliest_tree, uniform_tree

CPU_BRANCHING = (4, 2, 2, 1, 1)  # a small tree for CPUs: 4 + 8 + 16 + 16 + 16 = 60 nodes at most, 16 paths
# Chances per rank that the likeliest tree starts from, before a pool has counted its own (weighted as
# 64 observations): a fast decay, the shape SmolLM2's tables show on development prompts
# (experiments/results/token_recycling/shapes.md); soon replaced by what the pool measures.
RANK_PRIOR = (0.35, 0.1, 0.05, 0.03, 0.02, 0.015, 0.01, 0.01)
REBUILD_EVERY = 64  # observations between two rebuilds of the likeliest tree (a rebuild is ~0.1 ms)
TOP_K_BLOCK = 256  # vocabulary entries per block of ``top_k_indices``' first pass


def top_k_indices(logits: torch.Tensor, k: int, block: int = TOP_K_BLOCK) -> torch.Tensor:
    """LongTensor [R, k]: the indices of the k largest of each row of ``logits`` [R, V], largest first,
    the same values as ``logits.topk(k)`` gives (which of equal values comes first may differ).

    Two passes, because a CPU's ``topk`` over a whole vocabulary costs several times one ``amax``
    pass, on every step of Token Recycling: the maximum of each block of ``block`` entries, the k
    blocks with the largest maxima, then the top k among those blocks' entries (and the entries past
    the last whole block). Exact: an entry above the k-th largest value t lies in a block whose
    maximum exceeds t, and there are fewer than k such blocks, so all are kept; the other kept blocks
    each hold an entry equal to t, as many as the top k needs. A vocabulary of fewer than 4k blocks
    takes ``topk`` directly."""
    rows, vocab = logits.shape
    blocks = vocab // block
    if blocks < 4 * k:
        return logits.topk(k, dim=-1).indices
    whole = blocks * block
    maxima = logits[:, :whole].unflatten(-1, (blocks, block)).amax(dim=-1)  # [R, blocks]
    kept = maxima.topk(k, dim=-1).indices  # [R, k]
    offsets = torch.arange(block, device=logits.device)
    index = (kept[..., None] * block + offsets).flatten(1)  # [R, k * block]
    if whole < vocab:  # the entries past the last whole block are always among those compared
        tail = torch.arange(whole, vocab, device=logits.device).expand(rows, -1)
        index = torch.cat([index, tail], dim=1)
    return index.gather(1, logits.gather(1, index).topk(k, dim=-1).indices)


class TokenRecyclingPool(NGramPool):
    """Candidates from an adjacency table of each token's top-k next tokens, expanded as a draft tree.

    ``candidates(context, limit)`` grows the tree from ``context[-1]``: each leaf of the shape
    (``pools.draft_tree``) is followed along the table rows, rank by rank; a token never seen has no
    row, and a path through it ends there. Paths come in the shape's order (the top-ranked path first
    for ``branching``, the likeliest first for ``nodes``), so the first g candidates are the best
    g-path subtree. The branch's harvested n-grams are ignored (``add``): pair it with a proposer
    without a lookahead branch (``proposer=token_recycling``).

    Args:
        ngram: N of the decoder.
        branching: children per node at each depth (a static tree); its length is the candidates'
            length (``span``). Ignored when ``nodes`` is set.
        top_k: next tokens kept per table row (default: the widest branching; 8 with ``nodes``).
        persistent: keep the table (and the rank counts) across ``generate`` calls, as the paper keeps
            the table across queries.
        nodes: grow the ``nodes`` likeliest nodes instead (``likeliest_tree``), by the chance of each
            rank measured so far (``rank_acceptance``), rebuilt as the counts grow.
        depth: with ``nodes``, the deepest level (the candidates' length).
    """

    reads_logits = True
    fed_by_branch = False

    def __init__(
        self,
        ngram: int,
        branching: Sequence[int] = CPU_BRANCHING,
        top_k: int | None = None,
        persistent: bool = True,
        nodes: int | None = None,
        depth: int = 8,
    ):
        if isinstance(ngram, bool) or not isinstance(ngram, int) or ngram < 2:
            raise ValueError(f"ngram must be an integer >= 2, got {ngram!r}")
        self.ngram = ngram
        self.nodes = nodes
        self.persistent = persistent
        if nodes is None:
            self.branching = tuple(branching)
            self._leaves = uniform_tree(self.branching)  # checks the widths
            self.span = len(self.branching)
            self.top_k = max(self.branching) if top_k is None else top_k
            if self.top_k < max(self.branching):
                raise ValueError(f"top_k {self.top_k} is below the widest branching {max(self.branching)}")
        else:
            self.top_k = len(RANK_PRIOR) if top_k is None else top_k
            if isinstance(top_k, bool) or self.top_k < 1:
                raise ValueError(f"top_k must be an integer >= 1, got {top_k!r}")
            self.span = depth
        self.ranks = RankAcceptance((RANK_PRIOR + (0.0,) * self.top_k)[: self.top_k])
        self._table: dict[int, tuple[int, ...]] = {}
        self._built_at = -1
        self._shape()  # builds the likeliest tree, which checks nodes and depth

    def add(self, ngrams: Sequence[Sequence[int]]) -> None:
        return None

    def start(self, prompt: Sequence[int]) -> None:
        if not self.persistent:
            self.reset()

    def join(self, prompt: Sequence[int]) -> None:
        """A batch's rows may share the table: it holds what follows a token, whatever the text."""

    def observe_logits(self, tokens: Sequence[int], logits: torch.Tensor) -> None:
        """The step fed ``tokens`` [R] and computed ``logits`` [R, V] after each: each token's table row
        becomes the top-k of its logits (and the rank its argmax had in the old row is counted)."""
        top = top_k_indices(logits, self.top_k).tolist()
        for token, following in zip(tokens, top, strict=True):
            token = int(token)
            old = self._table.get(token)
            if old is not None:
                self.ranks.count(old, following[0])
            self._table[token] = tuple(following)

    def rank_acceptance(self) -> list[float]:
        """[top_k] the chance, measured so far (blended with the prior), that the model's next token
        is a row's rank-r token."""
        return self.ranks.estimate()

    def candidates(self, context: Sequence[int], limit: int) -> list[tuple[int, ...]]:
        paths: dict[tuple[int, ...], None] = {}
        for ranks in self._shape():
            if len(paths) >= limit:
                break
            path, last = [], context[-1]
            for rank in ranks:
                row = self._table.get(last)
                if row is None:
                    break  # the table knows nothing after it: a shorter path
                if rank >= len(row):
                    path = []  # no such child
                    break
                last = row[rank]
                path.append(last)
            if path:
                paths.setdefault(tuple(path))
        return list(paths)

    def reset(self) -> None:
        self._table = {}
        self.ranks.reset()
        self._built_at = -1

    def __len__(self) -> int:
        return len(self._table)

    def _shape(self) -> list[tuple[int, ...]]:
        """The leaves to follow: the static shape, or the likeliest tree, rebuilt every
        ``REBUILD_EVERY`` observations."""
        stale = self._built_at < 0 or self.ranks.seen - self._built_at >= REBUILD_EVERY
        if self.nodes is not None and stale:
            self._leaves = likeliest_tree(self.nodes, self.ranks.estimate(), self.span)
            self._built_at = self.ranks.seen
        return self._leaves
