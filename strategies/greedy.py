"""Greedy verification with the bonus token."""

from __future__ import annotations

import torch

from lade.interfaces import Verifier
from lade.types import Candidates, Verification
from strategies.processing import RowScoring


def greedy_tokens(logits: torch.Tensor) -> torch.Tensor:
    """The argmax over the last dimension of ``logits`` [..., V]: LongTensor [...]. Reduced-precision
    logits are upcast to float32 first, as HF's greedy ``generate`` does: the upcast is exact, so the
    index (the first maximum) is the same. The index is ``max``'s: torch documents it, as ``argmax``'s,
    as the first maximum (ties, ``-inf`` and NaN included: tested against ``argmax``), and its CPU
    kernel took less time (``experiments/results/step_costs/greedy_max``: the verify stage)."""
    if logits.dtype in (torch.bfloat16, torch.float16):
        logits = logits.float()
    return logits.max(dim=-1).indices


class GreedyVerifier(Verifier):
    """Accepts the longest candidate prefix that equals the model's own argmax, plus the next argmax.

    For candidate ``i`` the model's greedy continuation is ``m_i = [argmax(row 0), argmax after its
    token 0, ..., argmax after its token N-2]`` (N tokens). The candidate matches up to the first ``j``
    with ``candidate[i, j] != m_i[j]`` (or its padding begins: ``Candidates.lengths``); the committed
    tokens are ``m_i[:k+1]`` for the best candidate with ``k`` matches: the matched tokens and the bonus
    token, up to N per step. Ties go to the first candidate. With no candidates this is one plain greedy
    step.

    With logits processors (a ``scoring``: repetition penalty, min new tokens, ... as greedy
    ``generate`` applies them), each position's argmax is taken over its processed scores given its
    exact prefix, position by position.

    A decoder built with this verifier decodes greedily unless a call asks for ``do_sample=True``.
    """

    samples = False

    def verify(
        self, logits: torch.Tensor, candidates: Candidates, scoring: RowScoring | None = None
    ) -> Verification:
        if scoring is not None and scoring.processors:
            return self._verify_processed(logits, candidates, scoring)
        predicted = greedy_tokens(logits)  # [1 + G'(N-1)]
        if candidates.count == 0:
            return Verification(tokens=[int(predicted[0])], candidate_index=-1, matched=0)
        tokens = candidates.tokens.to(predicted.device)  # [G', N-1]
        if candidates.rows is None:  # chains: the rows in candidate order
            following = predicted[1:].view(tokens.shape)
        else:  # a trie: each candidate token's node
            following = predicted[torch.tensor(candidates.rows, device=predicted.device)]
        continuation = torch.cat(  # [G', N]: the model's own next token at each candidate position
            [predicted[:1].expand(tokens.shape[0], 1), following], dim=1
        )
        agree = tokens == continuation[:, :-1]  # [G', N-1]
        own = candidates.own_lengths()
        if min(own) < tokens.shape[1]:  # padding is never accepted
            positions = torch.arange(tokens.shape[1], device=agree.device)
            agree &= positions < torch.tensor(own, device=agree.device)[:, None]
        matched = agree.cumprod(dim=1).sum(dim=1)  # [G']
        best = matched.argmax()
        # one device-to-host transfer: [best, k, the best candidate's continuation]
        best, k, *row = torch.cat([best.view(1), matched[best].view(1), continuation[best]]).tolist()
        return Verification(tokens=row[: k + 1], candidate_index=best if k > 0 else -1, matched=k)

    def _verify_processed(
        self, logits: torch.Tensor, candidates: Candidates, scoring: RowScoring
    ) -> Verification:
        """Position by position: the processed argmax given the accepted prefix, while a candidate agrees."""
        drafts, rows, own = candidates.tokens.tolist(), candidates.row_map(), candidates.own_lengths()
        alive, accepted, scores, row = list(range(candidates.count)), [], [], 0
        while True:
            scores.append(scoring(accepted, logits[row]))
            token = int(scores[-1].argmax())
            position = len(accepted)
            matching = [i for i in alive if position < own[i] and drafts[i][position] == token]
            if not matching:
                break
            accepted.append(token)
            alive = matching
            row = rows[alive[0]][position]
        winner = alive[0] if accepted else -1
        return Verification(
            tokens=[*accepted, token], candidate_index=winner, matched=len(accepted), scores=tuple(scores)
        )
