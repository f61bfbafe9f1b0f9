"""The Hugging Face front: what a ``generate`` call means, resolved exactly as ``model.generate`` does.

Nothing here re-implements transformers' rules: the settings go through the same ``GenerationMixin``
steps, in the same order, as a decoder-only ``model.generate(input_ids, ...)`` call (transformers 5.24):
the generation config is prepared (the caller's ``GenerationConfig`` and keyword arguments over the
model's ``generation_config`` over the global defaults), the generation mode read, the special tokens
prepared, the attention mask inferred from padding when none is given, rows repeated for
``num_return_sequences``, the length limits set, and the logits processors and stopping criteria built
by transformers' own builders. ``resolve`` does that for a direct call (``LookaheadDecoder.generate``,
``lade.generate``); ``prepared`` takes what ``generate`` already prepared (``custom_generate``).

Owns: reading a call's arguments into ``CallSettings``, and refusing, with a ``ValueError`` naming
them, the options whose output lookahead decoding cannot reproduce exactly. It never touches the model's
weights or runs a forward pass.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList
from transformers.generation.configuration_utils import GenerationMode
from transformers.generation.logits_process import UnbatchedClassifierFreeGuidanceLogitsProcessor

from lade.attention import MaskPlan
from lade.stopping import StopRule

SUPPORTED_MODES = (GenerationMode.GREEDY_SEARCH, GenerationMode.SAMPLE)
# Model inputs a lookahead call accepts besides input_ids: the padding mask, and what generate itself
# passes to a custom_generate function (positions and caching are lookahead decoding's own business).
ACCEPTED_MODEL_KWARGS = ("attention_mask", "position_ids", "use_cache", "logits_to_keep", "cache")
# Generation-config fields whose effect cannot be reproduced, with the reason.
REFUSED_FIELDS = {
    "token_healing": "token healing rewrites the prompt",
    "watermarking_config": "watermarking processors keep state across generate's steps",
    "output_attentions": "attentions of a lookahead step are those of its token tree, not generate's",
    "output_hidden_states": "hidden states of a lookahead step are those of its token tree, not generate's",
}
QUANTIZED_CACHES = ("quantized", "offloaded_quantized")


@dataclass
class CallSettings:
    """Everything a lookahead call needs to decode as ``generate`` would.

    ``input_ids`` [B, T] are the prompts as ``generate`` holds them (padding kept, rows repeated for
    ``num_return_sequences``); ``valid`` [B, T] is False at padding. ``config`` is the prepared
    ``GenerationConfig`` (``max_length``, special-token tensors, ``do_sample``, output flags);
    ``processors`` and ``stop`` are built by transformers' builders; ``pad`` fills rows that finished
    before the longest one.
    """

    input_ids: torch.Tensor  # [B, T] long
    valid: torch.Tensor  # [B, T] bool
    config: GenerationConfig
    processors: LogitsProcessorList
    stop: StopRule
    pad: int
    streamer: object | None = None

    @property
    def do_sample(self) -> bool:
        return bool(self.config.do_sample)

    @property
    def max_new_tokens(self) -> int:
        return self.stop.max_new_tokens

    @property
    def return_dict(self) -> bool:
        return bool(self.config.return_dict_in_generate)

    @property
    def record_scores(self) -> bool:
        return self.return_dict and bool(self.config.output_scores)

    @property
    def record_logits(self) -> bool:
        return self.return_dict and bool(self.config.output_logits)


def resolve(
    model,
    inputs: torch.Tensor | None = None,
    generation_config: GenerationConfig | None = None,
    logits_processor: LogitsProcessorList | None = None,
    stopping_criteria: StoppingCriteriaList | None = None,
    prefix_allowed_tokens_fn=None,
    streamer=None,
    defaults: dict | None = None,
    **kwargs,
) -> CallSettings:
    """The settings of ``model.generate(inputs, generation_config, logits_processor, stopping_criteria,
    prefix_allowed_tokens_fn, streamer=streamer, **kwargs)``, prepared as ``generate`` prepares them.

    ``defaults`` (a decoder's own settings, e.g. its sampling verifier's ``temperature``) rank between
    the call's and the model's: keyword arguments > ``generation_config`` > ``defaults`` > the model's
    ``generation_config`` > transformers' global defaults. ``tokenizer=`` (for ``stop_strings``) and
    ``attention_mask=`` go in ``kwargs``, as in ``generate``. Raises ``ValueError`` for inputs and
    options that cannot be decoded exactly.
    """
    for name in (
        "assistant_model",
        "assistant_tokenizer",
        "negative_prompt_ids",
        "negative_prompt_attention_mask",
    ):
        if kwargs.pop(name, None) is not None:
            raise ValueError(
                f"{name} is not supported by lookahead decoding (greedy search and sampling only)"
            )
    tokenizer = kwargs.pop("tokenizer", None)
    if kwargs.pop("synced_gpus", None):
        raise ValueError("synced_gpus is not supported by lookahead decoding (one process decodes all rows)")
    input_ids = inputs if inputs is not None else kwargs.pop("input_ids", None)
    input_ids = check_input_ids(model, input_ids)

    # generate's step 1: the config, from kwargs over the given config over the model's over the globals
    has_default_max_length = (
        kwargs.get("max_length") is None
        and (generation_config is None or generation_config.max_length is None)
        and model.generation_config.max_length is None
    )
    has_default_min_length = (
        kwargs.get("min_length") is None
        and (generation_config is None or generation_config.min_length is None)
        and model.generation_config.min_length is None
    )
    if defaults:
        if generation_config is None:  # as keyword arguments, under the caller's own
            kwargs = {**defaults, **kwargs}
        else:  # filling what the caller's config leaves unset
            generation_config = copy.deepcopy(generation_config)
            unset = {k: v for k, v in defaults.items() if getattr(generation_config, k, None) is None}
            generation_config.update(**unset)
    config, model_kwargs = model._prepare_generation_config(generation_config, **kwargs)
    _check_mode(config)
    model._validate_model_kwargs(
        model_kwargs.copy()
    )  # typos in generate's arguments, as generate reports them
    attention_mask = model_kwargs.pop("attention_mask", None)
    _check_model_kwargs(model_kwargs)

    # steps 3-5: special tokens, the padding mask (inferred from pad tokens when not given), expansion
    if config.eos_token_id is not None and not _ids(config.eos_token_id):
        config.eos_token_id = None  # an empty list means no EOS (generate would fail on it without a pad id)
    batch = input_ids.shape[0]
    model._prepare_special_tokens(
        config, attention_mask is not None, device=input_ids.device, batch_size=batch
    )
    if attention_mask is None:
        attention_mask = model._prepare_attention_mask_for_generation(input_ids, config, {})
    valid = check_attention_mask(model, input_ids, attention_mask)
    repeats = config.num_return_sequences or 1
    if repeats > 1:
        input_ids = input_ids.repeat_interleave(repeats, dim=0)
        valid = valid.repeat_interleave(repeats, dim=0)
    if streamer is not None:
        if input_ids.shape[0] > 1:
            raise ValueError("a streamer takes one sequence; batches (B > 1) cannot be streamed")
        _stream_prompt(streamer, input_ids)

    # step 6: lengths
    width = input_ids.shape[1]
    config = model._prepare_generated_length(
        generation_config=config,
        has_default_max_length=has_default_max_length,
        has_default_min_length=has_default_min_length,
        model_input_name="input_ids",
        input_ids_length=width,
        inputs_tensor=input_ids,
    )
    if config.max_length > width:  # zero new tokens returns the prompts (generate would refuse)
        model._validate_generated_length(config, width, has_default_max_length)

    # step 8: processors and stopping criteria, by transformers' builders
    mask = None if bool(valid.all()) else valid.long()  # generate drops an all-ones mask first
    processors = model._get_logits_processor(
        generation_config=config,
        input_ids_seq_length=width,
        encoder_input_ids=input_ids,
        prefix_allowed_tokens_fn=prefix_allowed_tokens_fn,
        logits_processor=logits_processor if logits_processor is not None else LogitsProcessorList(),
        device=input_ids.device,
        model_kwargs={"attention_mask": mask},
    )
    criteria = model._get_stopping_criteria(
        generation_config=config,
        stopping_criteria=stopping_criteria if stopping_criteria is not None else StoppingCriteriaList(),
        tokenizer=tokenizer,
    )
    return _settings(input_ids, valid, config, processors, criteria, streamer)


def prepared(
    model,
    input_ids: torch.Tensor,
    logits_processor: LogitsProcessorList,
    stopping_criteria: StoppingCriteriaList,
    generation_config: GenerationConfig,
    model_kwargs: dict,
    streamer=None,
) -> CallSettings:
    """The settings of a ``custom_generate`` call: ``generate`` has prepared the config, the processors
    and the criteria, expanded the rows and passed the model inputs (``attention_mask`` is None when it
    was all ones)."""
    _check_mode(generation_config)
    _check_model_kwargs(model_kwargs)
    input_ids = check_input_ids(model, input_ids)
    attention_mask = model_kwargs.get("attention_mask")
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    valid = check_attention_mask(model, input_ids, attention_mask)
    if streamer is not None and input_ids.shape[0] > 1:
        raise ValueError("a streamer takes one sequence; batches (B > 1) cannot be streamed")
    return _settings(input_ids, valid, generation_config, logits_processor, stopping_criteria, streamer)


def _settings(input_ids, valid, config, processors, criteria, streamer) -> CallSettings:
    for processor in processors:
        if isinstance(processor, UnbatchedClassifierFreeGuidanceLogitsProcessor):
            raise ValueError(
                "guidance_scale (classifier-free guidance) cannot be reproduced by lookahead decoding: its "
                "processor runs the model once per generate step with a cache of its own"
            )
    pad = config._pad_token_tensor
    pad = int(pad.view(-1)[0]) if pad is not None else 0
    stop = StopRule(criteria, input_ids.shape[1])
    return CallSettings(input_ids, valid, config, processors, stop, pad, streamer)


def _check_mode(config: GenerationConfig) -> None:
    mode = config.get_generation_mode()
    if mode not in SUPPORTED_MODES:
        raise ValueError(
            f"generation mode {mode.value!r} cannot be reproduced by lookahead decoding, which supports "
            "greedy search and sampling (num_beams=1; no assistant model, prompt lookup, DoLa, contrastive "
            "search or constraints)"
        )
    for name, reason in REFUSED_FIELDS.items():
        if getattr(config, name, None):
            raise ValueError(f"{name} is not supported by lookahead decoding: {reason}")
    if config.cache_implementation in QUANTIZED_CACHES:
        raise ValueError(
            f"cache_implementation={config.cache_implementation!r} changes the logits; lookahead decoding "
            "keeps a full-precision cache of its own"
        )


def _check_model_kwargs(model_kwargs: dict) -> None:
    unused = sorted(k for k, v in model_kwargs.items() if v is not None and k not in ACCEPTED_MODEL_KWARGS)
    if unused:
        raise ValueError(
            f"model inputs {unused} are not supported by lookahead decoding (it takes input_ids and an "
            "attention_mask; positions, masks and the cache of each step are its own)"
        )


def _ids(value) -> list[int]:
    """A token id or ids (int, list, tensor) as a list."""
    if isinstance(value, torch.Tensor):
        return value.view(-1).tolist()
    return [value] if isinstance(value, int) else list(value)


def _stream_prompt(streamer, input_ids: torch.Tensor) -> None:
    if hasattr(streamer, "put"):  # a transformers BaseStreamer gets the prompt first, as in generate
        streamer.put(input_ids.cpu())


def check_input_ids(model, input_ids) -> torch.Tensor:
    """``input_ids`` as LongTensor [B, T] on the model's input device; ``ValueError`` naming what is wrong."""
    vocab_size = model.config.get_text_config(decoder=True).vocab_size
    if not isinstance(input_ids, torch.Tensor):
        raise ValueError(f"input_ids must be a LongTensor of shape [B, T], got {type(input_ids).__name__}")
    if input_ids.dtype not in (torch.long, torch.int, torch.int16, torch.int8, torch.uint8):
        raise ValueError(f"input_ids must hold integer token ids, got dtype {input_ids.dtype}")
    if input_ids.dim() == 1:
        input_ids = input_ids[None]
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must have shape [B, T], got {tuple(input_ids.shape)}")
    if input_ids.numel() == 0:
        raise ValueError("input_ids is empty: at least one prompt token per row is needed")
    if int(input_ids.min()) < 0 or int(input_ids.max()) >= vocab_size:
        raise ValueError(f"input_ids holds ids outside the vocabulary [0, {vocab_size})")
    device = model.get_input_embeddings().weight.device
    return input_ids.to(device=device, dtype=torch.long)


def check_attention_mask(model, input_ids: torch.Tensor, attention_mask) -> torch.Tensor:
    """BoolTensor [B, T], False at padding. Every row must end with a real token (left padding, as
    ``generate`` expects of decoder-only models); padding between real tokens (what ``generate`` infers
    from pad tokens inside a prompt) is accepted, except on models with sliding-window layers, whose
    windows ``generate`` counts in cache slots, pads included."""
    if not isinstance(attention_mask, torch.Tensor) or attention_mask.shape != input_ids.shape:
        shape = tuple(getattr(attention_mask, "shape", ()))
        raise ValueError(
            f"attention_mask must have the shape of input_ids {tuple(input_ids.shape)}, got {shape}"
        )
    if not bool(((attention_mask == 0) | (attention_mask == 1)).all()):
        raise ValueError("attention_mask must hold only 0 (padding) and 1 (token)")
    valid = attention_mask.to(device=input_ids.device, dtype=torch.bool)
    if not bool(valid[:, -1].all()):
        raise ValueError(
            "attention_mask must describe left padding: every row's last column must be a real token, as "
            "HF generate expects of decoder-only models (tokenizer.padding_side = 'left')"
        )
    holes = bool((valid[:, 1:].long() < valid[:, :-1].long()).any())
    if holes and any(window is not None for window in MaskPlan.from_config(model.config).windows.values()):
        raise ValueError(
            "attention_mask has padding between real tokens (e.g. a pad token inside a prompt, from which "
            "generate infers the mask); on a model with sliding-window layers generate counts those slots "
            "in the window, which lookahead decoding cannot reproduce: pass left padding only"
        )
    return valid


def check_against_model(settings: CallSettings, vocab_size: int, context_length: int | None) -> None:
    """``ValueError`` when the call's EOS or pad ids lie outside the vocabulary, or its longest prompt
    plus ``max_new_tokens`` exceeds the model's context length."""
    for token in sorted(settings.stop.eos):
        if not 0 <= token < vocab_size:
            raise ValueError(f"eos_token_id {token!r} is outside the vocabulary [0, {vocab_size})")
    if context_length is not None:
        longest = int(settings.valid.sum(dim=1).max())
        if longest + settings.max_new_tokens > context_length:
            raise ValueError(
                f"prompt length {longest} + max_new_tokens {settings.max_new_tokens} exceeds the "
                f"model's context length {context_length}"
            )
    if not 0 <= settings.pad < vocab_size:
        raise ValueError(
            f"pad_token_id must be an id in the vocabulary [0, {vocab_size}), got {settings.pad}"
        )
