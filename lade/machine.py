"""What machine a benchmark ran on, written next to its figures: the CPU model, the threads torch
uses and the vector extensions that decide float32 and bfloat16 speed (AVX2, AVX-512, native bf16)."""

from __future__ import annotations

from pathlib import Path

import torch

SPEED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def cpu_description() -> str:
    """``"AMD EPYC, 2 threads, avx2"``: CPU model, torch's thread count and the `SPEED_FLAGS` present
    (Linux ``/proc/cpuinfo``; ``"unknown CPU, ..."`` elsewhere)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        info = ""
    lines = info.splitlines()
    name = next((line.split(":", 1)[1].strip() for line in lines if "model name" in line), "unknown CPU")
    flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), [])
    wanted = [f for f in SPEED_FLAGS if f in flags]
    return f"{name}, {torch.get_num_threads()} threads, {' '.join(wanted) or 'no AVX2'}"


def has_native_bf16(machine: str | None = None) -> bool:
    """Whether ``machine`` (a benchmark row's machine: ``cpu_description()`` or a GPU's name; default
    this CPU) has bfloat16 arithmetic: a GPU (its name has no thread count) or a CPU with AVX512-BF16
    or AMX, where bf16 pays for extra tokens."""
    machine = cpu_description() if machine is None else machine
    return "threads" not in machine or "avx512_bf16" in machine or "amx_bf16" in machine
