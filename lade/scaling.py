"""The paper's analytic model of lookahead decoding's scaling (Fu et al. 2024, Section 4), and its fit.

A step verifies b guesses of N - 1 tokens. If each guessed token is right with probability ``a`` and
the guesses are independent, at least i tokens are accepted with probability 1 - (1 - a^i)^b, so

    E[tokens per step] = 1 + sum_{i=1}^{N-1} (1 - (1 - a^i)^b)

(the 1 is the model's own token, committed at every step; b = 1 gives speculative decoding's
(1 - a^N) / (1 - a)). The paper takes the G guesses as independent (b = G): growing b exponentially
grows E linearly until N caps it. Two relaxations, fitted to data by ``fit``: guesses from one
window are correlated, so b = G^k with a free exponent k (k = 1: independent, k = 0: one guess's
worth); and a guess whose first token is right is likely right on: a per-guess prefix of i tokens
is right with probability a * c^(i-1), with a continuation probability c (c = a: the paper's a^i).

A step verifies at most G candidates: fewer while the pool holds fewer n-grams for the step's key (at
the start of a call, for rare tokens). ``fit`` therefore takes either the nominal G per point or each
point's measured distribution of candidates per step, and ``mixed_expected_tokens`` averages the model
over it (a step without candidates commits one token).
"""

from __future__ import annotations

import numpy as np

GRID = np.linspace(0.001, 0.999, 999)


def expected_tokens(acceptance, guesses, ngram, exponent: float = 1.0, continuation=None) -> np.ndarray:
    """E[tokens per step] for G and N (arrays or scalars that broadcast with ``acceptance`` and
    ``continuation``); G < 1 counts as 1; ``continuation=None`` is the paper's model (c = a)."""
    acceptance = np.asarray(acceptance, dtype=float)
    continuation = acceptance if continuation is None else np.asarray(continuation, dtype=float)
    effective = np.maximum(np.asarray(guesses, dtype=float), 1.0) ** exponent
    ngram = np.asarray(ngram)
    total = np.ones(np.broadcast(acceptance, continuation, effective, ngram).shape)
    for i in range(1, int(np.max(ngram))):
        prefix = acceptance * continuation ** (i - 1)
        total = total + np.where(i <= ngram - 1, 1 - (1 - prefix) ** effective, 0.0)
    return total


def mixed_expected_tokens(acceptance, shares, ngram, exponent: float = 1.0, continuation=None) -> np.ndarray:
    """E[tokens per step] averaged over steps that verify different numbers of candidates:
    ``shares`` [P, K], each point's share of steps that verified b = 0..K-1 candidates (rows sum to
    1), ``ngram`` [P]; ``acceptance`` and ``continuation``: scalars or arrays [...] of parameter
    values, which broadcast with each other. Returns [..., P]."""
    shares = np.asarray(shares, dtype=float)
    ngram = np.asarray(ngram)
    used = np.flatnonzero(shares.sum(axis=0))  # only the counts that occur
    sizes = np.unique(ngram)
    # the model once per (count, N) pair [..., K', N'], not per point: fits evaluate it on large grids
    acceptance = np.asarray(acceptance, dtype=float)[..., None, None]
    continuation = None if continuation is None else np.asarray(continuation, dtype=float)[..., None, None]
    counts = used.astype(float)[:, None]
    per_pair = expected_tokens(acceptance, counts, sizes[None, :], exponent, continuation)
    per_pair = np.where(counts == 0, 1.0, per_pair)  # no candidates: the model's own token only
    weights = shares[:, used, None] * (ngram[:, None, None] == sizes[None, None, :])  # [P, K', N']
    return np.einsum("...kn,pkn->...p", per_pair, weights)


def candidate_shares(counts_per_point) -> np.ndarray:
    """[P, K] shares of steps that verified b = 0..K-1 candidates, from each point's per-step
    candidate counts (a sequence of P integer sequences)."""
    counts = [np.asarray(c, dtype=int) for c in counts_per_point]
    width = max((int(c.max()) + 1 for c in counts if c.size), default=1)
    return np.stack([np.bincount(c, minlength=width) / max(c.size, 1) for c in counts])


def fit(
    guesses, ngram, compression, exponent: float | None = None, continuation: bool = False
) -> dict[str, float]:
    """Least-squares fit of the model to measured compression ratios at the given G and N.

    ``guesses``: the nominal G per point [P], or the measured share of steps verifying b = 0..K-1
    candidates [P, K] (``candidate_shares``; the model is then ``mixed_expected_tokens``). Fits the
    acceptance ``a``, the exponent ``k`` (unless given) and, with ``continuation=True``, the continuation
    probability ``c`` (else c = a), by grid search (a, c in 0.001..0.999, k in 0..1.5 by 0.01,
    coarse to fine).
    Returns ``{"acceptance", "continuation", "exponent", "rmse"}`` (RMSE in tokens per step).
    """
    guesses, ngram, measured = (np.asarray(x, dtype=float) for x in (guesses, ngram, compression))
    if not (guesses.shape[:1] == ngram.shape == measured.shape) or guesses.ndim > 2 or measured.size == 0:
        raise ValueError("fit needs equally long, non-empty guesses, ngram and compression")
    ngram = ngram.astype(int)

    def model(a, k, c):
        if guesses.ndim == 2:  # the grids' trailing points axis is mixed_expected_tokens' own
            return mixed_expected_tokens(a[..., 0], guesses, ngram, k, None if c is None else c[..., 0])
        return expected_tokens(a, guesses, ngram, k, c)

    a = GRID[:, None, None]  # [A, 1, 1] x [1, C, 1] x [P] points
    c = GRID[None, ::10, None] if continuation else None  # coarse c first, refined below

    def best_at(k: float) -> tuple[float, float, float]:  # (mean squared error, a, k) at exponent k
        errors = np.mean((model(a, k, c) - measured) ** 2, axis=-1)
        index = np.unravel_index(np.argmin(errors), errors.shape)
        return float(errors[index]), float(GRID[index[0]]), float(k)

    if exponent is not None:
        best = best_at(exponent)
    else:  # k coarse to fine: every 0.1 over 0..1.5, then every 0.01 within 0.09 of the best
        best = min(best_at(k) for k in np.round(np.linspace(0.0, 1.5, 16), 2))
        fine = np.round(best[2] + np.arange(-9, 10) * 0.01, 2)
        best = min(best, *(best_at(k) for k in fine[(fine >= 0.0) & (fine <= 1.5)]))
    error, acceptance, k = best
    result = {"acceptance": acceptance, "continuation": acceptance, "exponent": float(k), "rmse": error**0.5}
    if continuation:  # refine c on the full grid at the best k
        errors = np.mean((model(a, k, GRID[None, :, None]) - measured) ** 2, -1)
        i, j = np.unravel_index(np.argmin(errors), errors.shape)
        result.update(acceptance=float(GRID[i]), continuation=float(GRID[j]), rmse=float(errors[i, j]) ** 0.5)
    return result
