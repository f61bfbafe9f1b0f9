"""lade: lossless lookahead decoding for Hugging Face causal language models."""

from lade.custom_generate import custom_generate, generate
from lade.decoding import LookaheadDecoder
from lade.gqa_attention import use_gqa_sdpa
from lade.model import BUILTIN_MODELS, load_model
from lade.types import DecodingMetrics, GenerationResult

__all__ = [
    "BUILTIN_MODELS",
    "DecodingMetrics",
    "GenerationResult",
    "LookaheadDecoder",
    "custom_generate",
    "generate",
    "load_model",
    "use_gqa_sdpa",
]
