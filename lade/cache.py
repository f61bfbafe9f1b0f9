"""The key/value cache of a lookahead decode: a transformers ``DynamicCache`` of full layers.

Every layer keeps all positions, sliding-window layers included: their window is enforced by the
mask (``lade.attention``), which keeps the cache index equal to the token position and makes a
rollback a plain crop. After a step the cache holds the prefix plus all S step tokens; ``commit``
keeps the accepted ones, moved next to the prefix, and drops the rest. Accepted tokens are never
recomputed.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


def new_cache() -> DynamicCache:
    """An empty cache whose layers all keep every position (``DynamicLayer``)."""
    return DynamicCache()


def commit(cache: DynamicCache, prefix_len: int, step_len: int, keep: list[int]) -> None:
    """Keep step rows ``keep`` (ascending, starting with 0) right after the prefix; drop the others.

    Args:
        cache: holds ``prefix_len + step_len`` positions, the last ``step_len`` from this step.
        prefix_len: P, positions committed before this step.
        step_len: S, tokens fed this step.
        keep: step rows to keep, e.g. ``[0, 9, 10]`` for the last token and two accepted candidate
            tokens. Afterwards the cache holds ``P + len(keep)`` positions.
    """
    drop = step_len - len(keep)
    contiguous = keep == list(range(len(keep)))
    for layer in cache.layers:
        if not isinstance(layer, DynamicLayer) or layer.is_sliding:
            raise TypeError(f"lookahead cache layers must be full DynamicLayer, got {type(layer).__name__}")
        if not layer.is_initialized:
            continue
        if not contiguous:
            source = torch.tensor(keep, device=layer.keys.device) + prefix_len
            target = slice(prefix_len, prefix_len + len(keep))
            layer.keys[:, :, target] = layer.keys[:, :, source]
            layer.values[:, :, target] = layer.values[:, :, source]
        if drop:
            layer.crop(-drop)
