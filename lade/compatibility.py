"""Which models lookahead decoding can drive exactly, and the check that refuses the others.

Lookahead decoding feeds a token tree in one forward pass, so it needs a model whose attention honours
an explicit 4D mask and explicit ``position_ids`` over a KV cache it can roll back. Two layers of checks
turn every other model into a ``ValueError`` naming the cause, instead of a crash or silently different
tokens:

* ``check_static`` (at construction, from the config and the forward's signature): decoder-only
  models; an attention implementation that takes an arbitrary 4D mask (eager, sdpa, flex attention; not
  FlashAttention or paged attention, which only know causal/padding masks); a forward that takes
  ``attention_mask``, ``position_ids`` and a cache (models whose positions come from the cache length,
  or from ALiBi biases built from a 2D mask, such as Bloom, cannot place a tree's tokens);
  mask-expressible layer types (``lade.attention``).
* ``self_check`` (on the first call, three small forward passes): a tree step must give the logits of
  a chain step at the positions they share, and a cache cut back to the accepted branch must give the
  logits of the chain's next token. An architecture that ignores the mask or the positions, or keeps
  a cache of its own, fails it.
"""

from __future__ import annotations

import inspect

import torch

from lade.attention import MaskPlan
from lade.cache import commit, new_cache
from lade.gqa_attention import GQA_SDPA
from lade.slots import KeySlots

MASKABLE_ATTENTION = ("eager", "sdpa", GQA_SDPA, "flex_attention")
# Largest logit difference the self-check allows, relative to the logits' scale: rounding of a
# different summation order only (a model that ignores the mask or positions misses by far more).
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-8}
REDUCED_PRECISION_TOLERANCE = 3e-2


def check_static(model) -> None:
    """``ValueError`` naming why ``model`` cannot be decoded exactly, if its config or forward says so."""
    name = type(model).__name__
    config = model.config
    if getattr(config, "is_encoder_decoder", False):
        raise ValueError(f"{name} is an encoder-decoder model; lookahead decoding needs a decoder-only one")
    MaskPlan.from_config(config)  # layer types that no mask expresses (linear, chunked, ...) are refused
    attention = getattr(config, "_attn_implementation", None) or "eager"
    if attention not in MASKABLE_ATTENTION:
        raise ValueError(
            f"attn_implementation={attention!r} cannot take the arbitrary 4D (tree) mask a lookahead step "
            f"needs; load the model with one of {list(MASKABLE_ATTENTION)}"
        )
    if getattr(model, "_is_stateful", False):
        raise ValueError(f"{name} keeps a recurrent state that cannot be rolled back to the accepted tokens")
    parameters = inspect.signature(model.forward).parameters
    if "attention_mask" not in parameters:
        raise ValueError(f"{name}.forward takes no attention_mask: a lookahead step needs a 4D tree mask")
    if "position_ids" not in parameters:
        raise ValueError(
            f"{name}.forward takes no position_ids: its positions come from the cache length or from biases "
            "built out of a 2D mask (e.g. ALiBi), so the tokens of a lookahead step, which share positions, "
            "cannot be placed"
        )
    if "cache" not in parameters and "past_key_values" not in parameters:
        raise ValueError(f"{name}.forward takes no KV cache, which lookahead decoding extends and cuts back")


def self_check(executor) -> None:
    """Decode a few tokens the lookahead way and compare with one plain forward; ``ValueError`` when
    they disagree.

    Reference: one forward of the prompt ``p`` (4 tokens) and ``r b c`` under a causal mask: logits at
    ``r``, ``b``, ``c``. Test, as the decoder works: the prompt but its last token prefilled,
    then one tree step with that token as the root and two candidates ``[r, a]`` and ``[r, b]`` (``a``
    and ``b`` at the same position, neither seeing the other), the cache cut back to ``p3 r b``, and ``c``
    fed alone. A model that attends to later tokens (not causal), ignores the tree mask or the positions,
    or keeps a cache of its own, fails it.
    """
    model = executor.model
    generator = torch.Generator().manual_seed(0)
    device = executor.device
    prompt = torch.randint(executor.vocab_size, (4,), generator=generator).to(device)
    r, a, b, c = torch.randint(executor.vocab_size, (4,), generator=generator).tolist()
    tree = executor.layout(0, 1, 2, 2)  # rows: p3, then [r, a] and [r, b]
    try:
        sequence = torch.cat([prompt, _ids(device, r, b, c)[0]])
        rows = torch.arange(4, 7, device=device)
        expected = executor.step(sequence[None], executor.chain(7), KeySlots(0), new_cache(), rows)[0].float()
        cache = new_cache()
        executor.prefill(prompt[None, :3], KeySlots(3), cache)
        tree_step = _ids(device, prompt[3], r, a, r, b)
        step = executor.step(tree_step, tree, KeySlots(3), cache, _rows(device, 5))[0]
        commit(cache, 3, tree.size, [0, 3, 4])
        after = executor.step(_ids(device, c), executor.chain(1), KeySlots(6), cache, _rows(device, 1))[0]
    except Exception as error:  # any failure of the model on a lookahead step
        raise ValueError(
            f"{type(model).__name__} failed on a lookahead step (a 4D tree mask, explicit "
            f"position_ids and a cache): {type(error).__name__}: {error}"
        ) from error
    got = torch.stack([step[3], step[4], after[0]]).float()
    scale = max(1.0, float(expected.abs().max()))
    tolerance = TOLERANCE.get(model.dtype, REDUCED_PRECISION_TOLERANCE) * scale
    error = float((got - expected).abs().max())
    if not error <= tolerance:  # also catches NaN
        raise ValueError(
            f"{type(model).__name__} does not decode causally under the attention mask, positions and "
            f"cache a lookahead step passes it (a tree step's logits differ from a plain forward's by "
            f"{error:.3g}, tolerance {tolerance:.3g}; e.g. a bidirectional model with is_decoder=False, or "
            "attention that ignores the 4D mask or position_ids), so its output would differ from generate's"
        )


def _ids(device, *tokens) -> torch.Tensor:
    """LongTensor [1, len(tokens)]: one row of a step."""
    return torch.tensor([[int(t) for t in tokens]], dtype=torch.long, device=device)


def _rows(device, count: int) -> torch.Tensor:
    return torch.arange(count, device=device)
