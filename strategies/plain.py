"""Plain autoregressive decoding through the lookahead loop (a baseline sharing one code path)."""

from __future__ import annotations

import torch

from lade.interfaces import Proposer
from lade.types import LookaheadBranch, Verification


class AutoregressiveProposer(Proposer):
    """Proposes nothing: with no candidates either, each step is one token, as in plain decoding."""

    def __init__(self, window: int = 1, ngram: int = 2):
        self.window = window
        self.ngram = ngram
        self._empty = torch.zeros(0, window, dtype=torch.long)

    def start(self, prompt: torch.Tensor, generator: torch.Generator | None = None) -> None:
        self._empty = self._empty.to(prompt.device)

    def lookahead_branch(self) -> LookaheadBranch:
        return LookaheadBranch(self._empty)

    def update(self, level_logits: torch.Tensor | None, accepted: Verification) -> list[tuple[int, ...]]:
        return []
