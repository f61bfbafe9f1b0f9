"""Which attention masks a model needs: full causal layers, sliding-window layers, or both.

The decoding loop builds its own 4D masks, which transformers passes to the attention layers as
they are. A model with sliding-window layers must therefore get the window applied by us, on those
layers only; hybrid models take a ``{layer_type: mask}`` dict (Gemma 2/3, Qwen2 with sliding
layers), single-type models one tensor. Layer types we cannot express as a mask (chunked, linear
or state-space layers) are refused before generating rather than decoded wrongly.
"""

from __future__ import annotations

from dataclasses import dataclass

SUPPORTED_LAYER_TYPES = ("full_attention", "sliding_attention")


@dataclass(frozen=True)
class MaskPlan:
    """Masks to build each step: one per attention kind, each with its sliding window or None."""

    windows: dict[str, int | None]  # layer type -> sliding window in tokens (None: full causal)
    by_layer_type: bool  # pass a dict keyed by layer type instead of a single tensor

    @classmethod
    def from_config(cls, config) -> MaskPlan:
        """Read the attention layout from a (possibly multimodal) transformers config."""
        text = config.get_text_config(decoder=True)
        if getattr(text, "is_encoder_decoder", False):
            raise ValueError("lookahead decoding needs a decoder-only model; got an encoder-decoder config")
        sliding = getattr(text, "sliding_window", None)
        layer_types = getattr(text, "layer_types", None)
        if layer_types:
            unsupported = sorted(set(layer_types) - set(SUPPORTED_LAYER_TYPES))
            if unsupported:
                raise ValueError(
                    f"model has layer types {unsupported}, which lookahead decoding cannot mask exactly; "
                    f"supported: {list(SUPPORTED_LAYER_TYPES)}"
                )
            if "sliding_attention" in layer_types and not sliding:
                raise ValueError("model has sliding_attention layers but no config.sliding_window")
            windows = {
                kind: sliding if kind == "sliding_attention" else None for kind in sorted(set(layer_types))
            }
            return cls(windows=windows, by_layer_type=len(windows) > 1)
        if sliding and getattr(text, "use_sliding_window", True):
            return cls(windows={"sliding_attention": sliding}, by_layer_type=False)
        return cls(windows={"full_attention": None}, by_layer_type=False)


def context_length(config) -> int | None:
    """Longest sequence the model's positions cover, or None when the config does not say."""
    text = config.get_text_config(decoder=True)
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(text, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None
