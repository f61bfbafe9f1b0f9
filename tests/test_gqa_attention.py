"""``attn_implementation="sdpa_gqa"`` (``lade.gqa_attention``): transformers' sdpa attention without
copying grouped key/value heads on steps of several tokens. The same attention (against transformers'
function, with additive and boolean masks), the same decoding (against HF greedy of the model loaded
with plain ``sdpa``, alone and in batches), and the paths it leaves to transformers."""

import logging
import sys
import types
from pathlib import Path

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from lade import LookaheadDecoder, load_model
from lade.executor import StepExecutor
from lade.gqa_attention import (
    GQA_SDPA,
    copies_grouped_heads,
    gqa_sdpa_attention,
    reads_groups_in_place,
    use_gqa_sdpa,
)
from tests.conftest import ARCHITECTURES, hf_greedy, prompt
from tests.test_batch import FLAT, hf_batched, left_padded

GROUPED = types.SimpleNamespace(num_key_value_groups=3, training=False)


def attention_inputs(queries: int, keys: int = 20, heads: int = 6, groups: int = 3, seed: int = 0):
    """query [1, heads, queries, 8], key and value [1, heads / groups, keys, 8], and a random additive
    mask [1, 1, queries, keys] that hides about a third of the keys from each query (never the last)."""
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(1, heads, queries, 8, generator=generator)
    key, value = (torch.randn(1, heads // groups, keys, 8, generator=generator) for _ in range(2))
    hidden = torch.rand(1, 1, queries, keys, generator=generator) < 0.35
    hidden[..., -1] = False
    mask = torch.zeros(1, 1, queries, keys).masked_fill(hidden, torch.finfo(torch.float32).min)
    return query, key, value, mask


@pytest.mark.parametrize("boolean", (False, True))
@pytest.mark.parametrize("queries", (2, 5, 16))
def test_grouped_heads_read_in_place_give_transformers_attention(queries, boolean):
    query, key, value, mask = attention_inputs(queries)
    if boolean:
        mask = mask == 0  # True: visible
    assert reads_groups_in_place(GROUPED, query, key, value, mask, {})
    ours, _ = gqa_sdpa_attention(GROUPED, query, key, value, mask, scaling=0.3)
    theirs, _ = sdpa_attention_forward(GROUPED, query, key, value, mask, scaling=0.3)
    assert ours.shape == theirs.shape == (1, queries, 6, 8)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    # the comparison can fail: the mask matters, and each query head reads its own group's keys
    unmasked, _ = gqa_sdpa_attention(GROUPED, query, key, value, torch.zeros_like(mask, dtype=torch.float32))
    assert not torch.allclose(unmasked, theirs, atol=1e-3)
    swapped, _ = gqa_sdpa_attention(GROUPED, query, key.flip(1), value.flip(1), mask, scaling=0.3)
    assert not torch.allclose(swapped, theirs, atol=1e-3)


def test_transformers_keeps_the_other_cases():
    query, key, value, mask = attention_inputs(4)
    one_query = attention_inputs(1)
    plain = types.SimpleNamespace(num_key_value_groups=1, training=False)
    assert not reads_groups_in_place(GROUPED, *one_query, {})  # one token: transformers packs it itself
    assert not reads_groups_in_place(plain, query, key.repeat(1, 3, 1, 1), value.repeat(1, 3, 1, 1), mask, {})
    assert not reads_groups_in_place(GROUPED, query, key, value, None, {})  # causal: transformers' GQA path
    on_meta = (tensor.to("meta") for tensor in (query, key, value, mask))  # not a CPU: measured on CPUs only
    assert not reads_groups_in_place(GROUPED, *on_meta, {})
    assert not reads_groups_in_place(GROUPED, query, key, value, mask.expand(1, 6, 4, 20), {})  # per head
    for extra in ({"position_bias": mask}, {"softcap": 30.0}, {"s_aux": torch.zeros(6)}):
        assert not reads_groups_in_place(GROUPED, query, key, value, mask, extra)
    for inputs in (one_query, (query, key, value, None)):
        ours, _ = gqa_sdpa_attention(GROUPED, *inputs)
        theirs, _ = sdpa_attention_forward(GROUPED, *inputs)
        assert torch.equal(ours, theirs)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_lookahead_with_sdpa_gqa_equals_greedy_with_plain_sdpa(tiny_models, arch):
    reference_model, model = tiny_models(arch, "sdpa"), tiny_models(arch, GQA_SDPA)
    assert model.config._attn_implementation == GQA_SDPA
    for kind, seed in (("random", 1), ("repetitive", 2)):
        ids = prompt(kind, seed, length=24)
        reference = hf_greedy(reference_model, ids, 40)
        assert torch.equal(hf_greedy(model, ids, 40), reference)
        for window, ngram, guess in ((5, 4, 5), (2, 5, 1), (1, 2, 0)):
            result = LookaheadDecoder(model, window, ngram, guess).generate(ids, 40, eos_token_id=[])
            assert torch.equal(result.sequences, reference), (kind, window, ngram, guess)
        auto = LookaheadDecoder(model, latency=FLAT).generate(ids, 40, eos_token_id=[])
        assert torch.equal(auto.sequences, reference), kind


@pytest.mark.parametrize("arch", ("llama", "qwen2", "gemma3"))
def test_batches_with_sdpa_gqa_equal_hf_batched_greedy_with_plain_sdpa(tiny_models, arch):
    ids, mask = left_padded([10, 3, 14], seed=4)
    reference = hf_batched(tiny_models(arch, "sdpa"), ids, mask, 32)
    model = tiny_models(arch, GQA_SDPA)
    for config in ((5, 4, 5), ("auto", "auto", "auto")):
        decoder = LookaheadDecoder(model, *config, latency=FLAT)
        result = decoder.generate(ids, 32, attention_mask=mask, eos_token_id=[])
        assert torch.equal(result.sequences, reference), config


def test_load_model_reads_sdpa_as_sdpa_gqa_unless_told_otherwise():
    for default in ({}, {"attn_implementation": None}):
        assert load_model("tiny-random-llama", **default)[0].config._attn_implementation == GQA_SDPA
    for kept in ("sdpa", "eager", GQA_SDPA):
        model, _ = load_model("tiny-random-qwen2", attn_implementation=kept)
        assert model.config._attn_implementation == kept
    eager, _ = load_model("tiny-random-llama", attn_implementation="eager")
    assert not use_gqa_sdpa(eager) and eager.config._attn_implementation == "eager"
    sdpa, _ = load_model("tiny-random-llama", attn_implementation="sdpa")
    assert use_gqa_sdpa(sdpa) and sdpa.config._attn_implementation == GQA_SDPA


def test_the_decoder_can_tell_a_model_that_copies_grouped_heads(tiny_models):
    assert copies_grouped_heads(tiny_models("llama", "sdpa"))
    assert not copies_grouped_heads(tiny_models("llama", GQA_SDPA))
    assert not copies_grouped_heads(tiny_models("llama", "eager"))
    assert not copies_grouped_heads(tiny_models("gpt2", "sdpa"))  # one key/value head per query head


def test_the_executor_hints_at_sdpa_gqa_where_sdpa_copies(tiny_models, caplog):
    with caplog.at_level(logging.INFO, logger="lade.executor"):
        StepExecutor(tiny_models("llama", GQA_SDPA))
        assert "use_gqa_sdpa" not in caplog.text
        StepExecutor(tiny_models("llama", "sdpa"))
    assert "lade.use_gqa_sdpa(model)" in caplog.text


def test_the_latency_script_times_both_implementations(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
    import gqa_latency

    argv = ["--models", "tiny-random-llama", "--dtypes", "float32", "--rounds", "2", "--contexts", "16,64"]
    frame = gqa_latency.main([*argv, "--out", str(tmp_path)])
    assert len(frame) == 2 * len(gqa_latency.SIZES)
    assert (frame.sdpa_ms > 0).all() and (frame.sdpa_gqa_ms > 0).all()
    assert "sdpa_over_sdpa_gqa" in (tmp_path / "latency.md").read_text()
