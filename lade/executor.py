"""The step executor: the only code that runs the model.

Owns step layouts on the model's device (``lade.layout``), the rows whose logits are read, the step's
positions (from ``lade.slots.KeySlots``), its attention masks (one-row mask buffers, batch masks with
holes, flex ``BlockMask``s) and the two kinds of forward pass: the prefill and a step. It takes tokens
and a layout and returns logits; it never reads or changes proposers, pools, verifiers or planners,
and it never commits to the cache (``lade.slots``).

The executor is shared by every call of a decoder: its caches of layouts and read rows are pure
functions of their keys. Mask buffers, which a step reuses and extends, belong to a call
(``MaskBuffers``, made per call), so calls in two threads never share one.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import replace

import torch

from lade.attention import MaskPlan, context_length
from lade.flex import block_masks, uses_flex
from lade.gqa_attention import copies_grouped_heads
from lade.layout import (
    StepLayout,
    additive_mask,
    batch_visibility,
    chain_layout,
    step_layout,
    trie_layout,
    visibility,
)
from lade.slots import KeySlots
from lade.trie import TokenTrie

log = logging.getLogger(__name__)

MASK_HEADROOM = 256  # prefix growth a step mask buffer absorbs before it is re-made
MASK_LAYOUTS = 32  # step layouts whose mask buffers are kept
TRIE_LAYOUTS = 256  # token-trie layouts kept (tries repeat: often chains, or one shared first token)


class MaskBuffers:
    """One call's reusable one-row masks: per step layout, ``[zeros | tree]`` over a prefix with
    headroom, of which a step's mask is a view (the ``MASK_LAYOUTS`` most recent layouts are kept)."""

    def __init__(self):
        self._buffers: dict[tuple, torch.Tensor] = {}

    def mask(self, layout: StepLayout, prefix_len: int, positions: torch.Tensor, dtype) -> torch.Tensor:
        """Additive mask [1, 1, S, P + S] of a step without a sliding window: zeros over the prefix
        followed by the tree block, a view into the layout's buffer, re-made every ``MASK_HEADROOM``
        tokens of growth."""
        size, keys = layout.size, prefix_len + layout.size
        key = layout.key
        buffer = self._buffers.pop(key, None)
        if buffer is None or buffer.shape[-1] < keys:
            width = keys + MASK_HEADROOM
            buffer = additive_mask(visibility(layout.tree_mask, width - size, positions), dtype)
        self._buffers[key] = buffer  # most recently used last
        if len(self._buffers) > MASK_LAYOUTS:
            self._buffers.pop(next(iter(self._buffers)))
        return buffer[..., buffer.shape[-1] - keys :]


class StepExecutor:
    """Runs a model's prefill and lookahead steps.

    Args:
        model: a decoder-only transformers model that takes a 4D ``attention_mask``, ``position_ids``
            and a cache (checked by ``lade.compatibility``).
    """

    def __init__(self, model):
        self.model = model
        self.mask_plan = MaskPlan.from_config(model.config)
        self.flex = uses_flex(model)  # masks go to the model as flex attention BlockMasks
        self.context_length = context_length(model.config)
        self.vocab_size = model.config.get_text_config(decoder=True).vocab_size
        self.keeps_logits = "logits_to_keep" in inspect.signature(model.forward).parameters
        # with sdpa, every step of several tokens copies the cache's grouped key/value heads
        if copies_grouped_heads(model):
            log.info("lookahead: lade.use_gqa_sdpa(model) spares sdpa's copies of grouped key/value heads")
        self._layouts: dict[tuple, StepLayout] = {}
        self._trie_layouts: dict[tuple, StepLayout] = {}
        self._rows: dict[tuple, torch.Tensor] = {}

    @property
    def device(self) -> torch.device:
        """The device of the model's input embeddings, where tokens and masks go."""
        return self.model.get_input_embeddings().weight.device

    def layout(self, num_levels: int, window: int, num_candidates: int, candidate_len: int) -> StepLayout:
        """The step layout (``lade.layout.step_layout``) on the model's device, cached."""
        key = (num_levels, window, num_candidates, candidate_len)
        if key not in self._layouts:
            self._layouts[key] = self._to_device(step_layout(*key))
        return self._layouts[key]

    def trie_layout(self, num_levels: int, window: int, trie: TokenTrie, candidate_len: int) -> StepLayout:
        """The layout of a step whose verification branch is ``trie`` (``lade.layout.trie_layout``) on
        the model's device; the ``TRIE_LAYOUTS`` most recent structures are kept."""
        key = (num_levels, window, trie.parents, trie.candidate_nodes, candidate_len)
        layout = self._trie_layouts.pop(key, None)
        if layout is None:
            layout = self._to_device(trie_layout(*key))
        self._trie_layouts[key] = layout  # most recently used last
        if len(self._trie_layouts) > TRIE_LAYOUTS:
            self._trie_layouts.pop(next(iter(self._trie_layouts)))
        return layout

    def chain(self, length: int) -> StepLayout:
        """A causal chain of ``length`` tokens (``lade.layout.chain_layout``) on the model's device."""
        return self._to_device(chain_layout(length))

    def rows_read(self, layout: StepLayout, levels_read: int) -> torch.Tensor:
        """Step rows whose logits are read, in the order the loop slices them: the last token, the
        candidates (so row 0 and the candidates are one contiguous block for the verifier, no copy),
        then the newest ``levels_read`` levels (LongTensor [1 + G'(N-1) + levels_read*W], cached)."""
        key = (layout.num_levels, layout.window, layout.size, levels_read)
        if key not in self._rows:
            first_level = 1 + (layout.num_levels - levels_read) * layout.window
            rows = [0, *range(layout.candidates.start, layout.size), *range(first_level, layout.branch.stop)]
            self._rows[key] = torch.tensor(rows, device=self.device)
        return self._rows[key]

    def prefill(self, tokens: torch.Tensor, slots: KeySlots, cache) -> torch.Tensor:
        """Run the model over prompts [B, T] into an empty cache; ``slots``: what the cache will hold
        (``KeySlots.of_prompts``). Returns the logits after each prompt's last token [B, 1, V] (the
        first new token's, as ``generate`` reads them from its prefill). One row without padding runs
        under the model's own causal (and sliding-window) masking: a plain chain needs no tree mask,
        and attention kernels run it faster than an explicit [T, T] mask (``python
        experiments/ab_prefill.py``); flex attention gets the chain's mask from us, as every step's
        (see ``lade.flex``). Left-padded rows get a mask in which a padding query sees only itself (no
        query row is empty) and real tokens see the real tokens before them."""
        size = tokens.shape[1]
        if slots.exact and not self.flex:
            extra = {"logits_to_keep": 1} if self.keeps_logits else {}
            positions = torch.arange(size, device=tokens.device)[None]
            out = self.model(input_ids=tokens, position_ids=positions, cache=cache, use_cache=True, **extra)
            return out.logits[:, -1:]
        last = torch.tensor([size - 1], device=tokens.device)  # the one row whose logits are read
        if slots.exact:
            return self.step(tokens, self.chain(size), KeySlots(0), cache, last)
        chain = torch.ones(size, size, dtype=torch.bool, device=tokens.device).tril_()
        diagonal = torch.eye(size, dtype=torch.bool, device=tokens.device)
        empty = KeySlots(0, slots.valid[:, :0], slots.positions[:, :0], slots.counts)

        def real_keys_only(visible):
            return (visible & slots.valid[:, None, :]) | diagonal

        masks = self._batch_masks(chain, empty, slots.positions, real_keys_only)
        return self._run(tokens, slots.positions, masks, cache, last)

    def step(
        self,
        tokens: torch.Tensor,
        layout: StepLayout,
        slots: KeySlots,
        cache,
        rows: torch.Tensor | None,
        buffers: MaskBuffers | None = None,
        timer=None,
        row_layouts: list[StepLayout] | None = None,
    ) -> torch.Tensor | None:
        """Run the model over one step's tokens [B, S] laid out as ``layout`` after the cache's
        ``slots``; return the logits [B, len(rows), V] of ``rows`` (LongTensor of step rows), or None
        for ``rows=None`` (no logits). ``buffers``: the call's one-row mask buffers (None: masks made
        afresh); ``timer``: a ``StageTimer`` that gets a "mask" lap; ``row_layouts``: each row's own
        layout of the same size (token tries differ from row to row), else ``layout`` for every row."""
        depths = layout.depths if row_layouts is None else torch.stack([r.depths for r in row_layouts])
        positions = slots.step_positions(depths, self.context_length)  # [B, S]
        if slots.exact:
            row = positions[0]
            masks = {
                kind: self._one_row_mask(layout, slots.length, row, window, buffers)
                for kind, window in self.mask_plan.windows.items()
            }
            masks = masks if self.mask_plan.by_layer_type else next(iter(masks.values()))
        else:
            trees = (
                layout.tree_mask if row_layouts is None else torch.stack([r.tree_mask for r in row_layouts])
            )
            masks = self._batch_masks(trees, slots, positions)
        if timer is not None:
            timer.lap("mask")
        return self._run(tokens, positions, masks, cache, rows)

    def _run(self, tokens, positions, attention_mask, cache, rows):
        """The model's forward over tokens [B, S] at ``positions`` [B, S]; logits [B, len(rows), V]."""
        extra = {}
        if self.keeps_logits:  # the LM head runs only on the rows that are read
            extra["logits_to_keep"] = 1 if rows is None else rows
        if self.flex:
            attention_mask = block_masks(attention_mask)
        out = self.model(
            input_ids=tokens,
            position_ids=positions,
            attention_mask=attention_mask,
            cache=cache,
            use_cache=True,
            **extra,
        )
        if rows is None:
            return None
        return out.logits if self.keeps_logits else out.logits[:, rows]

    def _one_row_mask(self, layout, prefix_len: int, positions, window, buffers: MaskBuffers | None):
        """Additive mask [1, 1, S, P + S] of a one-row step whose slot p holds position p: a view into
        the call's buffer without a sliding window; made afresh with one (it depends on the positions)
        or without buffers."""
        if window is None and buffers is not None:
            return buffers.mask(layout, prefix_len, positions, self.model.dtype)
        return additive_mask(visibility(layout.tree_mask, prefix_len, positions, window), self.model.dtype)

    def _batch_masks(self, tree_mask, slots: KeySlots, positions, extra_visible=None):
        """The step's additive masks [B, 1, S, P + S], one per attention kind (a dict for hybrid
        models), from the slots' validity and positions."""
        masks = {}
        for kind, window in self.mask_plan.windows.items():
            visible = batch_visibility(tree_mask, slots.valid, slots.positions, positions, window)
            if extra_visible is not None:
                visible = extra_visible(visible)
            masks[kind] = additive_mask(visible, self.model.dtype)[0, 0][:, None]
        return masks if self.mask_plan.by_layer_type else next(iter(masks.values()))

    def _to_device(self, layout: StepLayout) -> StepLayout:
        device = self.device
        return replace(layout, depths=layout.depths.to(device), tree_mask=layout.tree_mask.to(device))
