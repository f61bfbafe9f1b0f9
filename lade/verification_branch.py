"""The verification branch of a step as it is fed: the rows' candidates as chains or as token tries.

Chains feed every candidate whole (G' x l tokens per row); tries (``lade.trie``) feed each distinct
prefix once. A batch step feeds every row the same number of branch tokens: a row with fewer candidates
(chains) or a smaller trie is filled up with filler tokens (the row's last token) whose logits are never
read. A candidate shorter than the step's length is padded (``lade.types.pad_candidate``); chains feed
the padding, tries do not, and neither accepts it. Owns that construction and each row's ``Candidates``
(with the logits rows a trie maps them to); it never runs the model (the tokens go to
``lade.executor``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lade.trie import TokenTrie, build_trie, pad_trie
from lade.types import Candidates, pad_candidate


@dataclass
class VerificationBranch:
    """A step's verification branch for B' rows.

    Attributes:
        tokens: LongTensor [B', R], each row's branch tokens (R = G' * l for chains, the largest trie's
            nodes for tries).
        candidates: each row's own candidates, [g_b, l] (with a trie's logits rows).
        verified: each row's logits rows the verifier reads: 1 + its own branch tokens.
        tries: each row's trie padded to R nodes (None for chains).
    """

    tokens: torch.Tensor
    candidates: list[Candidates]
    verified: list[int]
    tries: list[TokenTrie] | None = None

    def prefixes(self, b: int) -> tuple[list[int], list[int]]:
        """Row b's distinct own candidate prefixes: the last token of each and the logits row after
        it, in order of first appearance (padding left out). A trie's nodes are exactly those, in that
        order; chains repeat shared prefixes and feed padding (``Candidates.prefix_rows``)."""
        if self.tries is None:
            return self.candidates[b].prefix_rows()
        nodes = self.verified[b] - 1
        return self.tokens[b, :nodes].tolist(), list(range(1, nodes + 1))


def verification_branch(
    lasts: list[int],
    offered: list[list[tuple[int, ...]]],
    guesses: list[int],
    length: int,
    tree: bool,
    device,
) -> VerificationBranch:
    """The branch of rows whose last committed tokens are ``lasts``: the first ``guesses[b]`` of each
    row's ``offered`` continuations, cut or padded to ``length`` tokens, as tries when ``tree`` (else
    chains)."""
    chosen = [
        [pad_candidate(c, length) for c in continuations[:g]]
        for continuations, g in zip(offered, guesses, strict=True)
    ]
    lengths = [
        tuple(min(len(c), length) for c in continuations[:g])
        for continuations, g in zip(offered, guesses, strict=True)
    ]
    if not tree:
        count = max(guesses)
        padded = [
            rows + [[last] * length] * (count - len(rows)) for rows, last in zip(chosen, lasts, strict=True)
        ]
        tokens = torch.tensor(padded, dtype=torch.long, device=device).view(len(lasts), count, length)
        candidates = [Candidates(tokens[b, :g], lengths=lengths[b]) for b, g in enumerate(guesses)]
        return VerificationBranch(tokens.flatten(1), candidates, [1 + g * length for g in guesses])
    tries = [build_trie(rows, own) for rows, own in zip(chosen, lengths, strict=True)]
    size = max(trie.size for trie in tries)
    padded_tries = [pad_trie(trie, size, last) for trie, last in zip(tries, lasts, strict=True)]
    tokens = torch.tensor([trie.tokens for trie in padded_tries], dtype=torch.long, device=device)
    candidates = [
        Candidates(
            torch.tensor(rows, dtype=torch.long, device=device).view(len(rows), length),
            tuple(tuple(1 + node for node in path) for path in trie.candidate_nodes),
            own,
        )
        for rows, trie, own in zip(chosen, tries, lengths, strict=True)
    ]
    return VerificationBranch(
        tokens.view(len(lasts), size), candidates, [1 + t.size for t in tries], padded_tries
    )
