"""The methods a benchmark times, shared by ``lade.bench`` (one prompt a call) and ``lade.bench_batch``
(a left-padded batch a call): HF ``generate`` greedy and prompt lookup, the library's plain loop, auto
lookahead and lookahead at fixed W, N, G; the decoders behind them, their names and the ``generate``
settings they all share.

A method made here is a callable ``(input_ids [B, T], attention_mask [B, T]) -> (rows, steps,
overhead, logits)``: each row's new tokens (a list of token lists), the call's decoding steps (NaN where
not counted), the share of step time spent outside the model forward (NaN for HF ``generate``), and
each row's raw logits, one ``[V]`` tensor per new token (HF greedy only, the reference for
``lade.divergence``; otherwise None).

It builds decoders through ``LookaheadDecoder``'s public constructor and calls only ``generate``; it
times nothing (``lade.bench_timing``) and parses no flags (``lade.bench_setup``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from lade.decoding import AUTO_GUESS, AUTO_NGRAM, LookaheadDecoder, default_pad_id, default_pool
from lade.divergence import row_logits
from lade.options import combined_pool
from strategies.plain import AutoregressiveProposer

# (sequences [B, T + new], T) -> each row's new tokens: how a method reads its rows from ``generate``
RowReader = Callable[[torch.Tensor, int], list[list[int]]]


def greedy_options(model, max_new_tokens: int, eos: list[int]) -> dict:
    """The ``generate`` keyword arguments of a greedy benchmark call, given alike to ``model.generate``
    and to every lookahead decoder, so both resolve the same settings (the model's generation config,
    e.g. a repetition penalty, applies to both) and "identical" compares like with like. The sampling
    controls are unset: they do nothing under greedy decoding but make transformers warn."""
    return {
        "max_new_tokens": max_new_tokens,
        "do_sample": False,
        "eos_token_id": eos,
        "pad_token_id": default_pad_id(model, eos),
        "temperature": None,
        "top_k": None,
        "top_p": None,
    }


def plain_decoder(model) -> LookaheadDecoder:
    """The library's plain loop: one token per step, no branch, no candidates."""
    return LookaheadDecoder(model, window=1, ngram=2, guess=0, proposer=AutoregressiveProposer())


def config_decoder(model, window: int, ngram: int, guess: int) -> LookaheadDecoder:
    """A decoder at fixed W, N, G; W=0: no lookahead branch, verify pool n-grams only (the auto
    planner's CPU regime, with auto's pool)."""
    if window == 0:
        pool = default_pool(ngram, guess, auto=True)
        proposer = AutoregressiveProposer(ngram=ngram)
        return LookaheadDecoder(model, 1, ngram, guess, proposer=proposer, pool=pool)
    return LookaheadDecoder(model, window=window, ngram=ngram, guess=guess)


def auto_decoder(model, latency=None, span: int | None = None, calibration_dir=None) -> LookaheadDecoder:
    """Auto lookahead (W, N, G chosen per step), planning on ``latency`` (None: calibrated, cached in
    ``calibration_dir``, default ``~/.cache/lade/calibration``); ``span``: its pool's text
    continuations of ``span`` tokens instead of the default ``AUTO_SPAN``."""
    pool = None if span is None else combined_pool(AUTO_NGRAM, AUTO_GUESS, auto=True, span=span)
    return LookaheadDecoder(model, latency=latency, pool=pool, calibration_dir=calibration_dir)


SOURCE_SUBSETS = {"auto_only_": "only", "auto_without_": "without"}  # method-name prefix -> combined_pool's


def source_subset_pool(name: str, persistent: bool = False):
    """The pool of the method ``auto_only_{source}`` (the default decoder's planner over that one draft
    source) or ``auto_without_{source}`` (over every source but it), sources as ``lade.options.
    DRAFT_SOURCES`` names them (another raises ``ValueError``); None for any other method name.
    ``persistent``: Token Recycling's table kept across calls (``combined_pool``)."""
    for prefix, keyword in SOURCE_SUBSETS.items():
        if name.startswith(prefix):
            source = name.removeprefix(prefix)
            return combined_pool(
                AUTO_NGRAM, AUTO_GUESS, auto=True, persistent=persistent, **{keyword: source}
            )
    return None


def prompt_lookup_name(k: int) -> str:
    """The method name of HF prompt lookup at ``prompt_lookup_num_tokens`` K, when several K run."""
    return f"hf_prompt_lookup K={k}"


def config_name(config: tuple[int, int, int]) -> str:
    """The method name of lookahead at fixed ``(W, N, G)``."""
    window, ngram, guess = config
    return f"lookahead W={window} N={ngram} G={guess}"


def auto_span_name(span: int) -> str:
    """The method name of auto with candidates of ``span`` tokens (``auto_decoder(..., span=)``)."""
    return f"auto span={span}"


def first_row(sequences: torch.Tensor, prompt_width: int) -> list[list[int]]:
    """Row 0's new tokens of a one-prompt output [1, T + new], everything after the prompt."""
    return [sequences[0, prompt_width:].tolist()]


class ForwardCounter:
    """Counts a model's forward calls through a forward hook (the steps of HF ``generate``)."""

    def __init__(self, model):
        self.calls = 0
        model.register_forward_hook(self._hook)

    def _hook(self, module, args, output) -> None:
        self.calls += 1


def hf_method(
    model,
    options: dict,
    read_rows: RowReader,
    counter: ForwardCounter | None = None,
    keep_logits: bool = False,
    **extra,
):
    """HF ``model.generate`` as a method (see the module docstring) with ``options`` and ``extra``
    (e.g. ``prompt_lookup_num_tokens``). Steps: the forward calls ``counter`` saw during the call (the
    prefill included, as it yields the first token, as a lookahead decoder's first step does); NaN
    without a counter. ``keep_logits``: return each row's ``output_logits``."""

    def call(ids: torch.Tensor, mask: torch.Tensor):
        before = counter.calls if counter is not None else 0
        out = model.generate(
            ids.to(model.device),
            attention_mask=mask.to(model.device),
            return_dict_in_generate=True,
            output_logits=keep_logits,
            **options,
            **extra,
        )
        rows = read_rows(out.sequences, ids.shape[1])
        logits = [row_logits(out.logits, b) for b in range(len(rows))] if keep_logits else None
        steps = counter.calls - before if counter is not None else float("nan")
        return rows, steps, float("nan"), logits

    return call


def decoder_method(decoder: LookaheadDecoder, options: dict, read_rows: RowReader):
    """``decoder.generate`` with ``options`` as a method (see the module docstring)."""

    def call(ids: torch.Tensor, mask: torch.Tensor):
        res = decoder.generate(ids, attention_mask=mask, **options)
        return read_rows(res.sequences, ids.shape[1]), res.metrics.steps, res.metrics.overhead_fraction, None

    return call
