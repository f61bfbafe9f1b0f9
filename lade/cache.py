"""The key/value cache of a lookahead decode: a transformers ``DynamicCache`` of full layers.

Every layer keeps all positions, sliding-window layers included: their window is enforced by the
mask (``lade.attention``), which keeps the cache index equal to the token position and makes a
rollback a plain crop. After a step the cache holds the prefix plus all S step tokens; ``commit``
keeps the accepted ones, moved next to the prefix, and drops the rest. Accepted tokens are never
recomputed.

The layers are ``GrowingLayer``s: a ``DynamicLayer`` concatenates every step, copying the whole
cache each time (tens of MB per step at a few thousand tokens); a growing layer writes the step into
spare room of one buffer and re-allocates only when the room runs out, with 1/8 headroom (at least
``MIN_HEADROOM`` positions), so memory stays within about 12% of the keys and values held.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

MIN_HEADROOM = 256  # positions of spare room a growing layer keeps at least


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose keys/values [B, H, T, D] are views into a buffer [B, H, capacity, D]
    that is written in place and re-allocated with headroom when full, not re-made every step."""

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self._key_buffer: torch.Tensor | None = None
        self._value_buffer: torch.Tensor | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        length = self.get_seq_length()
        needed = length + key_states.shape[-2]
        if self._key_buffer is None or needed > self._key_buffer.shape[-2]:
            capacity = needed + max(MIN_HEADROOM, needed // 8)
            self._key_buffer = self._grown(self._key_buffer, key_states, length, capacity)
            self._value_buffer = self._grown(self._value_buffer, value_states, length, capacity)
        self._key_buffer[..., length:needed, :] = key_states
        self._value_buffer[..., length:needed, :] = value_states
        self.keys = self._key_buffer[..., :needed, :]
        self.values = self._value_buffer[..., :needed, :]
        return self.keys, self.values

    @staticmethod
    def _grown(old: torch.Tensor | None, like: torch.Tensor, length: int, capacity: int) -> torch.Tensor:
        buffer = like.new_empty(*like.shape[:-2], capacity, like.shape[-1])
        if old is not None and length:
            buffer[..., :length, :] = old[..., :length, :]
        return buffer

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep only the batch rows ``indices`` (rows of a batched decode that finished leave)."""
        if self.is_initialized and self._key_buffer is not None:
            length = self.get_seq_length()
            self._key_buffer = self._key_buffer[indices]
            self._value_buffer = self._value_buffer[indices]
            self.keys = self._key_buffer[..., :length, :]
            self.values = self._value_buffer[..., :length, :]

    def batch_repeat_interleave(self, repeats: int) -> None:
        """Repeat every batch row ``repeats`` times (latency calibration: one prefill, many rows)."""
        if self.is_initialized and self._key_buffer is not None:
            length = self.get_seq_length()
            self._key_buffer = self._key_buffer.repeat_interleave(repeats, dim=0)
            self._value_buffer = self._value_buffer.repeat_interleave(repeats, dim=0)
            self.keys = self._key_buffer[..., :length, :]
            self.values = self._value_buffer[..., :length, :]

    def reset(self) -> None:
        self._key_buffer = self._value_buffer = None
        super().reset()


class LookaheadCache(DynamicCache):
    """A ``DynamicCache`` whose layers are ``GrowingLayer``s (added lazily, one per model layer)."""

    def __init__(self):
        super().__init__()
        self.layer_class_to_replicate = GrowingLayer


def new_cache() -> DynamicCache:
    """An empty cache whose layers all keep every position (``GrowingLayer``)."""
    return LookaheadCache()


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


def commit_rows(cache: DynamicCache, prefix_len: int, step_len: int, keep: torch.Tensor) -> None:
    """The batched ``commit``: row b keeps step rows ``keep[b]`` right after the prefix.

    Args:
        cache: holds ``prefix_len + step_len`` positions per row, the last ``step_len`` from this step.
        prefix_len: P, slots before this step (the same for every row: a batch cache is one tensor).
        step_len: S, tokens fed this step.
        keep: LongTensor [B, M] of step rows per batch row, each row starting with 0; a row that keeps
            fewer than M fills up with its own slot numbers (``keep[b, j] = j``: those slots become
            holes, which the caller masks out, and need no copy). Afterwards the cache holds ``P + M``
            slots per row.

    Rows already in place (``keep[b] = 0, 1, ..., M-1``: the accepted tokens are the first step rows,
    as with one candidate and no branch) cost nothing; otherwise one gather per layer moves them.
    """
    rows, width = keep.shape
    in_place = bool((keep == torch.arange(width, device=keep.device)).all())
    for layer in cache.layers:
        if not isinstance(layer, DynamicLayer) or layer.is_sliding:
            raise TypeError(f"lookahead cache layers must be full DynamicLayer, got {type(layer).__name__}")
        if not layer.is_initialized:
            continue
        if not in_place:
            for states in (layer.keys, layer.values):
                block = states[:, :, prefix_len : prefix_len + step_len]
                index = keep.to(states.device)[:, None, :, None].expand(
                    rows, states.shape[1], width, states.shape[3]
                )
                states[:, :, prefix_len : prefix_len + width] = block.gather(2, index)
        if step_len > width:
            layer.crop(-(step_len - width))


def select_rows(cache: DynamicCache, rows: torch.Tensor) -> None:
    """Keep only the batch rows ``rows`` (LongTensor [B']) of every layer."""
    for layer in cache.layers:
        layer.batch_select_indices(rows)


def take_slots(cache: DynamicCache, index: torch.Tensor) -> None:
    """Keep, in every row b, the slots ``index[b]`` (LongTensor [B, M], any order), in that order as the
    row's first M slots; the cache then holds M slots per row (one gather per layer)."""
    rows, width = index.shape
    for layer in cache.layers:
        if not layer.is_initialized:
            continue
        length = layer.keys.shape[-2]
        for states in (layer.keys, layer.values):
            by_slot = index.to(states.device)[:, None, :, None]
            states[:, :, :width] = states.gather(
                2, by_slot.expand(rows, states.shape[1], width, states.shape[3])
            )
        if length > width:
            layer.crop(-(length - width))
