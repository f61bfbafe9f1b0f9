"""Lookahead decoding as a drop-in for ``model.generate``, inside transformers' ``generate`` or beside it.

Three doors, one decoder underneath (``LookaheadDecoder.run`` on settings from ``lade.generation``):

* ``model.generate(ids, custom_generate=lade.custom_generate, window=..., ...)``: transformers prepares
  the call (config, logits processors, stopping criteria, padding mask, rows for
  ``num_return_sequences``) and hands its decoding loop to ``custom_generate``;
* ``model.generate(ids, custom_generate="<folder or Hub repo>", trust_remote_code=True, ...)``: the
  folder ``hub/lade-lookahead`` ships ``custom_generate/generate.py`` in the Hub's layout, which calls
  ``generate`` below (transformers hands such a function every argument, unprepared);
* ``lade.generate(model, ids, ...)``: ``generate``'s signature and return type, as a plain function.

The lookahead settings are keyword arguments of all three: ``window``, ``ngram``, ``guess`` (default
``"auto"``: chosen step by step for the hardware), ``decoder`` (a ``LookaheadDecoder`` of this model to
reuse, e.g. to keep its latency calibration and strategies) and ``generator`` (a ``torch.Generator``
for every random choice; default: torch's global RNG, as ``generate``).
"""

from __future__ import annotations

import time

import torch

from lade.autotune import AUTO
from lade.decoding import LookaheadDecoder
from lade.generation import prepared, resolve


def custom_generate(
    model,
    input_ids: torch.Tensor,
    logits_processor,
    stopping_criteria,
    generation_config,
    synced_gpus: bool = False,
    streamer=None,
    window: int | str = AUTO,
    ngram: int | str = AUTO,
    guess: int | str = AUTO,
    decoder: LookaheadDecoder | None = None,
    generator: torch.Generator | None = None,
    **model_kwargs,
):
    """The decoding loop ``model.generate(..., custom_generate=lade.custom_generate)`` runs.

    transformers calls it with the prepared ``input_ids`` [B, T], ``logits_processor``,
    ``stopping_criteria`` and ``generation_config``, and the model inputs (``attention_mask``, None when it
    was all ones); ``window``/``ngram``/``guess``/``decoder``/``generator`` are the caller's keyword
    arguments of ``generate``. Returns what ``generate`` returns: LongTensor [B, T + new], or with
    ``return_dict_in_generate=True`` a ``GenerateDecoderOnlyOutput`` (a ``lade.GenerationResult``,
    with ``scores``/``logits`` when asked for and the lookahead metrics).

    transformers 5.24 passes no ``streamer`` and no ``tokenizer`` to a callable ``custom_generate``
    (``stop_strings`` then fail in its own preparation): use the folder form or ``lade.generate`` for those.
    """
    started = time.perf_counter()
    if synced_gpus:
        raise ValueError("synced_gpus is not supported by lookahead decoding (one process decodes all rows)")
    decoder = _decoder(model, decoder, window, ngram, guess)
    settings = prepared(
        model, input_ids, logits_processor, stopping_criteria, generation_config, model_kwargs, streamer
    )
    result = decoder.run(settings, generator, started)
    return result if settings.return_dict else result.sequences


def generate(
    model,
    inputs: torch.Tensor | None = None,
    generation_config=None,
    logits_processor=None,
    stopping_criteria=None,
    prefix_allowed_tokens_fn=None,
    synced_gpus: bool | None = None,
    assistant_model=None,
    streamer=None,
    negative_prompt_ids=None,
    negative_prompt_attention_mask=None,
    *,
    window: int | str = AUTO,
    ngram: int | str = AUTO,
    guess: int | str = AUTO,
    decoder: LookaheadDecoder | None = None,
    generator: torch.Generator | None = None,
    **kwargs,
):
    """``model.generate``'s signature and result, decoded by lookahead decoding.

    Every argument means what it means in ``generate`` (``tokenizer=`` for ``stop_strings`` and
    ``attention_mask=`` go in ``kwargs``); ``assistant_model``, ``negative_prompt_*`` and
    ``synced_gpus`` are refused with a ``ValueError``, as is any option whose output lookahead
    decoding cannot reproduce. Returns LongTensor [B, T + new], or with
    ``return_dict_in_generate=True`` a ``GenerateDecoderOnlyOutput`` (a ``lade.GenerationResult``).
    """
    started = time.perf_counter()
    decoder = _decoder(model, decoder, window, ngram, guess)
    settings = resolve(
        model,
        inputs,
        generation_config,
        logits_processor,
        stopping_criteria,
        prefix_allowed_tokens_fn,
        streamer,
        synced_gpus=synced_gpus,
        assistant_model=assistant_model,
        negative_prompt_ids=negative_prompt_ids,
        negative_prompt_attention_mask=negative_prompt_attention_mask,
        **kwargs,
    )
    result = decoder.run(settings, generator, started)
    return result if settings.return_dict else result.sequences


def _decoder(model, decoder: LookaheadDecoder | None, window, ngram, guess) -> LookaheadDecoder:
    if decoder is None:
        return LookaheadDecoder(model, window, ngram, guess)
    if decoder.model is not model:
        raise ValueError("decoder= must be a LookaheadDecoder of the model generate is called on")
    return decoder
