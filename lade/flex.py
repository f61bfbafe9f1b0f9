"""A lookahead step's tree mask for FlexAttention (``attn_implementation="flex_attention"``).

transformers hands a 4D tensor mask to its flex attention as a score modification that indexes the
mask inside the compiled kernel; on CPU that kernel fails for tree masks (an out-of-bounds index, or a
crash of the interpreter). A ``BlockMask`` is flex attention's own mask form: built here from the
step's visibility (the same [B, 1, S, P + S] mask every other implementation gets), it lets the kernel
skip the blocks no query sees and needs no score modification. Every forward of a flex model, the
prefill included, gets its mask from here: transformers' own flex masks (sliding windows, padding)
hit a kernel-generation bug of torch 2.13 on CPU once flex attention has been recompiled for new shapes.
"""

from __future__ import annotations

import torch

FLEX = "flex_attention"


def uses_flex(model) -> bool:
    """Whether the model's attention is flex attention (its masks must be ``BlockMask``s)."""
    return getattr(model.config, "_attn_implementation", None) == FLEX


def block_masks(masks):
    """The ``BlockMask`` of each additive mask [B, 1, S, K] (0 where visible), or of each value of a
    ``{layer type: mask}`` dict."""
    if isinstance(masks, dict):
        return {kind: block_mask(mask) for kind, mask in masks.items()}
    return block_mask(masks)


def block_mask(additive: torch.Tensor):
    """A ``BlockMask`` with the visibility of ``additive`` [B, 1, S, K] (0: visible, -inf: hidden)."""
    from torch.nn.attention.flex_attention import create_block_mask

    batch, _, queries, keys = additive.shape
    # One flat lookup, not visible[b, q, kv]: torch 2.13's CPU kernel generator fails to compile the 3D
    # lookup once flex attention has been recompiled for a new batch size (an undeclared variable)
    visible = (additive[:, 0] == 0).reshape(-1).contiguous()  # [B * S * K]

    def mask_mod(b, h, q, kv):
        return visible[(b * queries + q) * keys + kv]

    return create_block_mask(mask_mod, batch, None, queries, keys, device=visible.device)
