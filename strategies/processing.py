"""Logits processing with Hugging Face semantics, one verified position at a time.

The processors themselves are built by transformers (``GenerationMixin._get_logits_processor``, called
by ``lade.generation`` exactly as ``model.generate`` calls it), so every generation option that
``generate`` applies through a processor (repetition penalty, temperature, top-k/top-p/min-p/typical,
no-repeat n-grams, bad words, sequence bias, min new tokens, forced or suppressed tokens, ...) is
applied here too. What this module adds is where they are applied: at every verified position, with
that position's exact prefix (the row's tokens as ``generate`` holds them, padding included, plus the
candidate tokens accepted before it), so a processor sees what it would have seen in ``generate``.

Rows of a batch advance at their own pace, so each row is processed on its own ([1, L] input ids, [1, V]
scores). Three of HF's processors keep per-row state of the whole batch; ``for_row`` gives each row
its own slice of it. Any other processor is called as it is: user processors must be functions of the
(input ids, scores) they are given, as they are in ``generate``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import LogitsProcessorList
from transformers.generation.logits_process import (
    EncoderRepetitionPenaltyLogitsProcessor,
    PrefixConstrainedLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
)


def for_row(processors: LogitsProcessorList, row: int) -> LogitsProcessorList:
    """The processors of batch row ``row``, to be called with that row alone ([1, L] input ids).

    HF's repetition penalty (which ignores each row's left padding), encoder repetition penalty (each
    row's prompt) and prefix-constrained processor (called with the row's batch index) hold state for
    the whole batch; they are copied with the row's share. The others are shared as they are.
    """
    mine = LogitsProcessorList()
    for processor in processors:
        if isinstance(processor, RepetitionPenaltyLogitsProcessor) and isinstance(
            processor.prompt_ignore_length, torch.Tensor
        ):
            processor = copy.copy(processor)
            processor.prompt_ignore_length = processor.prompt_ignore_length[row : row + 1]
        elif isinstance(processor, EncoderRepetitionPenaltyLogitsProcessor):
            processor = copy.copy(processor)
            processor.encoder_input_ids = processor.encoder_input_ids[row : row + 1]
        elif isinstance(processor, PrefixConstrainedLogitsProcessor):
            processor = copy.copy(processor)
            allowed = processor._prefix_allowed_tokens_fn
            processor._prefix_allowed_tokens_fn = lambda _batch_id, ids, allowed=allowed: allowed(row, ids)
        mine.append(processor)
    return mine


@dataclass(frozen=True)
class RowScoring:
    """Processed scores of one row's verified positions, as ``generate`` would compute them.

    ``processors`` are the row's (``for_row``); ``prefix`` is LongTensor [L], the row's tokens up to and
    including the last committed one, as ``generate`` holds them (left padding included).
    """

    processors: LogitsProcessorList
    prefix: torch.Tensor  # [L]

    def __call__(self, accepted: Sequence[int], logits: torch.Tensor) -> torch.Tensor:
        """Scores [V] (float32) of the position after the prefix and the ``accepted`` tokens, given
        the model's logits [V] there."""
        input_ids = self.prefix
        if accepted:
            input_ids = torch.cat([input_ids, input_ids.new_tensor(list(accepted))])
        # a copy, as generate's: a processor may write into the scores it is given
        return self.processors(input_ids[None], logits[None].to(torch.float32, copy=True))[0]
