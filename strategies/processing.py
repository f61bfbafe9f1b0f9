"""Generation controls with Hugging Face semantics, applied to one verified position at a time.

``build_processors`` assembles the same ``LogitsProcessorList`` that ``model.generate`` builds for
the supported options, in the same order (processors, then the user's list merged HF-style, then
the sampling warpers temperature, top-k, top-p, min-p). Every processor sees the exact prefix of the
position it scores: the committed tokens plus the candidate tokens accepted before it. Options that
``generate`` would apply but this module cannot reproduce raise ``ValueError`` instead of silently
changing the distribution.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import GenerationConfig, LogitsProcessorList
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

# GenerationConfig fields that would add processors we do not reproduce, with their "off" values.
UNSUPPORTED_FIELDS = {
    "num_beams": (None, 1),
    "guidance_scale": (None, 1, 1.0),
    "no_repeat_ngram_size": (None, 0),
    "bad_words_ids": (None,),
    "sequence_bias": (None,),
    "typical_p": (None, 1.0),
    "epsilon_cutoff": (None, 0.0),
    "eta_cutoff": (None, 0.0),
    "top_h": (None,),
    "encoder_repetition_penalty": (None, 1.0),
    "forced_bos_token_id": (None,),
    "forced_eos_token_id": (None,),
    "suppress_tokens": (None,),
    "begin_suppress_tokens": (None,),
    "min_length": (None, 0),
    "min_new_tokens": (None, 0),
    "watermarking_config": (None,),
    "renormalize_logits": (None, False),
}


def check_sampling_options(temperature, top_k, top_p, min_p, repetition_penalty) -> None:
    """Clear ``ValueError`` for values HF would reject or silently misuse."""
    if temperature is not None and not temperature > 0:
        raise ValueError(
            f"temperature must be > 0 when sampling, got {temperature} (use do_sample=False for greedy)"
        )
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
        raise ValueError(f"top_k must be an integer >= 0 (0 = off), got {top_k!r}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1] (1 = off), got {top_p}")
    if min_p is not None and not 0 <= min_p <= 1:
        raise ValueError(f"min_p must be in [0, 1], got {min_p}")
    if repetition_penalty is not None and not repetition_penalty > 0:
        raise ValueError(f"repetition_penalty must be > 0 (1 = off), got {repetition_penalty}")


def build_processors(
    do_sample: bool,
    temperature: float | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    repetition_penalty: float | None = None,
    logits_processor: Sequence | None = None,
    generation_config: GenerationConfig | None = None,
) -> LogitsProcessorList:
    """The processors ``generate`` would apply, for the options given (explicit arguments win over
    ``generation_config``; ``top_k=0`` and ``top_p=1.0`` mean off, as in HF)."""
    config = generation_config or GenerationConfig()
    for name, off_values in UNSUPPORTED_FIELDS.items():
        value = getattr(config, name, None)
        if value not in off_values:
            raise ValueError(
                f"generation_config.{name}={value!r} cannot be applied exactly by lookahead decoding; "
                "pass an equivalent LogitsProcessor in logits_processor instead"
            )

    def pick(value, name):
        return value if value is not None else getattr(config, name, None)

    temperature, top_k, top_p = pick(temperature, "temperature"), pick(top_k, "top_k"), pick(top_p, "top_p")
    min_p, repetition_penalty = pick(min_p, "min_p"), pick(repetition_penalty, "repetition_penalty")
    if do_sample:
        check_sampling_options(temperature, top_k, top_p, min_p, repetition_penalty)
    elif repetition_penalty is not None:
        check_sampling_options(None, None, None, None, repetition_penalty)

    processors = LogitsProcessorList()
    if repetition_penalty is not None and repetition_penalty != 1.0:
        processors.append(RepetitionPenaltyLogitsProcessor(penalty=repetition_penalty))
    for custom in logits_processor or ():  # HF merge: a custom processor replaces a default of its type
        same = [i for i, p in enumerate(processors) if type(p) is type(custom)]
        if same:
            processors[same[0]] = custom
        else:
            processors.append(custom)
    if do_sample:
        if temperature is not None and temperature != 1.0:
            processors.append(TemperatureLogitsWarper(temperature))
        if top_k is not None and top_k != 0:
            processors.append(TopKLogitsWarper(top_k=top_k))
        if top_p is not None and top_p < 1.0:
            processors.append(TopPLogitsWarper(top_p=top_p))
        if min_p is not None:
            processors.append(MinPLogitsWarper(min_p=min_p))
    return processors


def process(processors: LogitsProcessorList, prefix: Sequence[int], scores: torch.Tensor) -> torch.Tensor:
    """Scores [V] of one position after ``processors``, given its exact ``prefix`` (token ids)."""
    if not processors:
        return scores
    input_ids = torch.tensor([list(prefix)], dtype=torch.long, device=scores.device)
    return processors(input_ids, scores[None].float())[0]
