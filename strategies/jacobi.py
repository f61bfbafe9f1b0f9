"""The paper's Jacobi lookahead proposer."""

from __future__ import annotations

import torch

from lade.interfaces import Proposer
from lade.types import LookaheadBranch, Verification
from strategies.greedy import greedy_tokens


class JacobiProposer(Proposer):
    """Keeps N-1 levels of W guesses: the trajectory of a Jacobi iteration over W future positions.

    Update rule (every step, whatever was accepted):

    * the new level is the model's argmax at the newest level's tokens (computed from the previous
      iteration's values only; the outputs at the older levels are discarded);
    * when the window is full (N-1 levels), column ``c`` read from level 0 to the newest level,
      followed by the new token, is an n-gram of N tokens: all W of them are harvested; then the
      oldest level is dropped and the new level appended (the window slides by one column);
    * while warming up (fewer than N-1 levels) the new level is appended and nothing is harvested.

    Level 0 starts as W tokens drawn uniformly from the prompt with a seeded generator, so runs repeat.
    Positions are relative to the last committed token, so the window never has to be re-indexed.

    ``guesses="argmax"`` (the paper's choice, also under sampling) takes each new guess as the
    argmax; ``"sample"`` draws it from the model's softmax with the call's generator. Either way
    the output is lossless: verification alone decides what is committed.
    """

    def __init__(self, window: int, ngram: int, seed: int = 0, guesses: str = "argmax"):
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if ngram < 2:
            raise ValueError(f"ngram must be >= 2, got {ngram}")
        self.window = window
        self.ngram = ngram
        if guesses not in ("argmax", "sample"):
            raise ValueError(f"guesses must be 'argmax' or 'sample', got {guesses!r}")
        self.seed = seed
        self.guesses = guesses
        self._levels: torch.Tensor | None = None  # [L, W]
        self._generator: torch.Generator | None = None
        self._root = 0  # the last committed token: the start of every path through the window

    def start(self, prompt: torch.Tensor, generator: torch.Generator | None = None) -> None:
        if generator is None:
            generator = torch.Generator().manual_seed(self.seed)
        self._generator = generator
        self._root = int(prompt[-1])
        self._prompt = prompt
        picks = torch.randint(prompt.shape[0], (self.window,), generator=generator, device=generator.device)
        self._levels = prompt[picks.to(prompt.device)][None]

    def lookahead_branch(self) -> LookaheadBranch:
        if self._levels is None:
            raise RuntimeError("call start(prompt) before lookahead_branch()")
        return LookaheadBranch(self._levels)

    def levels_read(self, num_levels: int) -> int:
        return min(num_levels, 1)  # only the newest level's outputs are used

    def update(self, level_logits: torch.Tensor | None, accepted: Verification) -> list[tuple[int, ...]]:
        new_level = self._guess(level_logits[-1])  # [W]: from the newest level only
        if self._levels.shape[0] < self.ngram - 1:
            self._levels = torch.cat([self._levels, new_level[None]])
            self._root = accepted.tokens[-1]
            return []
        grams = self._harvest(new_level, accepted)
        self._levels = torch.cat([self._levels[1:], new_level[None]])
        return grams

    resizable = True

    def resize(self, window: int) -> None:
        """Keep the first ``window`` columns of every level; new columns start as prompt tokens drawn
        with the call's generator, like level 0 at the start (their guesses are refined from there)."""
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if self._levels is None:
            raise RuntimeError("call start(prompt) before resize()")
        current = self._levels.shape[1]
        if window < current:
            self._levels = self._levels[:, :window].contiguous()
        elif window > current:
            prompt = self._prompt
            picks = torch.randint(
                prompt.shape[0],
                (self._levels.shape[0], window - current),
                generator=self._generator,
                device=self._generator.device,
            )
            self._levels = torch.cat([self._levels, prompt[picks.to(prompt.device)]], dim=1)
        self.window = window

    def skip(self, accepted: Verification) -> None:
        self._root = accepted.tokens[-1]  # the paths of later harvests start at the new last token

    def _harvest(self, new_level: torch.Tensor, accepted: Verification) -> list[tuple[int, ...]]:
        """Column c read down the levels plus its new token, after its left context: the tokens
        before it on its path (the last committed token, then level 0 up to column c-1), which
        pools keyed on several tokens use."""
        grams = torch.cat([self._levels.T, new_level[:, None]], dim=1).tolist()  # [W, N]
        path = [self._root, *self._levels[0].tolist()]
        self._root = accepted.tokens[-1]
        return [tuple(path[: c + 1] + gram) for c, gram in enumerate(grams)]

    def _guess(self, logits: torch.Tensor) -> torch.Tensor:
        """New guesses [...] from logits [..., V]: argmax, or a sample with the call's generator."""
        if self.guesses == "argmax":
            return greedy_tokens(logits).to(self._levels.device)
        probabilities = torch.softmax(logits.float(), dim=-1).reshape(-1, logits.shape[-1])
        drawn = torch.multinomial(probabilities.to(self._generator.device), 1, generator=self._generator)
        return drawn.view(logits.shape[:-1]).to(self._levels.device)
