"""Shapes of Token Recycling's draft tree, as rank paths: which children of which nodes it grows.

A draft tree is grown from the last committed token along a table of each token's ranked next tokens
(``pools.token_recycling``). Its shape is a set of *rank paths*: ``(0, 2)`` is the third-ranked token
after the top-ranked token after the root. The shape is prefix-closed, and a shape is given by its
leaves (every node lies on the path to one), served as candidates in the order listed.

Two shapes:

* ``uniform_tree(branching)``: every node at depth d gets ``branching[d]`` children (a static
  template, as the paper's), leaves in rank order.
* ``likeliest_tree(nodes, acceptance, depth)``: the ``nodes`` nodes most likely to be accepted. If
  the model's next token is the table's rank-r token with chance ``acceptance[r]``, independently
  at each depth, a node is accepted with the product of its path's chances, and the expected number
  of accepted draft tokens is the sum of its nodes' chances; the ``nodes`` likeliest nodes are
  therefore the best tree of that size (a node is never likelier than its parent, so they form a
  tree). Leaves come likeliest first, so the first g leaves span the best g-leaf subtree.

``RankAcceptance`` measures the chances as a pool decodes: each time the model's logits after a token
are seen, the rank its argmax had in that token's earlier row.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

RankPath = tuple[int, ...]


def uniform_tree(branching: Sequence[int]) -> list[RankPath]:
    """The leaves of the tree whose nodes at depth d have ``branching[d]`` children, in rank order
    (lexicographic in the ranks: the path of the top-ranked tokens first)."""
    if not branching or min(branching) < 1:
        raise ValueError(f"branching needs one width >= 1 per depth, got {tuple(branching)}")
    leaves: list[RankPath] = [()]
    for width in branching:
        leaves = [(*path, rank) for path in leaves for rank in range(width)]
    return leaves


def likeliest_tree(nodes: int, acceptance: Sequence[float], depth: int) -> list[RankPath]:
    """The leaves of the ``nodes``-node tree of the highest summed acceptance chance, likeliest first.

    Args:
        nodes: tree size (tokens the full tree feeds).
        acceptance: [k] chance that the model's next token is a row's rank-r token (children per node
            at most k).
        depth: deepest level (the candidates' length).
    """
    if nodes < 1 or depth < 1:
        raise ValueError(f"a draft tree needs nodes >= 1 and depth >= 1, got {nodes} and {depth}")
    if not acceptance or min(acceptance) < 0:
        raise ValueError(f"acceptance needs one chance >= 0 per rank, got {tuple(acceptance)}")
    order = 0  # ties go to the node pushed first (lower ranks, shallower)
    heap = []
    for rank, chance in enumerate(acceptance):
        heap.append((-chance, order, (rank,)))
        order += 1
    heapq.heapify(heap)
    chosen: list[tuple[float, RankPath]] = []
    while heap and len(chosen) < nodes:
        negative, _, path = heapq.heappop(heap)
        chosen.append((-negative, path))
        if len(path) < depth:
            for rank, chance in enumerate(acceptance):
                heapq.heappush(heap, (negative * chance, order, (*path, rank)))
                order += 1
    inner = {path[:-1] for _, path in chosen}
    leaves = [(chance, path) for chance, path in chosen if path not in inner]
    leaves.sort(key=lambda leaf: -leaf[0])  # stable: equal chances keep the order they were chosen in
    return [path for _, path in leaves]


class RankAcceptance:
    """How often the model's next token after a token was its rank-r entry in the table, per rank.

    ``estimate()`` blends the counts with ``prior`` (chances per rank) weighted as ``prior_weight``
    observations, so a fresh counter gives the prior and a used one its own measurements.
    """

    def __init__(self, prior: Sequence[float], prior_weight: float = 64.0):
        self.prior = tuple(float(p) for p in prior)
        self.prior_weight = prior_weight
        self.reset()

    def reset(self) -> None:
        self.hits = [0] * len(self.prior)
        self.seen = 0

    def count(self, row: Sequence[int], following: int) -> None:
        """The model predicted ``following`` after a token whose table row was ``row`` (ranked)."""
        self.seen += 1
        for rank, token in enumerate(row[: len(self.hits)]):
            if token == following:
                self.hits[rank] += 1
                return

    def estimate(self) -> list[float]:
        """[k] chance per rank."""
        total = self.seen + self.prior_weight
        return [(h + self.prior_weight * p) / total for h, p in zip(self.hits, self.prior, strict=True)]
