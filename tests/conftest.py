"""Shared fixtures: tiny random models (built once per session) and the HF greedy reference."""

import os

import pytest
import torch

import lade

if os.environ.get("PYTEST_XDIST_WORKER"):  # pytest -n 2: one torch thread per worker, one worker per core
    torch.set_num_threads(1)
    # The scripts, sweeps and notebook kernels the tests start inherit it: at torch's default (a
    # thread per core) each ran beside the other worker on more threads than cores, up to 4x slower.
    os.environ["OMP_NUM_THREADS"] = "1"


def pytest_addoption(parser):
    parser.addoption(
        "--real-models",
        action="store_true",
        help="also run the tests marked real_models (Qwen2.5-Coder: their part packages must be installed)",
    )


def pytest_collection_modifyitems(config, items):
    if config.getoption("--real-models"):
        return
    skip = pytest.mark.skip(reason="a real_models test: run with --real-models")
    for item in items:
        if "real_models" in item.keywords:
            item.add_marker(skip)


ARCHITECTURES = ("llama", "qwen2", "mistral", "gpt2", "gemma3")
ATTENTION = ("sdpa", "sdpa_gqa", "eager")
VOCAB = 128


@pytest.fixture(scope="session")
def tiny_models():
    """(arch, attn_implementation) -> model, built on first use."""
    built = {}

    def get(arch: str, attn: str = "sdpa"):
        if (arch, attn) not in built:
            model, _ = lade.load_model(f"tiny-random-{arch}", attn_implementation=attn)
            built[arch, attn] = model
        return built[arch, attn]

    return get


def hf_greedy(model, input_ids: torch.Tensor, max_new_tokens: int, eos_token_id=None) -> torch.Tensor:
    """The model's own greedy decoding: LongTensor [1, T + new]."""
    eos = [] if eos_token_id is None else eos_token_id
    return model.generate(
        input_ids,
        attention_mask=torch.ones_like(input_ids),  # no token is padding, whatever its id
        do_sample=False,
        max_new_tokens=max_new_tokens,
        eos_token_id=eos,
        pad_token_id=0,
    )


def prompt(kind: str, seed: int, length: int = 12) -> torch.Tensor:
    """A random prompt [1, length] ('random') or a short random motif repeated ('repetitive')."""
    generator = torch.Generator().manual_seed(seed)
    if kind == "random":
        return torch.randint(0, VOCAB, (1, length), generator=generator)
    motif = torch.randint(0, VOCAB, (4,), generator=generator)
    return motif.repeat(length // 4 + 1)[:length][None]
