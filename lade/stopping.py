"""Where ``generate`` would stop a row, checked at every committed token.

A lookahead step commits a block of tokens at once; ``generate`` checks its stopping criteria after
every single token. ``StopRule.cut`` replays that check token by token over the block and cuts it just
after the first token at which ``generate`` would have stopped, so the output ends exactly where
``generate``'s does, wherever that falls inside a block.

The criteria are the ones ``generate`` builds (``GenerationMixin._get_stopping_criteria``: the maximum
length, ``max_time``, ``stop_strings``, the EOS ids, merged with the caller's ``stopping_criteria``).
HF's own maximum-length and EOS criteria are read, not called: the length becomes a token budget and
the EOS ids a set, so the common case costs no tensor work per token; every other criterion is called
with the row as ``generate`` holds it (``input_ids`` [1, L], left padding included).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import StoppingCriteriaList
from transformers.generation.stopping_criteria import EosTokenCriteria, MaxLengthCriteria


class StopRule:
    """The stopping criteria of one call, applied to blocks of committed tokens.

    Args:
        criteria: the call's ``StoppingCriteriaList`` (as ``generate`` builds it).
        prompt_width: T, the width of the prompts as given ([B, T], padding included): a row of ``generate``
            holds T + (tokens generated) ids, which is what its maximum-length criterion counts.
        max_new_tokens: a budget of new tokens per row on top of the criteria (None: the criteria's only).
    """

    def __init__(self, criteria: StoppingCriteriaList, prompt_width: int, max_new_tokens: int | None = None):
        budgets = [c.max_length - prompt_width for c in criteria if type(c) is MaxLengthCriteria]
        if max_new_tokens is not None:
            budgets.append(max_new_tokens)
        if not budgets:
            raise ValueError("generation needs a length limit: pass max_new_tokens or max_length")
        self.max_new_tokens = max(0, min(budgets))
        self.eos = frozenset(
            token
            for c in criteria
            if type(c) is EosTokenCriteria
            for token in c.eos_token_id.view(-1).tolist()
        )
        self.others = StoppingCriteriaList(
            c for c in criteria if type(c) not in (MaxLengthCriteria, EosTokenCriteria)
        )

    def cut(
        self,
        row: torch.Tensor | None,
        generated: int,
        tokens: Sequence[int],
        scores: Sequence[torch.Tensor] | None = None,
    ) -> tuple[int, bool]:
        """How many of a step's ``tokens`` to commit, and whether the row is finished.

        Args:
            row: LongTensor [L + len(tokens)] of the row as ``generate`` holds it once ``tokens`` are
                appended (read only when the call has criteria beyond length and EOS: ``others``).
            generated: tokens the row generated before this step.
            tokens: the step's verified tokens, in order.
            scores: the row's recorded processed scores, [V] per generated token including this step's
                (None unless the call records them): those criteria get the ones up to the token they
                check, as ``generate`` passes its scores (a tuple of [1, V], or None).
        """
        budget = self.max_new_tokens - generated
        for i, token in enumerate(tokens):
            if i + 1 >= budget or token in self.eos:
                return i + 1, True
            if self.others:
                end = row.shape[0] - len(tokens) + i + 1
                so_far = None if scores is None else tuple(s[None] for s in scores[: generated + i + 1])
                if bool(self.others(row[:end][None], so_far).any()):
                    return i + 1, True
        return len(tokens), False
