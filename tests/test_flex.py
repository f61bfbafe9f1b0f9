"""FlexAttention (``attn_implementation="flex_attention"``): the step's tree mask as a ``BlockMask``, and
the output equal to greedy decoding.

On CPU, torch compiles flex attention on first use (tens of seconds). torch 2.13's compiled CPU kernel
miscomputes attention for head size 16 at key lengths of 8 modulo 16 (``generate`` itself is affected), so
these models have head size 64, as real ones do; ``test_a_broken_kernel_is_refused`` checks that the
self-check refuses the affected configuration instead of decoding it wrongly.
"""

import copy

import pytest
import torch
import transformers

from lade import LookaheadDecoder
from lade.calibration import LatencyModel
from tests.conftest import prompt

pytestmark = pytest.mark.skipif(
    not hasattr(torch.nn.attention, "flex_attention"), reason="this torch has no flex attention"
)
FLAT = LatencyModel((1, 1024), (1.0, 1.05))


def tiny_flex_pair(head_dim: int = 64, sliding: bool = False):
    """The same random weights with sdpa (the reference) and with flex attention."""
    common = dict(
        vocab_size=128,
        hidden_size=2 * head_dim,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=head_dim,
        max_position_embeddings=512,
        initializer_range=0.5,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    if sliding:
        config = transformers.Gemma3TextConfig(
            sliding_window=4,
            layer_types=["sliding_attention", "full_attention"],
            query_pre_attn_scalar=head_dim,
            tie_word_embeddings=False,
            **common,
        )
        model_class = transformers.Gemma3ForCausalLM
    else:
        config, model_class = transformers.LlamaConfig(**common), transformers.LlamaForCausalLM
    models = []
    for implementation in ("sdpa", "flex_attention"):
        config = copy.deepcopy(config)
        config._attn_implementation = implementation
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            models.append(model_class(config).eval())
    return models


@pytest.mark.parametrize("sliding", [False, True], ids=["llama", "gemma3-sliding"])
def test_flex_attention_decodes_greedys_tokens(sliding):
    reference_model, flex_model = tiny_flex_pair(sliding=sliding)
    multi = 0
    for seed, config in [(1, (5, 3, 5)), (2, (2, 5, 1)), (3, ("auto", "auto", "auto"))]:
        ids = prompt("repetitive", seed, length=14)
        reference = reference_model.generate(ids, max_new_tokens=30, do_sample=False)
        decoder = LookaheadDecoder(flex_model, *config, latency=FLAT)
        assert decoder.executor.flex
        result = decoder.generate(ids, 30)
        assert torch.equal(result.sequences, reference), config
        multi += sum(n > 1 for n in result.metrics.tokens_per_step)
    ids = torch.stack([prompt("random", 4, length=14)[0], prompt("repetitive", 5, length=14)[0]])
    mask = (torch.arange(14)[None] >= torch.tensor([[4], [0]])).long()
    reference = reference_model.generate(
        ids, attention_mask=mask, max_new_tokens=20, do_sample=False, pad_token_id=0
    )
    result = LookaheadDecoder(flex_model, 4, 4, 4).generate(ids, 20, attention_mask=mask, pad_token_id=0)
    assert torch.equal(result.sequences, reference)
    assert multi > 0


def test_a_broken_kernel_is_refused():
    """Head size 16 on this CPU's compiled flex kernel: the self-check's step (8 keys) hits the bug, so the
    decoder refuses rather than decode wrongly (on a device whose kernel is right it decodes exactly)."""
    reference_model, flex_model = tiny_flex_pair(head_dim=16)
    ids = prompt("repetitive", 6, length=14)
    try:
        result = LookaheadDecoder(flex_model, 5, 3, 5).generate(ids, 20)
    except ValueError as refusal:
        assert "does not decode causally" in str(refusal)
        return
    assert torch.equal(result.sequences, reference_model.generate(ids, max_new_tokens=20, do_sample=False))
