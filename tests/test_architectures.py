"""Every causal-LM architecture of the installed transformers is either token-identical to HF greedy
or refused with a ``ValueError`` naming the cause: never silently different, never a crash.

Tiny random models are built from each config class (``tests/tiny_architectures.py``); an architecture
whose tiny model cannot be built, or on which HF's own ``generate`` fails, is skipped with the reason.
"""

import copy

import pytest
import torch
import transformers

from lade import LookaheadDecoder
from tests.tiny_architectures import ARCHITECTURES, VOCAB, check, tiny_model

# Mainstream decoders that must decode, not be refused: a refusal bug would otherwise pass every case.
MUST_DECODE = {
    "cohere",
    "deepseek_v3",
    "falcon",
    "gemma",
    "gemma2",
    "gemma3_text",
    "gpt2",
    "gpt_neox",
    "llama",
    "mistral",
    "mixtral",
    "olmo2",
    "opt",
    "phi3",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "starcoder2",
}


@pytest.mark.parametrize("model_type", ARCHITECTURES)
def test_every_causal_lm_is_exact_or_refused(model_type):
    row = check(model_type)
    if row["outcome"] in ("no tiny model", "HF generate fails"):
        pytest.skip(f"{row['outcome']}: {row['reason'][:200]}")
    assert row["outcome"] in ("identical", "refused"), row
    if row["outcome"] == "refused":
        assert model_type not in MUST_DECODE, row
        assert len(row["reason"]) > 40  # names the cause


def test_bloom_is_refused_for_its_positions():
    with pytest.raises(ValueError, match="position_ids"):
        LookaheadDecoder(tiny_model("bloom"))


@pytest.mark.parametrize("implementation", ["flash_attention_2", "flash_attention_3", "paged|sdpa"])
def test_attention_without_arbitrary_masks_is_refused(tiny_models, implementation):
    model = copy.copy(tiny_models("llama", "sdpa"))
    model.config = copy.deepcopy(model.config)
    model.config._attn_implementation = implementation
    with pytest.raises(ValueError, match="attn_implementation"):
        LookaheadDecoder(model)


def test_encoder_decoder_models_are_refused():
    config = transformers.T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4, decoder_start_token_id=0
    )
    with pytest.raises(ValueError, match="encoder-decoder"):
        LookaheadDecoder(transformers.T5ForConditionalGeneration(config))


def test_a_model_that_ignores_the_tree_mask_is_caught_by_the_self_check(tiny_models):
    """Negative control of the self-check: a decoder whose masks hide nothing is refused on its first
    call, not decoded wrongly."""
    decoder = LookaheadDecoder(tiny_models("llama", "sdpa"), 3, 3, 3)
    decoder.executor._one_row_mask = lambda layout, prefix_len, positions, window, buffers: torch.zeros(
        1, 1, layout.size, prefix_len + layout.size
    )
    with pytest.raises(ValueError, match="does not decode causally"):
        decoder.generate(torch.tensor([[1, 2, 3, 4]]), 5)
