"""Token order, positions and attention masks of one lookahead step (pure functions).

A step feeds the model one flat sequence::

    [ last token | lookahead branch: L levels x W columns | verification branch: G' x (N-1) ]

Every token has exactly one parent among the earlier tokens of the step (the last token is the
root), so the step is a token tree: a token attends to the committed prefix and to its ancestors
in the tree, and its position is ``p + depth`` (``p`` = position of the last committed token).

* lookahead level 0, column ``c``: parent is column ``c-1`` of level 0 (the root for ``c = 0``);
* lookahead level ``r >= 1``, column ``c``: parent is level ``r-1``, column ``c``;
  so token (r, c) sits at ``p + 1 + r + c`` and sees level 0 up to column ``c`` and then column ``c``
  down to itself: one token per earlier position, the paper's diagonal path;
* candidate ``i``, token ``j``: parent is token ``j-1`` of the same candidate (the root for ``j = 0``).
  Candidates and the lookahead branch never see each other.

Or the verification branch is a token trie (``trie_layout``, ``lade.trie``): one row per distinct
candidate prefix, its parent the row of the prefix one token shorter; ``candidate_nodes`` maps each
candidate token to its row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class StepLayout:
    """Shape of one step's token tree. Built once per shape and reused."""

    num_levels: int  # L
    window: int  # W
    num_candidates: int  # G'
    candidate_len: int  # N-1
    parents: tuple[int, ...]  # [S] parent index of each token, -1 for the root
    depths: torch.Tensor  # [S] long, distance from the root: position offset from the last token
    tree_mask: torch.Tensor  # [S, S] bool, tree_mask[i, j] = token j is i itself or an ancestor of i
    candidate_nodes: tuple[tuple[int, ...], ...] | None = None  # [G'][l] trie node per token; None: chains

    @property
    def key(self) -> tuple:
        """What tells step layouts apart (their shape, and a trie's structure)."""
        shape = (self.num_levels, self.window, self.num_candidates, self.candidate_len, self.size)
        if self.candidate_nodes is None:
            return shape
        return (*shape, self.parents[self.candidates.start :], self.candidate_nodes)

    @property
    def size(self) -> int:
        """S = 1 + L*W + G'*(N-1): tokens fed to the model this step."""
        return len(self.parents)

    @property
    def branch(self) -> slice:
        """Rows of the lookahead branch (level-major: level 0 columns 0..W-1 first)."""
        return slice(1, 1 + self.num_levels * self.window)

    @property
    def newest_level(self) -> slice:
        """Rows of the newest lookahead level (empty when L = 0)."""
        end = 1 + self.num_levels * self.window
        return slice(end - self.window if self.num_levels else end, end)

    @property
    def candidates(self) -> slice:
        """Rows of the verification branch (candidate-major)."""
        return slice(1 + self.num_levels * self.window, self.size)

    def candidate_row(self, candidate: int, token: int) -> int:
        """Row of token ``token`` of candidate ``candidate``."""
        if self.candidate_nodes is not None:
            return self.candidates.start + self.candidate_nodes[candidate][token]
        return self.candidates.start + candidate * self.candidate_len + token


def _tree(parents: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Depths [S] and ancestor-or-self mask [S, S] of a tree whose parents precede children."""
    size = len(parents)
    depths = torch.zeros(size, dtype=torch.long)
    mask = torch.zeros(size, size, dtype=torch.bool)
    for i, parent in enumerate(parents):
        if parent >= 0:
            if parent >= i:
                raise ValueError(f"parent {parent} of token {i} must come before it")
            depths[i] = depths[parent] + 1
            mask[i] = mask[parent]
        mask[i, i] = True
    return depths, mask


def step_layout(num_levels: int, window: int, num_candidates: int, candidate_len: int) -> StepLayout:
    """Layout of a lookahead step with L levels of W guesses and G' candidates of N-1 tokens."""
    if min(num_levels, window, num_candidates, candidate_len) < 0:
        raise ValueError("layout sizes must be non-negative")
    parents = _root_and_branch(num_levels, window)
    start = len(parents)
    for i in range(num_candidates):
        for j in range(candidate_len):
            parents.append(0 if j == 0 else start + i * candidate_len + j - 1)
    depths, mask = _tree(parents)
    return StepLayout(num_levels, window, num_candidates, candidate_len, tuple(parents), depths, mask)


def trie_layout(
    num_levels: int,
    window: int,
    node_parents: tuple[int, ...],
    candidate_nodes: tuple[tuple[int, ...], ...],
    candidate_len: int,
) -> StepLayout:
    """Layout of a lookahead step whose verification branch is a token trie (``lade.trie.TokenTrie``):
    L levels of W guesses, then one row per node (``node_parents``: -1 for a child of the root);
    ``candidate_nodes`` [G'][l] maps each candidate token to its node."""
    if min(num_levels, window, candidate_len) < 0:
        raise ValueError("layout sizes must be non-negative")
    parents = _root_and_branch(num_levels, window)
    start = len(parents)
    parents.extend(0 if parent < 0 else start + parent for parent in node_parents)
    depths, mask = _tree(parents)
    return StepLayout(
        num_levels, window, len(candidate_nodes), candidate_len, tuple(parents), depths, mask, candidate_nodes
    )


def _root_and_branch(num_levels: int, window: int) -> list[int]:
    """Parents of the root and of the lookahead branch's L x W tokens (level-major)."""
    parents = [-1]
    for r in range(num_levels):
        for c in range(window):
            if r == 0:
                parents.append(c)  # row 0 of the branch: index c is column c-1 (the root for c=0)
            else:
                parents.append(1 + (r - 1) * window + c)
    return parents


def chain_layout(length: int) -> StepLayout:
    """A plain causal chain of ``length`` tokens (the prefill), as a degenerate layout."""
    if length < 1:
        raise ValueError("a chain needs at least one token")
    parents = tuple(range(-1, length - 1))
    depths = torch.arange(length)
    mask = torch.ones(length, length, dtype=torch.bool).tril_()
    return StepLayout(0, 0, 0, 0, parents, depths, mask)


def visibility(
    tree_mask: torch.Tensor,
    prefix_len: int,
    positions: torch.Tensor,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Which keys each step token may attend to.

    Args:
        tree_mask: BoolTensor [S, S] from a ``StepLayout``.
        prefix_len: P, tokens already in the cache; cache slot ``k`` holds position ``k``.
        positions: LongTensor [S], absolute positions of the step's tokens.
        sliding_window: if set, a query at position q sees only keys at positions > q - window
            (the transformers convention: the window counts the query itself).

    Returns:
        BoolTensor [S, P + S], True where attention is allowed.
    """
    size = tree_mask.shape[0]
    visible = torch.ones(size, prefix_len + size, dtype=torch.bool, device=tree_mask.device)
    visible[:, prefix_len:] = tree_mask
    if sliding_window is not None:
        key_positions = torch.cat([torch.arange(prefix_len, device=positions.device), positions])
        visible &= key_positions[None, :] > positions[:, None] - sliding_window
    return visible


def batch_visibility(
    tree_mask: torch.Tensor,
    key_valid: torch.Tensor,
    key_positions: torch.Tensor,
    positions: torch.Tensor,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """``visibility`` for a batch whose cache rows have holes (``lade.slots``).

    Args:
        tree_mask: BoolTensor [S, S] from a ``StepLayout`` (the same tree in every row), or [B, S, S]
            (each row's own tree: token tries differ from row to row).
        key_valid: BoolTensor [B, P], whether cache slot k of row b holds one of the row's tokens
            (padding and the slots of other rows' longer acceptances do not).
        key_positions: LongTensor [B, P], the position of the token in each valid slot.
        positions: LongTensor [B, S], absolute positions of the step's tokens in each row.
        sliding_window: as in ``visibility``.

    Returns:
        BoolTensor [B, S, P + S], True where attention is allowed.
    """
    rows, size = positions.shape
    prefix = key_valid[:, None, :].expand(rows, size, key_valid.shape[1])
    block = tree_mask if tree_mask.dim() == 3 else tree_mask[None].expand(rows, size, size)
    if sliding_window is not None:
        earliest = positions[:, :, None] - sliding_window
        prefix = prefix & (key_positions[:, None, :] > earliest)
        block = block & (positions[:, None, :] > earliest)
    return torch.cat([prefix, block], dim=2)


def additive_mask(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """4D additive float mask [1, 1, S, K]: 0 where visible, the dtype's minimum elsewhere.

    A float mask rather than a bool one because transformers 5.x's eager attention adds the mask
    to the scores and misreads a bool mask; sdpa accepts both.
    """
    mask = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
    mask.masked_fill_(~visible, torch.finfo(dtype).min)
    return mask[None, None]
