"""Where an output leaves the reference's greedy output, and whether that was a near-tie.

In float32 lookahead decoding gives HF greedy's tokens exactly. In bfloat16 it cannot always: a
forward over several tokens sums in a different order than a one-token forward, so logits differ by
rounding, and where the reference's best token leads the next one by less than that rounding, the
argmax can flip. Then every later token may differ too. So the figure that matters is the *first*
divergence and the reference's margin there: the reference's logit for its own token minus its logit
for the token the other output chose. A near-tie (margin at most `NEAR_TIE_MARGIN`) is rounding. A
large margin is a wrong token, which is what a bug in a verifier gives.

That margin is never smaller than the reference's top-1 minus top-2 margin, and it is stricter: a wrong
token with a low logit counts as a large margin even where the top two happen to be tied. Only the
reference's logits are used, the ones `generate` computed while producing it (``output_logits=True``),
so the margin is not itself re-rounded by another forward.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

# Logits of these models are O(10); bf16 keeps 8 significant bits, so its resolution at |logit| 8-16
# is 0.0625 and a multi-token forward's rounding moves a logit by a few such steps. 0.5 is 8 steps at
# that scale: generous for rounding, far below a wrong token's usual margin (several logits).
NEAR_TIE_MARGIN = 0.5


@dataclass(frozen=True)
class Divergence:
    """The first new-token index where an output differs from the reference (None: identical) and the
    reference's margin there (None when identical)."""

    position: int | None = None
    margin: float | None = None

    @property
    def identical(self) -> bool:
        return self.position is None

    def near_tie(self, threshold: float = NEAR_TIE_MARGIN) -> bool:
        """Identical, or diverging where the reference's margin is at most ``threshold``."""
        return self.position is None or self.margin <= threshold


def compare(reference: Sequence[int], logits: Sequence[torch.Tensor], other: Sequence[int]) -> Divergence:
    """The `Divergence` of ``other`` from ``reference`` (new tokens of one row).

    ``logits``: the reference's raw logits, one ``[V]`` tensor per new token (``generate``'s
    ``output_logits`` for this row). Where ``other`` ends before the reference (an early EOS, or a
    shorter budget), the margin is the reference's top-1 minus top-2 there.
    """
    reference, other = list(reference), list(other)
    position = next((i for i, (a, b) in enumerate(zip(reference, other, strict=False)) if a != b), None)
    if position is None:
        if len(reference) == len(other):
            return Divergence()
        position = min(len(reference), len(other))
    if position >= len(reference):  # the reference stopped first (its EOS): the other kept going
        return Divergence(position, math.inf)
    row = logits[position].float()
    if position < len(other):
        margin = row[reference[position]] - row[other[position]]
    else:
        top = row.topk(2).values
        margin = top[0] - top[1]
    return Divergence(position, float(margin))


def summarize(divergences: Sequence[Divergence], threshold: float = NEAR_TIE_MARGIN) -> dict:
    """``identical`` (count), ``near_tie`` (diverging outputs whose margin is at most ``threshold``),
    ``worst_margin`` (the largest margin among diverging outputs; NaN when all are identical)."""
    margins = [d.margin for d in divergences if not d.identical]
    return {
        "identical": sum(d.identical for d in divergences),
        "near_tie": sum(margin <= threshold for margin in margins),
        "worst_margin": max(margins) if margins else float("nan"),
    }


def row_logits(logits: Sequence[torch.Tensor], row: int) -> list[torch.Tensor]:
    """One row's ``[V]`` logits from ``generate``'s tuple of ``[B, V]`` tensors."""
    return [step[row] for step in logits]
