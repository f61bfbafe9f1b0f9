"""ForwardLog: the shape of every forward call, for any method, and its price on a given curve."""

from __future__ import annotations

import pytest
import torch

from lade.calibration import LatencyModel
from lade.decoding import LookaheadDecoder
from lade.forward_log import ForwardLog
from lade.model import load_model


@pytest.fixture(scope="module")
def model():
    return load_model("tiny-random-llama")[0]


def test_hf_greedy_calls_are_the_prefill_then_one_token_each(model):
    ids = torch.randint(1, 100, (1, 10), generator=torch.Generator().manual_seed(0))
    with ForwardLog(model) as log:
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=5, do_sample=False)
    assert [(c.rows, c.tokens, c.cached) for c in log.calls] == [(1, 10, 0)] + [
        (1, 1, 10 + i) for i in range(4)
    ]
    assert log.tokens_fed == 14 and log.forward_seconds > 0
    per_token = LatencyModel((1, 64), (1.0, 64.0))  # seconds = tokens fed
    assert log.modeled_seconds(per_token) == pytest.approx(14.0)
    flat = LatencyModel((1, 64), (1.0, 1.0))
    assert log.modeled_seconds(flat) == pytest.approx(5.0)
    assert log.modeled_seconds(flat, wall_seconds=log.forward_seconds + 2.0) == pytest.approx(7.0)


def test_a_lookahead_decoder_feeds_what_its_steps_report_and_hooks_are_removed(model):
    ids = torch.arange(1, 9).repeat(3)[None]
    decoder = LookaheadDecoder(model, 3, 3, 3)
    decoder.generate(ids, max_new_tokens=4)  # the first call also runs the self-check's forwards
    with ForwardLog(model) as log:
        result = decoder.generate(ids, max_new_tokens=20)
    steps = result.metrics.step_sizes
    prefill = log.calls[0]
    assert prefill.cached == 0 and prefill.tokens == ids.shape[1]  # step 1's forward: its logits give token 1
    assert [c.tokens for c in log.calls[1:]] == steps[1:]
    cached = [c.cached for c in log.calls[1:]]
    assert cached[0] == ids.shape[1] and cached == sorted(cached)  # the cache holds committed tokens only
    assert cached[-1] == ids.shape[1] - 1 + sum(result.metrics.tokens_per_step[:-1])
    calls = len(log.calls)
    decoder.generate(ids, max_new_tokens=4)
    assert len(log.calls) == calls  # detached on exit


def test_a_call_of_n_tokens_runs_n_forward_passes_as_generate_does(model):
    # the first new token comes from the prefill's logits: no forward pass feeds the last prompt token again
    ids = torch.arange(1, 9).repeat(3)[None]
    decoder = LookaheadDecoder(model, 3, 3, 0)  # G = 0: one token per step
    decoder.generate(ids, max_new_tokens=2)  # the first call also runs the self-check's forwards
    for new in (1, 5):
        with ForwardLog(model) as log:
            result = decoder.generate(ids, max_new_tokens=new, eos_token_id=[])
        with ForwardLog(model) as reference:
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, do_sample=False)
        assert len(log.calls) == len(reference.calls) == new == result.metrics.forward_passes
