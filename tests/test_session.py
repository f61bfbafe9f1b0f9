"""A call decodes with its own copies (``lade.session``): the decoder is not changed by a call, identical
calls take identical steps, threads do not interfere, and learning across calls is an explicit option.
Also the batch cache's compaction (``lade.slots``) and the device-synchronised stage timer."""

import threading

import pytest
import torch

from lade import LookaheadDecoder
from lade.cache import new_cache
from lade.calibration import LatencyModel
from lade.slots import KeySlots
from lade.timer import StageTimer
from pools import BucketedNGramPool
from tests.conftest import VOCAB, hf_greedy
from tests.test_batch import hf_batched, left_padded

FLAT = LatencyModel((1, 1024), (1.0, 1.05))  # a GPU-like curve: auto runs the branch and verifies


def repetitive(seed: int, length: int = 24) -> torch.Tensor:
    """[1, length]: a short random loop, so candidates are offered and accepted."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(1, VOCAB, (5,), generator=generator).repeat(length)[None, :length]


def steps(result) -> list[int]:
    return list(result.metrics.tokens_per_step)


@pytest.mark.parametrize("config", [("auto", "auto", "auto"), (4, 3, 4)])
def test_identical_calls_take_the_steps_of_a_fresh_decoder(tiny_models, config):
    model = tiny_models("llama", "sdpa")
    ids = repetitive(1)
    used = LookaheadDecoder(model, *config, latency=FLAT)
    first, second = (used.generate(ids, max_new_tokens=40, eos_token_id=[]) for _ in range(2))
    fresh = LookaheadDecoder(model, *config, latency=FLAT).generate(ids, max_new_tokens=40, eos_token_id=[])
    assert torch.equal(fresh.sequences, hf_greedy(model, ids, 40))
    assert torch.equal(first.sequences, fresh.sequences) and torch.equal(second.sequences, fresh.sequences)
    assert steps(first) == steps(second) == steps(fresh)
    assert max(steps(fresh)) > 1  # candidates were accepted: the planner and pool took part
    assert len(used.pool) == 0  # the decoder's pool was copied, never filled


def test_identical_batch_calls_take_the_same_steps(tiny_models):
    model = tiny_models("qwen2", "sdpa")
    ids, mask = left_padded([9, 4, 12], seed=3)
    decoder = LookaheadDecoder(model, latency=FLAT)
    options = {"attention_mask": mask, "max_new_tokens": 24, "eos_token_id": []}
    first, second = (decoder.generate(ids, **options) for _ in range(2))
    assert torch.equal(first.sequences, second.sequences) and steps(first) == steps(second)
    assert [m.tokens_per_step for m in first.row_metrics] == [m.tokens_per_step for m in second.row_metrics]


def test_two_threads_share_one_decoder(tiny_models):
    model = tiny_models("llama", "sdpa")
    prompts = [repetitive(seed) for seed in (2, 3)]
    decoder = LookaheadDecoder(model, latency=FLAT)
    alone = [
        LookaheadDecoder(model, latency=FLAT).generate(p, max_new_tokens=32, eos_token_id=[]) for p in prompts
    ]
    results = [None, None]

    def run(i: int) -> None:
        for _ in range(3):
            results[i] = decoder.generate(prompts[i], max_new_tokens=32, eos_token_id=[])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for got, expected in zip(results, alone, strict=True):
        assert torch.equal(got.sequences, expected.sequences) and steps(got) == steps(expected)


def test_learning_across_calls_is_explicit(tiny_models):
    """With ``learn_across_calls`` the planner's records carry over: a second identical call starts
    trusting candidates at once, so it takes no more steps than the first; a persistent pool keeps its
    n-grams (the decoder's own pool is used)."""
    model = tiny_models("llama", "sdpa")
    ids = repetitive(4)
    pool = BucketedNGramPool(6, 7, key_length=3, seed_prompt=True, seed_output=True, persistent=True)
    decoder = LookaheadDecoder(model, pool=pool, latency=FLAT, learn_across_calls=True)
    first = decoder.generate(ids, max_new_tokens=40, eos_token_id=[])
    planner = decoder._kept_planner
    assert planner is not None and len(planner.stats) > 0 and len(pool) > 0
    second = decoder.generate(ids, max_new_tokens=40, eos_token_id=[])
    assert decoder._kept_planner is planner
    assert torch.equal(first.sequences, second.sequences)
    assert torch.equal(first.sequences, hf_greedy(model, ids, 40))
    assert second.metrics.steps <= first.metrics.steps


def _filled_cache(slots: KeySlots, rows: int, seed: int = 0):
    """A one-layer cache of ``slots.length`` random slots per row: (cache, keys [B, 1, P, 2])."""
    generator = torch.Generator().manual_seed(seed)
    keys = torch.randn(rows, 1, slots.length, 2, generator=generator)
    cache = new_cache()
    cache.update(keys.clone(), keys.clone() + 1, 0)
    return cache, keys


def test_compaction_keeps_each_rows_tokens_in_order():
    valid = torch.tensor(
        [[0, 1, 1, 0, 1, 0, 0, 1], [1, 0, 0, 0, 0, 1, 0, 0], [1, 1, 1, 1, 0, 0, 1, 0]], dtype=torch.bool
    )
    positions = torch.arange(8).repeat(3, 1) + 100
    slots = KeySlots(8, valid, positions, valid.sum(1))
    cache, keys = _filled_cache(slots, 3)
    assert slots.holes() == 3
    slots.compact(cache)
    assert slots.length == 5 and slots.holes() == 0 and slots.counts.tolist() == [4, 2, 5]
    layer = cache.layers[0]
    assert layer.keys.shape[2] == 5
    for b in range(3):
        held = valid[b].nonzero().flatten()
        kept = slots.valid[b].nonzero().flatten()
        assert torch.equal(layer.keys[b, :, kept], keys[b, :, held])  # the same keys, in order, right-aligned
        assert torch.equal(layer.values[b, :, kept], keys[b, :, held] + 1)
        assert torch.equal(slots.positions[b, kept], positions[b, held])
        assert kept.tolist() == list(range(5 - len(held), 5))


def test_compaction_waits_for_enough_holes():
    valid = torch.ones(2, 200, dtype=torch.bool)
    valid[0, :70] = False  # row 0 leaves 70 slots empty, row 1 none: nothing every row leaves empty
    slots = KeySlots(200, valid, torch.arange(200).repeat(2, 1), valid.sum(1))
    cache, _ = _filled_cache(slots, 2)
    assert not slots.compact_if_worthwhile(cache)
    valid[1, 100:170] = False
    slots = KeySlots(200, valid, torch.arange(200).repeat(2, 1), valid.sum(1))
    assert slots.holes() == 70 and slots.compact_if_worthwhile(cache) and slots.length == 130


@pytest.mark.parametrize("arch", ["llama", "gemma3"])  # gemma3: sliding-window layers read the positions
def test_batches_compacted_every_step_decode_exactly(tiny_models, monkeypatch, arch):
    compactions = []
    original = KeySlots.compact

    def always(self, cache):
        if self.holes():
            compactions.append(self.holes())
            original(self, cache)
        return bool(compactions)

    monkeypatch.setattr(KeySlots, "compact_if_worthwhile", always)
    model = tiny_models(arch, "sdpa")
    ids, mask = left_padded([9, 14, 6, 12], seed=7)
    reference = hf_batched(model, ids, mask, 32)
    result = LookaheadDecoder(model, 5, 4, 5, latency=FLAT).generate(
        ids, attention_mask=mask, max_new_tokens=32, eos_token_id=[]
    )
    assert torch.equal(result.sequences, reference)
    assert compactions  # holes were made and compacted away, padding included


def test_stage_timer_waits_for_a_cuda_device(monkeypatch):
    """On a GPU the forward's kernels run asynchronously: each lap synchronises the device first."""
    synchronised = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synchronised.append(device))
    totals = {"forward": 0.0, "verify": 0.0}
    StageTimer(totals, torch.device("cuda", 0)).lap("forward")
    assert synchronised == [torch.device("cuda", 0)]
    StageTimer(totals, torch.device("cpu")).lap("verify")
    assert len(synchronised) == 1 and totals["forward"] > 0 and totals["verify"] > 0
