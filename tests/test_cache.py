"""The growing KV cache: written in place, re-allocated only when full, rolled back by commit/crop."""

from __future__ import annotations

import torch

from lade.cache import MIN_HEADROOM, GrowingLayer, LookaheadCache, commit, new_cache
from lade.model import load_model


def _kv(length: int, start: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    keys = torch.arange(length, dtype=torch.float32).add(start).view(1, 1, length, 1).expand(1, 2, length, 3)
    return keys.contiguous(), (-keys).contiguous()


def test_layer_appends_in_place_and_grows_with_headroom():
    layer = GrowingLayer()
    keys, values = layer.update(*_kv(5))
    buffer = layer._key_buffer
    assert keys.shape == (1, 2, 5, 3) and buffer.shape[-2] == 5 + MIN_HEADROOM
    for step in range(10):
        layer.update(*_kv(3, start=100 + step))
    assert layer._key_buffer is buffer  # no re-allocation while there is room
    assert layer.get_seq_length() == 35 and torch.equal(layer.keys[0, 0, :5, 0], torch.arange(5.0))
    layer.update(*_kv(MIN_HEADROOM))  # overflows: a bigger buffer, old content kept
    assert layer._key_buffer is not buffer and layer.get_seq_length() == 35 + MIN_HEADROOM
    assert torch.equal(layer.keys[0, 1, :5, 2], torch.arange(5.0)) and torch.equal(layer.values, -layer.keys)


def test_commit_keeps_accepted_rows_next_to_the_prefix():
    cache = LookaheadCache()
    cache.update(*_kv(4), layer_idx=0)
    cache.update(*_kv(6, start=10), layer_idx=0)  # a step of 6 tokens after a prefix of 4
    commit(cache, prefix_len=4, step_len=6, keep=[0, 2, 3])
    layer = cache.layers[0]
    assert isinstance(layer, GrowingLayer) and layer.get_seq_length() == 7
    assert layer.keys[0, 0, :, 0].tolist() == [0, 1, 2, 3, 10, 12, 13]
    cache.update(*_kv(1, start=50), layer_idx=0)  # the next step writes right after the kept rows
    assert layer.keys[0, 0, -2:, 0].tolist() == [13, 50]


def test_models_fill_growing_layers():
    model, _ = load_model("tiny-random-gemma3")
    cache = new_cache()
    with torch.inference_mode():
        model(torch.tensor([[1, 2, 3]]), cache=cache, use_cache=True)
    assert cache.layers and all(type(layer) is GrowingLayer for layer in cache.layers)
    assert cache.get_seq_length() == 3
