"""A Gauss-Seidel variant of the lookahead window: freshest values, re-anchored on what was accepted."""

from __future__ import annotations

import torch

from lade.types import Verification
from strategies.jacobi import JacobiProposer


class GaussSeidelProposer(JacobiProposer):
    """Like ``JacobiProposer`` (same initialisation, branch and harvest), but advances the window
    with the freshest guesses it has, each kept at the absolute position it was made for.

    Notation: before the step the last committed token sits at position p; level r, column c at
    p + 1 + r + c; ``out[r][c]`` is the model's argmax there, a guess for position p + 2 + r + c. The
    step commits k tokens, so the new last token sits at p' = p + k and the new level r, column c
    must hold a guess for p' + 1 + r + c = p + k + 1 + r + c.

    * Harvest: as Jacobi, when the window is full (N-1 levels) column c read down the levels plus
      ``out[N-2][c]`` is an n-gram.
    * Update (every level, not only the newest): row r's freshest guesses, in position order, are
      ``ext_r = out[r][0..W-1]`` followed by ``out[r+1][W-1], ..., out[L-1][W-1]`` (each one position
      further). The new level r is ``ext_r[k-1 : k-1+W]``: this step's guess for exactly its position,
      where Jacobi keeps an older guess (``old level r+1``) and, for k > 1, moves it k-1 positions
      off the position it was made for. While warming up (L < N-1) one more level is appended,
      ``ext_{L-1}[k : k+W]``. Where a row runs out of guesses, its last one is repeated.

    Worked example (W=3, N=3): levels ``[[a,b,c],[d,e,f]]``, outputs ``[[g,h,i],[j,k,l]]``.
    Harvest: (a,d,j), (b,e,k), (c,f,l). One token accepted: GS -> ``[[g,h,i],[j,k,l]]`` (Jacobi
    -> ``[[d,e,f],[j,k,l]]``). Two accepted: GS -> ``[[h,i,l],[k,l,l]]`` (Jacobi: unchanged from the
    one-token case). Lossless like every proposer: verification alone decides what is committed.
    """

    def levels_read(self, num_levels: int) -> int:
        return num_levels  # every level is refreshed from its own outputs

    def update(self, level_logits: torch.Tensor | None, accepted: Verification) -> list[tuple[int, ...]]:
        out = self._guess(level_logits)  # [L, W]
        num_levels, window = out.shape
        shift = len(accepted.tokens) - 1
        if num_levels == self.ngram - 1:
            grams = self._harvest(out[-1], accepted)
        else:
            grams, self._root = [], accepted.tokens[-1]
        rows = [self._fresh_row(out, r, shift) for r in range(num_levels)]
        if num_levels < self.ngram - 1:
            rows.append(self._fresh_row(out, num_levels - 1, shift + 1))
        self._levels = torch.stack(rows)
        return grams

    @staticmethod
    def _fresh_row(out: torch.Tensor, row: int, offset: int) -> torch.Tensor:
        """``ext_row[offset : offset + W]``, padded by repeating its last token."""
        window = out.shape[1]
        extended = torch.cat([out[row], out[row + 1 :, -1]])  # guesses for consecutive positions
        picked = extended[offset : offset + window]
        if picked.shape[0] < window:
            last = picked[-1:] if picked.shape[0] else extended[-1:]
            picked = torch.cat([picked, last.expand(window - picked.shape[0])])
        return picked
