"""SDPA attention that reads grouped key/value heads in place: ``attn_implementation="sdpa_gqa"``.

A model with grouped-query attention (GQA: fewer key/value heads than query heads, as SmolLM2's 3
for 9 and Qwen2.5's 2 for 12) stores each key/value head once. Transformers' ``sdpa`` attention
copies them out to one per query head (``repeat_kv``) whenever a forward of several tokens comes
with a mask: the whole cache, in every layer, at every such step. A one-token step (``generate``'s
greedy loop) skips the copy, but every lookahead step (a mask, several tokens) pays it, and it grows
with the context (per forward: ``experiments/gqa_latency.py``; end to end:
``experiments/draft_ablation.py`` with ``auto@sdpa_gqa``; both in ``experiments/results/gqa_attention``).
SDPA reads the grouped heads itself when asked (``enable_gqa=True``), mask or not; this implementation
asks, and is transformers' ``sdpa`` otherwise (one-token steps, no GQA, a per-head mask, position biases).
The arithmetic per query head is the same; only the copy is gone. On a CPU only: on CUDA, SDPA with
grouped heads and a mask falls back to its slow math kernel (transformers avoids it there for that
reason), so other devices keep transformers' path.

``register()`` adds the implementation to transformers' registries (its documented extension
point, ``AttentionInterface``), under ``GQA_SDPA``; ``use_gqa_sdpa(model)`` switches a model loaded
with ``sdpa`` to it. ``lade.load_model`` loads models with it unless told otherwise.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

GQA_SDPA = "sdpa_gqa"


def gqa_sdpa_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Transformers' attention-function signature: query [B, H, S, D], key and value [B, H_kv, K, D],
    ``attention_mask`` [B, 1, S, K] (additive or boolean) or None; returns ([B, S, H, D], None).
    Where ``reads_groups_in_place`` holds, SDPA reads the grouped key/value heads in place; otherwise
    this is transformers' ``sdpa_attention_forward``, unchanged."""
    if not reads_groups_in_place(module, query, key, value, attention_mask, kwargs):
        return sdpa_attention_forward(
            module,
            query,
            key,
            value,
            attention_mask,
            dropout=dropout,
            scaling=scaling,
            is_causal=is_causal,
            **kwargs,
        )
    output = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, enable_gqa=True
    )
    return output.transpose(1, 2).contiguous(), None


def reads_groups_in_place(module, query, key, value, attention_mask, kwargs: dict) -> bool:
    """Whether ``gqa_sdpa_attention`` hands SDPA the grouped heads as they are: on a CPU (where it was
    measured; transformers notes that CUDA's SDPA falls back to its slow math kernel for grouped heads
    with a mask, and on XPU and MPS transformers reads them in place itself), several query tokens,
    grouped key/value heads (H = n * H_kv, n > 1, ``module.num_key_value_groups``), one mask for all
    heads, and nothing transformers' ``sdpa`` would fold into the mask first (position biases) or
    refuse (soft-capping, attention sinks, returned attention weights). One query token is left to
    transformers, which avoids the copy there itself."""
    return (
        query.device.type == "cpu"
        and getattr(module, "num_key_value_groups", 1) > 1
        and query.shape[2] > 1
        and attention_mask is not None
        and attention_mask.dim() == 4
        and attention_mask.shape[1] == 1
        and key.shape[-1] == value.shape[-1]
        and all(kwargs.get(name) is None for name in ("position_bias", "softcap", "s_aux"))
        and not kwargs.get("output_attentions", False)
    )


def register() -> str:
    """Make ``GQA_SDPA`` an attention implementation transformers knows (its attention function and
    its mask builder, ``sdpa``'s); idempotent. Returns the name."""
    AttentionInterface.register(GQA_SDPA, gqa_sdpa_attention)
    AttentionMaskInterface.register(GQA_SDPA, sdpa_mask)
    return GQA_SDPA


def use_gqa_sdpa(model) -> bool:
    """Switch ``model`` from ``sdpa`` to ``GQA_SDPA`` (registered first); True if it was switched. A
    model on another implementation (eager, flex attention, flash) is left as it is."""
    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    model.set_attn_implementation(register())
    return True


def copies_grouped_heads(model) -> bool:
    """Whether ``model`` runs transformers' ``sdpa`` on a CPU with grouped key/value heads: lookahead
    steps then copy the heads out (``use_gqa_sdpa`` would spare it)."""
    config = model.config
    heads = getattr(config, "num_attention_heads", None)
    grouped = getattr(config, "num_key_value_heads", None) or heads
    on_cpu = next(model.parameters()).device.type == "cpu"
    return (
        getattr(config, "_attn_implementation", None) == "sdpa" and on_cpu and bool(heads) and grouped < heads
    )
