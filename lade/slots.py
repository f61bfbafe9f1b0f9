"""What the cache's slots hold, row by row, and how a step's accepted tokens are kept in them.

Owns the bookkeeping of a decode's key/value cache (``lade.cache``): which slots hold a row's
tokens, at which positions, and where the next token of each row goes. It commits a step's accepted
tokens, drops the rows that finished and compacts the cache; it never runs the model and knows
nothing of proposers, pools or verifiers.

Ragged acceptance: "holes" in one batch cache. The cache is one tensor [B, H, slots, D], so every
row has the same number of slots. After a step, row b keeps the keys/values of its k_b accepted
tokens (the last token and the accepted candidate tokens), gathered into the first k_b of
M = max_b k_b new slots; its other M - k_b slots are holes, marked invalid in that row's part of the
4D mask (``lade.layout.batch_visibility``), and each valid slot records its token's position (for
sliding-window layers). So nothing is recomputed and nothing is shifted at a step; the price is that
the attention reads the holes too (masked), at most N-1 slots per step per row. The alternatives cost
more: re-feeding the rejected part of the longer rows recomputes tokens; padding every row's
acceptance to the shortest throws accepted tokens away; moving each row's cache to its own length
means a copy of the whole cache per step. Left padding of the prompts is handled the same way: pad
slots are invalid keys, and positions count real tokens only (as HF's ``generate`` does).

Holes add up when rows take turns at accepting the most (each step's slots follow the longest
acceptance, each row's tokens its own): a slow row beside fast ones can leave the cache about N times
longer than any row's tokens. Once the slots every row leaves empty pass ``COMPACT_AFTER`` and half
the longest row's tokens, ``compact`` moves each row's tokens to the right end of a cache as long as
the longest row (one copy of the cache, paid back within the steps that made the holes).

One row without padding keeps no masks of holes at all (``KeySlots.valid`` is None): slot p holds
position p, which the one-row fast paths (reused mask buffers, an in-place commit) rely on.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache

from lade.cache import commit, commit_rows, select_rows, take_slots

COMPACT_AFTER = 64  # slots every row leaves empty before the cache is compacted (and half a row)


@dataclass
class KeySlots:
    """The cache's slots per row.

    Attributes:
        length: P, slots per row (the cache's sequence length).
        valid: BoolTensor [B, P], whether slot k of row b holds one of the row's tokens; None for one
            row whose every slot holds its tokens in order (slot p holds position p).
        positions: LongTensor [B, P], the position of the token in each valid slot (None with ``valid``).
        counts: LongTensor [B], the tokens each row holds, which is the position of the token its next
            step feeds first (None with ``valid``: ``length``).
    """

    length: int
    valid: torch.Tensor | None = None
    positions: torch.Tensor | None = None
    counts: torch.Tensor | None = None

    @classmethod
    def of_prompts(cls, valid: torch.Tensor) -> KeySlots:
        """The slots after a prefill of left-padded prompts; ``valid`` [B, T] is False at padding. One
        row without padding keeps no masks (the fast path)."""
        if valid.shape[0] == 1 and bool(valid.all()):
            return cls(valid.shape[1])
        positions = (valid.long().cumsum(1) - 1).clamp(min=0)
        return cls(valid.shape[1], valid, positions, valid.sum(1))

    @property
    def exact(self) -> bool:
        """Whether slot p holds position p (one row, no padding, no holes)."""
        return self.valid is None

    def step_positions(self, depths: torch.Tensor, context_length: int | None) -> torch.Tensor:
        """LongTensor [B, S]: the positions of a step's tokens, ``depths`` [S] (or each row's, [B, S])
        after each row's last committed token (clamped to the context: only guesses past the end of
        the budget reach it, and they are never committed)."""
        if self.exact:
            positions = (self.length + depths).view(1, -1)
        else:
            positions = self.counts[:, None] + (depths if depths.dim() == 2 else depths[None])
        return positions if context_length is None else positions.clamp(max=context_length - 1)

    def commit(self, cache: DynamicCache, step_len: int, keep: list[list[int]]) -> None:
        """Keep, for each row b, the step rows ``keep[b]`` (ascending, starting with 0) in the cache,
        after the row's slots; drop the rest of the step (``step_len`` tokens)."""
        if self.exact:
            commit(cache, self.length, step_len, keep[0])
            self.length += len(keep[0])
            return
        kept = max(len(k) for k in keep)
        device = self.valid.device
        sizes = torch.tensor([len(k) for k in keep], device=device)
        slots = torch.arange(kept, device=device)
        # [B, M]; a row's spare slots stay where they are (holes: masked, never copied)
        index = torch.tensor([k + list(range(len(k), kept)) for k in keep], device=device)
        commit_rows(cache, self.length, step_len, index)
        self.valid = torch.cat([self.valid, slots[None] < sizes[:, None]], dim=1)
        self.positions = torch.cat([self.positions, self.counts[:, None] + slots[None]], dim=1)
        self.counts = self.counts + sizes
        self.length += kept

    def keep_rows(self, cache: DynamicCache, rows: list[int]) -> None:
        """Keep only the batch rows ``rows`` (rows that finished leave the batch)."""
        selected = torch.tensor(rows, device=self.valid.device)
        select_rows(cache, selected)
        self.valid, self.positions = self.valid[selected], self.positions[selected]
        self.counts = self.counts[selected]

    def holes(self) -> int:
        """Slots that every row leaves empty: what ``compact`` would free."""
        return 0 if self.exact else self.length - int(self.counts.max())

    def compact_if_worthwhile(self, cache: DynamicCache) -> bool:
        """``compact`` when the slots every row leaves empty pass ``COMPACT_AFTER`` and half the
        longest row's tokens; whether it did."""
        if self.exact:
            return False
        longest = int(self.counts.max())  # one read of the counts per step
        if self.length - longest < max(COMPACT_AFTER, longest // 2):
            return False
        self.compact(cache)
        return True

    def compact(self, cache: DynamicCache) -> None:
        """Move each row's tokens to the right end of a cache as long as the longest row (its holes and
        padding to the left, as left padding): every layer's keys/values are gathered once."""
        longest = int(self.counts.max())
        order = torch.argsort(self.valid.to(torch.int8), dim=1, stable=True)  # holes first, tokens in order
        index = order[:, self.length - longest :]  # [B, longest]
        take_slots(cache, index)
        self.valid = self.valid.gather(1, index)
        self.positions = self.positions.gather(1, index)
        self.length = longest
