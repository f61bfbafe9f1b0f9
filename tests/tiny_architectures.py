"""Tiny random models of every causal-LM architecture the installed transformers ships.

The way transformers tests itself: each entry of ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` is built from its
config class with its default settings, shrunk (2 layers, hidden size 64, 4 heads of 16, vocabulary 128,
small experts and low-rank projections) and randomly initialised with a wide ``initializer_range`` (so
greedy decoding is not decided by near-ties). Architectures whose configs cannot be shrunk this way
(nested per-layer configs, external dependencies) raise ``CannotBuild``.
"""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

ARCHITECTURES = sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
VOCAB = 128
MAX_PARAMETERS = 5_000_000  # a default size left unshrunk would make the test slow, not more telling

SIZES = {
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 512,
    "initializer_range": 0.5,
    "rotary_dim": 8,
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": None,
    "pad_token_id": 0,
    # mixtures of experts
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "moe_num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "n_shared_experts": 1,
    "first_k_dense_replace": 0,
    "n_group": 1,
    "topk_group": 1,
    # multi-head latent attention
    "kv_lora_rank": 16,
    "q_lora_rank": 16,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "qk_head_dim": 16,
    "v_head_dim": 16,
    # older naming
    "n_embd": 64,
    "n_layer": 2,
    "n_head": 4,
    "n_positions": 512,
    "n_ctx": 512,
    "n_inner": 128,
    "d_model": 64,
    "d_ff": 128,
    "ffn_dim": 128,
    "decoder_layers": 2,
    "decoder_attention_heads": 4,
    "decoder_ffn_dim": 128,
    "encoder_layers": 2,
    "encoder_attention_heads": 4,
    "encoder_ffn_dim": 128,
    "num_layers": 2,
    "num_heads": 4,
}


NEW_TOKENS = 24


def check(model_type: str) -> dict:
    """One architecture's outcome with lookahead decoding (W=5 N=3 G=5, 24 new tokens after a 12-token
    prompt, greedy): ``identical`` (to HF greedy), ``refused`` (a ``ValueError``), ``different``,
    ``crashed`` (any other exception), or, when it cannot be tested here, ``no tiny model`` or ``HF
    generate fails``; with the ``reason`` and the ``compression``."""
    from lade import LookaheadDecoder

    row = {"model_type": model_type, "class": "", "outcome": "", "reason": "", "compression": float("nan")}
    try:
        model = tiny_model(model_type)
    except CannotBuild as reason:
        return row | {"outcome": "no tiny model", "reason": str(reason)[:300]}
    row["class"] = type(model).__name__
    ids = torch.randint(1, VOCAB, (1, 12), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    try:  # first ours: a refusal is what a user meets, whether or not HF's own generate works
        result = LookaheadDecoder(model, window=5, ngram=3, guess=5).generate(
            ids, NEW_TOKENS, attention_mask=mask, eos_token_id=[], do_sample=False
        )
    except ValueError as refusal:
        return row | {"outcome": "refused", "reason": str(refusal)[:300]}
    except Exception as error:
        return row | {"outcome": "crashed", "reason": f"{type(error).__name__}: {error}"[:300]}
    try:
        reference = model.generate(
            ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=[]
        )
    except Exception as error:
        return row | {"outcome": "HF generate fails", "reason": f"{type(error).__name__}: {error}"[:300]}
    same = torch.equal(result.sequences, reference)
    return row | {
        "outcome": "identical" if same else "different",
        "compression": result.metrics.compression_ratio,
    }


class CannotBuild(Exception):
    """The architecture's tiny model could not be built (a limit of this harness, not of the decoder)."""


def tiny_model(model_type: str, attn_implementation: str | None = None):
    """A tiny random ``model_type`` model in eval mode, the same weights on every call (attention:
    the given implementation, default the model's own choice: sdpa where it has it, else eager)."""
    try:
        config = CONFIG_MAPPING[model_type]()
        for sub in _configs(config):
            _shrink(sub)
        if attn_implementation is not None:
            config._attn_implementation = attn_implementation
        with torch.device("meta"):
            size = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
        if size > MAX_PARAMETERS:
            raise CannotBuild(f"{size:,} parameters after shrinking")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = AutoModelForCausalLM.from_config(config)
    except CannotBuild:
        raise
    except Exception as error:
        raise CannotBuild(f"{type(error).__name__}: {error}") from error
    return model.eval()


def _configs(config) -> list:
    """The config and its sub-configs (text, vision, audio, ...), recursively."""
    found = [config]
    for name in getattr(config, "sub_configs", {}) or {}:
        sub = getattr(config, name, None)
        if sub is not None and hasattr(sub, "to_dict") and sub is not config:
            found += _configs(sub)
    return found


def _shrink(config) -> None:
    for name, value in SIZES.items():
        if hasattr(config, name) and not isinstance(getattr(type(config), name, None), property):
            try:
                setattr(config, name, value)
            except Exception:  # a derived or per-layer attribute: leave it
                pass
    layer_types = getattr(config, "layer_types", None)
    if layer_types and not isinstance(getattr(type(config), "layer_types", None), property):
        kinds = list(dict.fromkeys(layer_types))  # one layer of each kind, in order, at most two
        try:
            config.layer_types = (kinds * 2)[:2]
        except Exception:
            pass
    if getattr(config, "kv_lora_rank", None) and hasattr(config, "num_key_value_heads"):
        config.num_key_value_heads = config.num_attention_heads  # latent attention expands to every head
    if getattr(config, "qk_rope_head_dim", None):  # latent attention: rotary embeddings span the rope part
        for name in ("head_dim", "rope_head_dim"):
            if hasattr(config, name):
                try:
                    setattr(config, name, config.qk_rope_head_dim)
                except Exception:
                    pass
    if getattr(config, "sliding_window", None):
        config.sliding_window = 8
