"""Loading the models that lookahead decoding runs on.

`load_model` accepts three kinds of names:

* ``"smollm2"``, ``"qwen2.5-coder-0.5b"``, ``"qwen2.5-coder-1.5b"``: SmolLM2-135M-Instruct and the
  Qwen2.5-Coder instruct models, shipped by PyPI packages as GGUF files (the Qwen ones split into
  ordered parts, `lade.packaged`). The first load assembles and checks the file, dequantizes it to
  float32 (slow: minutes for the 1.5B) and caches the result as safetensors; later loads read the cache.
* ``"tiny-random-<arch>"``: a 2-layer random model built from a config, for fast tests. No download, and the
  same weights on every call.
* anything else: a local directory or a Hugging Face hub id, handed to ``from_pretrained``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import transformers
from safetensors import safe_open
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from lade.dtype_choice import load_in_faster_dtype
from lade.gqa_attention import GQA_SDPA, use_gqa_sdpa
from lade.gqa_attention import register as register_gqa_sdpa
from lade.packaged import QWEN_CODER_0_5B_GGUF, QWEN_CODER_1_5B_GGUF, SMOLLM2_GGUF, PackagedGGUF

SMOLLM2 = "smollm2"
# load_model name -> (the packaged GGUF, the cache folder's name)
PACKAGED_MODELS = {
    SMOLLM2: (SMOLLM2_GGUF, "smollm2-135m-instruct"),
    "qwen2.5-coder-0.5b": (QWEN_CODER_0_5B_GGUF, "qwen2.5-coder-0.5b-instruct"),
    "qwen2.5-coder-1.5b": (QWEN_CODER_1_5B_GGUF, "qwen2.5-coder-1.5b-instruct"),
}
_TINY_PREFIX = "tiny-random-"
TINY_ARCHS = ("llama", "qwen2", "mistral", "gpt2", "gemma3")
BUILTIN_MODELS = (*PACKAGED_MODELS, *(_TINY_PREFIX + arch for arch in TINY_ARCHS))

TINY_VOCAB_SIZE = 128
# Random models at the default initializer_range (0.02) have nearly flat logits, so greedy argmax flips
# between near-tied tokens whenever a kernel sums in another order. At 0.5 the top-1/top-2 gap is ~1 (median),
# which makes exact greedy-equivalence tests meaningful, and the greedy output still varies with the prompt.
TINY_INITIALIZER_RANGE = 0.5

_MANIFEST = "lade-cache.json"
# Bump when the cache layout or the way it is built changes, so old caches get rebuilt.
_CACHE_FORMAT = 1
# Staging folders untouched this long were left by a killed build (a live one writes within a minute).
_ABANDONED_AFTER_S = 3600
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def default_cache_dir() -> Path:
    """Where converted models are cached when `load_model` is not given a ``cache_dir``."""
    return Path.home() / ".cache" / "lade" / "models"


def load_model(
    name_or_path: str,
    dtype: torch.dtype | str = torch.float32,
    device: str | torch.device = "cpu",
    cache_dir: str | os.PathLike | None = None,
    **from_pretrained_kwargs,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase | None]:
    """Load a causal LM and its tokenizer, in eval mode.

    ``name_or_path`` is one of `BUILTIN_MODELS`, a local model directory or a hub id (``owner/name``);
    ``dtype`` a torch dtype, its name (``"bfloat16"``) or ``"auto"``: the faster of float32 and
    bfloat16 for this model on this machine, measured once and cached (`lade.dtype_choice`).
    ``cache_dir`` only concerns the packaged models (`PACKAGED_MODELS`; default: `default_cache_dir()`);
    a missing package raises `ModuleNotFoundError` naming the ``pip install`` command. Extra keyword arguments
    (``device_map=``, ``attn_implementation=``, ...) go to ``from_pretrained``; when ``device_map`` is given
    the model is left where it puts it instead of being moved to ``device``. Tiny random models accept only
    ``attn_implementation`` and come with no tokenizer (``None``): they have no pad and no eos token, so
    greedy runs always produce ``max_new_tokens`` tokens, and no prompt token is taken for padding
    (``generate`` infers an attention mask from the pad token when none is given).

    Without ``attn_implementation`` (or with None), a model transformers loads with ``sdpa`` is switched
    to ``sdpa_gqa``: the same attention, reading grouped key/value heads without copying them on
    steps of several tokens (`lade.gqa_attention`); ``attn_implementation="sdpa"`` keeps transformers'.

    Returns ``(model, tokenizer)``. Raises `ValueError` for a name that is none of the above.
    """
    if dtype == "auto":
        return load_in_faster_dtype(
            lambda chosen: load_model(name_or_path, chosen, device, cache_dir, **from_pretrained_kwargs),
            model_of=lambda loaded: loaded[0],
        )
    dtype = _torch_dtype(dtype)
    if from_pretrained_kwargs.get("attn_implementation") == GQA_SDPA:
        register_gqa_sdpa()  # transformers must know the name before it builds the model
    if name_or_path in PACKAGED_MODELS:
        gguf, cache_name = PACKAGED_MODELS[name_or_path]
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        folder = _packaged_cache(gguf, root / cache_name)
        model, tokenizer = _from_pretrained(folder, dtype, from_pretrained_kwargs)
    elif name_or_path in BUILTIN_MODELS:
        arch = name_or_path.removeprefix(_TINY_PREFIX)
        model, tokenizer = _tiny_random(arch, dtype, from_pretrained_kwargs), None
    else:
        check_model_name(name_or_path)
        model, tokenizer = _from_pretrained(name_or_path, dtype, from_pretrained_kwargs)
    if "device_map" not in from_pretrained_kwargs:
        model.to(device)
    if from_pretrained_kwargs.get("attn_implementation") is None:
        use_gqa_sdpa(model)  # sdpa, without copying grouped key/value heads (lade.gqa_attention)
    return model.eval(), tokenizer


def check_model_name(name_or_path: str) -> None:
    """Raise ``ValueError`` unless the name is built in, an existing folder or shaped like a hub id.

    Cheap (nothing is loaded), so configs can be checked before a sweep starts.
    """
    if name_or_path in BUILTIN_MODELS:
        return
    if (
        isinstance(name_or_path, str)
        and name_or_path
        and (Path(name_or_path).is_dir() or _HUB_ID.match(name_or_path))
    ):
        return  # Path("") would be "." and count as a folder: hence the emptiness check
    raise ValueError(
        f"Unknown model {name_or_path!r}: expected one of {', '.join(BUILTIN_MODELS)}, "
        "an existing local directory, or a Hugging Face hub id (owner/name)."
    )


def _torch_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """``torch.bfloat16`` or its name (``"bfloat16"``, as configs write it)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    value = getattr(torch, str(dtype), None)
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch dtype or its name, got {dtype!r}")
    return value


def _from_pretrained(
    path: str | Path, dtype: torch.dtype, kwargs: dict
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase | None]:
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **kwargs)
    # A local directory may hold just a model (e.g. a saved tiny one): no tokenizer then, not an error.
    tokenizer_files = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
    has_tokenizer = not Path(path).is_dir() or any((Path(path) / name).exists() for name in tokenizer_files)
    return model, AutoTokenizer.from_pretrained(path) if has_tokenizer else None


def _tiny_random(arch: str, dtype: torch.dtype, kwargs: dict) -> PreTrainedModel:
    unexpected = set(kwargs) - {"attn_implementation"}
    if unexpected:
        raise TypeError(f"tiny-random-{arch} accepts only attn_implementation, not {sorted(unexpected)}")
    # No special ids (gpt2's default 50256 would not even fit the vocab): a random model emits any given id
    # often, so an eos would make greedy runs of uneven length, and a pad id would make generate read that
    # id inside random prompts as padding (it infers the attention mask from it).
    common = dict(
        vocab_size=TINY_VOCAB_SIZE,
        initializer_range=TINY_INITIALIZER_RANGE,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    if arch == "gpt2":
        config = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=512, **common)
        model_class = transformers.GPT2LMHeadModel
    else:
        decoder = dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=512,
            **common,
        )
        if arch == "llama":
            config, model_class = transformers.LlamaConfig(**decoder), transformers.LlamaForCausalLM
        elif arch == "qwen2":
            config, model_class = transformers.Qwen2Config(**decoder), transformers.Qwen2ForCausalLM
        elif arch == "mistral":
            config = transformers.MistralConfig(sliding_window=8, **decoder)
            model_class = transformers.MistralForCausalLM
        else:
            config = transformers.Gemma3TextConfig(
                head_dim=16,
                query_pre_attn_scalar=16,
                # A window shorter than test prompts, so the sliding layer's masking is exercised.
                sliding_window=4,
                layer_types=["sliding_attention", "full_attention"],
                # Tied, Gemma's sqrt(hidden_size)-scaled embeddings make a random model's logits peak on the
                # input token itself, so greedy decoding repeats one token forever.
                tie_word_embeddings=False,
                **decoder,
            )
            model_class = transformers.Gemma3ForCausalLM
    if kwargs.get("attn_implementation") is not None:
        config._attn_implementation = kwargs["attn_implementation"]
    # fork_rng: seeding here must not change the caller's random stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = model_class(config)
    return model.to(dtype)


def _packaged_cache(gguf: PackagedGGUF, target: Path) -> Path:
    """``target``, holding the float32 safetensors copy of ``gguf``, built first if need be."""
    if not gguf.split:
        path = gguf.locate_single()
        return _ensure_cached(target, lambda out: _convert_gguf(path, out), gguf.source())
    gguf.parts()  # a missing package fails here, before any work

    def build(out: Path) -> None:
        # The assembled file (up to 1.1 GB) lives only while it is converted, next to the staging folder.
        with tempfile.TemporaryDirectory(prefix=f".{target.name}.gguf-", dir=target.parent) as folder:
            _convert_gguf(gguf.assemble(Path(folder)), out)

    return _ensure_cached(target, build, gguf.source())


def _convert_gguf(gguf: Path, out: Path) -> None:
    """Dequantize ``gguf`` to float32 and save model and tokenizer to ``out`` as a plain checkpoint."""
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The weights are plain float32 tensors now; a GGUF quantizer left attached would refuse save_pretrained,
    # and a quantization_config left in config.json would make every later load go through it again.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = (
        tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _ensure_cached(target: Path, build: Callable[[Path], None], source: dict) -> Path:
    """Return ``target`` once it holds a complete cache, calling ``build(folder)`` to fill it if not.

    ``build`` writes into a fresh folder next to ``target`` that is renamed into place only when complete, so
    other processes see either no cache or a whole one. If another process publishes first, its copy is used.
    """
    if _cache_is_valid(target, source):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(target)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        build(staging)
        files = {p.name: p.stat().st_size for p in sorted(staging.iterdir()) if p.is_file()}
        # Written last: a folder with a manifest that matches its files was built to the end.
        manifest = {"format": _CACHE_FORMAT, "source": source, "files": files}
        (staging / _MANIFEST).write_text(json.dumps(manifest, indent=1))
        if _cache_is_valid(target, source):  # another process finished while we were building
            return target
        if target.exists():  # a broken cache: move it aside, as rename cannot replace a non-empty folder
            stale = Path(tempfile.mkdtemp(prefix=f".{target.name}.stale-", dir=target.parent))
            try:
                os.replace(target, stale / target.name)
            except FileNotFoundError:  # someone else moved it already
                pass
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.replace(staging, target)
        except OSError:
            # Lost the race between moving the broken copy away and publishing: use the winner's copy.
            if not _cache_is_valid(target, source):
                raise
        return target
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _remove_abandoned(target: Path) -> None:
    """Delete staging folders of ``target`` that killed processes left behind (each one a full model)."""
    for folder in target.parent.glob(f".{target.name}.*-*"):
        try:
            if time.time() - folder.stat().st_mtime > _ABANDONED_AFTER_S:
                shutil.rmtree(folder)
        except OSError:  # removed by another process meanwhile
            pass


def _cache_is_valid(folder: Path, source: dict) -> bool:
    """Whether ``folder`` holds a complete cache of ``source``: cheap checks, run before every load."""
    try:
        manifest = json.loads((folder / _MANIFEST).read_text())
        if manifest.get("format") != _CACHE_FORMAT or manifest.get("source") != source:
            return False
        for name, size in manifest["files"].items():
            if (folder / name).stat().st_size != size:
                return False
            # Catches same-size damage to the headers, which is what from_pretrained would trip on.
            if name.endswith(".json"):
                json.loads((folder / name).read_text())
            elif name.endswith(".safetensors"):
                with safe_open(folder / name, framework="pt"):
                    pass
        return True
    except Exception:  # unreadable in any way (missing, truncated, garbled): rebuild rather than fail
        return False
