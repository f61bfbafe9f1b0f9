"""Lossless sampling verification: multi-candidate speculative sampling with one-hot drafts."""

from __future__ import annotations

import torch

from lade.interfaces import Verifier
from lade.types import Candidates, Verification
from strategies.processing import RowScoring


class SamplingVerifier(Verifier):
    """Commits tokens distributed exactly as the model's own sampling would produce them.

    Algorithm, position by position (j = 0 .. N-2), starting with every candidate alive:

    1. ``p`` = softmax of the processed scores at this position (``scoring``: the call's logits
       processors given its exact prefix, the committed tokens and the tokens accepted so far; the
       row of any alive candidate: they share it).
    2. For each alive candidate in order, with draft token ``d`` (its token j; a token already
       rejected here is skipped): accept ``d`` with probability ``r(d) / sum(r)``, where ``r`` starts as
       ``p``; on rejection set ``r(d) = 0`` and try the next candidate.
    3. If a draft was accepted, keep only the candidates whose token j is ``d`` and that have a
       token j+1 of their own (``Candidates.lengths``: padding is no draft), and go to the next
       position (once none is left, sample the bonus token from the next ``p``). If every
       draft was rejected, sample the committed token from ``r / sum(r)`` and stop.

    Why it is exact: a draft is a point mass, so accepting ``d1`` with probability ``p(d1)`` and
    otherwise sampling from ``p`` with ``d1`` removed and renormalised yields ``p`` itself; trying the
    next draft ``d2`` against that residual is the same argument applied again (recursive rejection
    sampling; Leviathan et al. 2023, Chen et al. 2023, SpecTr). The drafts depend only on the past,
    never on this position's randomness, so every committed token is drawn from the model's
    conditional distribution given its prefix: the sequence is distributed as plain sampling.

    A decoder built with this verifier samples unless a call asks for ``do_sample=False``; the
    controls given here are that decoder's defaults, under what a call passes (see
    ``lade.generation``), and the processors that apply them are built by transformers, as in
    ``generate`` (its default ``top_k=50`` included, unless set).

    Args:
        temperature, top_k, top_p, min_p, repetition_penalty: generation defaults (``top_k=0`` and
            ``top_p=1.0`` mean off, as in HF; None: the model's ``generation_config``).
        generator: the ``torch.Generator`` that drives every random choice (seed it to repeat a run);
            ``seed`` makes one. Neither: torch's global RNG, as ``generate`` (``torch.manual_seed``
            repeats a call; two unseeded calls differ). A call's ``generator=`` wins over both.
    """

    samples = True

    def __init__(
        self,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        min_p: float | None = None,
        repetition_penalty: float | None = None,
        generator: torch.Generator | None = None,
        seed: int | None = None,
    ):
        controls = {
            "temperature": temperature,
            "top_k": top_k,
            "top_p": top_p,
            "min_p": min_p,
            "repetition_penalty": repetition_penalty,
        }
        self.controls = {name: value for name, value in controls.items() if value is not None}
        if generator is None and seed is not None:
            generator = torch.Generator().manual_seed(seed)
        self.generator = generator

    def generation_defaults(self) -> dict:
        return {"do_sample": True, **self.controls}

    def _probabilities(self, scores: torch.Tensor) -> torch.Tensor:
        return torch.softmax(scores.double(), dim=-1).cpu()

    def _uniform(self) -> float:
        if self.generator is None:  # torch's global RNG, as generate
            return float(torch.rand(()))
        return float(torch.rand((), generator=self.generator, device=self.generator.device))

    def _sample(self, weights: torch.Tensor) -> int:
        if self.generator is None:
            return int(torch.multinomial(weights, 1))
        return int(torch.multinomial(weights.to(self.generator.device), 1, generator=self.generator))

    def verify(
        self, logits: torch.Tensor, candidates: Candidates, scoring: RowScoring | None = None
    ) -> Verification:
        drafts, rows = candidates.tokens.tolist(), candidates.row_map()  # [G'][N-1] each
        own = candidates.own_lengths()  # [G']: past them a candidate's row is padding, never a draft
        alive = [index for index in range(candidates.count) if own[index] > 0]
        accepted: list[int] = []
        winner = -1  # the first candidate that holds every accepted token
        scores: list[torch.Tensor] = []  # [V] processed scores of each position reached
        row = 0  # logits row of the current position: after the last committed token
        while True:
            scores.append(logits[row].float() if scoring is None else scoring(accepted, logits[row]))
            probabilities = self._probabilities(scores[-1])
            if not alive:
                token = self._sample(probabilities)
                break
            residual = probabilities.clone()
            chosen = None
            for index in alive:
                draft = drafts[index][len(accepted)]
                total = float(residual.sum())
                if residual[draft] == 0 or total <= 0:
                    continue  # rejected before at this position (or outside the support)
                if self._uniform() * total < float(residual[draft]):
                    chosen = draft
                    break
                residual[draft] = 0.0
            if chosen is None:
                token = self._sample(residual)
                break
            position = len(accepted)
            accepted.append(chosen)
            following = [index for index in alive if drafts[index][position] == chosen]
            row = rows[following[0]][position]
            winner = following[0]
            alive = [index for index in following if own[index] > position + 1]
        return Verification(
            tokens=[*accepted, token],
            candidate_index=winner,
            matched=len(accepted),
            scores=tuple(scores),
        )
