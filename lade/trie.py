"""Candidates merged into a token trie: one node per distinct prefix, so a shared prefix is fed once.

A step verifies G' candidates of l tokens after the last committed token (the root). Fed as separate
chains they cost G' * l tokens even when they share first tokens (in a first-token-keyed pool they
often do). In a trie each distinct prefix is one node: the node's logits are those every candidate
through it would have had as a chain (the same tokens at the same positions after the same prefix),
so verification reads the same logits and accepts the same tokens, for fewer tokens fed.

Owns the merge and the map from each candidate token to its node; the layout (``lade.layout``) places
the nodes in the step and the verifiers read each candidate's logits through ``Candidates.rows``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TokenTrie:
    """Candidates as a trie below the root.

    Attributes:
        tokens: [nodes] token id of each node, in creation order (a parent before its children).
        parents: [nodes] parent node of each node, -1 for a child of the root.
        candidate_nodes: [G'][l] the node of each candidate's token j.
    """

    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    candidate_nodes: tuple[tuple[int, ...], ...]

    @property
    def size(self) -> int:
        """Nodes: the tokens the trie feeds (at most G' * l, fewer when candidates share prefixes)."""
        return len(self.tokens)


def build_trie(candidates: Sequence[Sequence[int]], lengths: Sequence[int] | None = None) -> TokenTrie:
    """The trie of ``candidates`` (equal lengths, each a continuation of the root), in candidate order:
    the nodes of candidate 0 first, then those of candidate 1 that it does not share, and so on.
    ``lengths`` [G']: each candidate's own tokens (default: all); its padding past them gets no node
    and maps to its last own token's node (padding is never accepted, so no logits after it are read)."""
    tokens: list[int] = []
    parents: list[int] = []
    children: dict[tuple[int, int], int] = {}
    paths = []
    for i, candidate in enumerate(candidates):
        own = len(candidate) if lengths is None else lengths[i]
        if own < 1:
            raise ValueError(f"candidate {i} has no token of its own")
        parent, path = -1, []
        for token in candidate[:own]:
            node = children.get((parent, token))
            if node is None:
                node = len(tokens)
                tokens.append(token)
                parents.append(parent)
                children[(parent, token)] = node
            path.append(node)
            parent = node
        path.extend([parent] * (len(candidate) - own))
        paths.append(tuple(path))
    return TokenTrie(tuple(tokens), tuple(parents), tuple(paths))


def pad_trie(trie: TokenTrie, size: int, filler: int) -> TokenTrie:
    """``trie`` with filler nodes (token ``filler``, children of the root) up to ``size`` nodes: rows of
    a batch step share one node count; a filler's logits are never read."""
    extra = size - trie.size
    if extra < 0:
        raise ValueError(f"a trie of {trie.size} nodes cannot be padded to {size}")
    return TokenTrie(trie.tokens + (filler,) * extra, trie.parents + (-1,) * extra, trie.candidate_nodes)


def trie_sizes(candidates: Sequence[Sequence[int]], max_guess: int, max_length: int) -> list[list[int]]:
    """[g][l] the nodes of the trie of the first g ``candidates`` cut to l tokens, for g <= ``max_guess``
    and l <= ``max_length`` (a candidate shorter than l feeds only its own tokens: its padding gets no
    node, ``build_trie``): what a step verifying (g, l) feeds, which the auto planner prices."""
    sizes = [[0] * (max_length + 1) for _ in range(max_guess + 1)]
    seen: list[set[tuple[int, ...]]] = [set() for _ in range(max_length + 1)]
    for g in range(1, max_guess + 1):
        row = sizes[g]
        if g > len(candidates):
            row[:] = sizes[g - 1]
            continue
        candidate = tuple(candidates[g - 1][:max_length])
        added = 0
        for length in range(1, max_length + 1):
            prefix = candidate[:length]
            if length <= len(candidate) and prefix not in seen[length]:
                seen[length].add(prefix)
                added += 1
            row[length] = sizes[g - 1][length] + added
    return sizes
