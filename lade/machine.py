"""What machine a benchmark ran on, written next to its figures: the CPU model, the threads torch
uses, the vector extensions that decide float32 and bfloat16 speed (AVX2, AVX-512, native bf16) and
MKL's code-path setting, which decides what a multi-token float32 forward costs.

MKL (torch's CPU BLAS) reads ``MKL_CBWR`` once, when it starts. On this project's AMD EPYC machines
(MKL 2024.2, torch 2.13) a SmolLM2 float32 forward of 2-16 tokens cost 1.5-2x one token with the
variable unset and 1.1-1.4x with ``MKL_CBWR=AUTO``, one token the same in both
(``experiments/results/blas_mode``): a cost every speculative step pays and a plain step does not. The
library never sets it (a process-wide switch is the user's to make); it records it beside every
measurement and keys latency curves by it.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

SPEED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
MKL_MODE_VARIABLE = "MKL_CBWR"


def mkl_mode() -> str | None:
    """MKL's code-path setting (``MKL_CBWR``, e.g. ``"AUTO"``) when torch runs on MKL and it is set in
    this process's environment, else None (MKL's default dispatch)."""
    if not torch.backends.mkl.is_available():
        return None
    return os.environ.get(MKL_MODE_VARIABLE) or None


def cpu_description() -> str:
    """``"AMD EPYC, 2 threads, avx2"``: CPU model, torch's thread count and the `SPEED_FLAGS` present
    (Linux ``/proc/cpuinfo``; ``"unknown CPU, ..."`` elsewhere), then ``", MKL_CBWR=AUTO"`` when MKL
    runs in a mode set by the environment (``mkl_mode``)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        info = ""
    lines = info.splitlines()
    name = next((line.split(":", 1)[1].strip() for line in lines if "model name" in line), "unknown CPU")
    flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), [])
    wanted = [f for f in SPEED_FLAGS if f in flags]
    mode = mkl_mode()
    blas = f", {MKL_MODE_VARIABLE}={mode}" if mode else ""
    return f"{name}, {torch.get_num_threads()} threads, {' '.join(wanted) or 'no AVX2'}{blas}"


def has_native_bf16(machine: str | None = None) -> bool:
    """Whether ``machine`` (a benchmark row's machine: ``cpu_description()`` or a GPU's name; default
    this CPU) has bfloat16 arithmetic: a GPU (its name has no thread count) or a CPU with AVX512-BF16
    or AMX, where bf16 pays for extra tokens."""
    machine = cpu_description() if machine is None else machine
    return "threads" not in machine or "avx512_bf16" in machine or "amx_bf16" in machine
