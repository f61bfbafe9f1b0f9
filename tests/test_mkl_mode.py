"""MKL's code-path setting: recorded beside measurements, part of a latency curve's cache key, and
hinted at when a curve shows MKL's slow default dispatch of small float32 matrix products."""

from __future__ import annotations

import logging

import pytest
import torch

from lade.calibration import LatencyModel, calibration_key
from lade.calibrator import SLOW_TWO_TOKEN_STEP, hint_if_mkl_dispatch_slow
from lade.machine import MKL_MODE_VARIABLE, cpu_description, has_native_bf16, mkl_mode
from lade.model import load_model

SLOW = LatencyModel((1, 2, 16), (1.0, 1.72, 2.12))  # as measured with MKL's default on AMD EPYC
FAST = LatencyModel((1, 2, 16), (1.0, 1.02, 1.49))  # the same machine with MKL_CBWR=AUTO
needs_mkl = pytest.mark.skipif(not torch.backends.mkl.is_available(), reason="torch without MKL")


@needs_mkl
def test_the_mode_is_read_from_the_environment_and_written_in_the_machine(monkeypatch):
    monkeypatch.delenv(MKL_MODE_VARIABLE, raising=False)
    assert mkl_mode() is None and MKL_MODE_VARIABLE not in cpu_description()
    monkeypatch.setenv(MKL_MODE_VARIABLE, "")
    assert mkl_mode() is None  # set but empty: MKL's default
    monkeypatch.setenv(MKL_MODE_VARIABLE, "AUTO")
    assert mkl_mode() == "AUTO"
    machine = cpu_description()
    assert machine.endswith(", MKL_CBWR=AUTO") and "threads" in machine
    assert has_native_bf16(machine) == has_native_bf16(machine.removesuffix(", MKL_CBWR=AUTO"))


@needs_mkl
def test_a_curve_measured_in_one_mode_is_not_loaded_in_another(monkeypatch):
    model, _ = load_model("tiny-random-llama")
    monkeypatch.delenv(MKL_MODE_VARIABLE, raising=False)
    default = calibration_key(model)
    monkeypatch.setenv(MKL_MODE_VARIABLE, "AUTO")
    auto = calibration_key(model)
    monkeypatch.setenv(MKL_MODE_VARIABLE, "AVX2")
    assert len({default, auto, calibration_key(model)}) == 3


@needs_mkl
def test_the_hint_is_given_only_for_a_slow_two_token_step_in_float32_with_the_default(monkeypatch, caplog):
    assert SLOW.relative(2) >= SLOW_TWO_TOKEN_STEP > FAST.relative(2)
    model, _ = load_model("tiny-random-llama")
    half, _ = load_model("tiny-random-llama", dtype="bfloat16")
    monkeypatch.delenv(MKL_MODE_VARIABLE, raising=False)
    with caplog.at_level(logging.WARNING, logger="lade.calibrator"):
        assert not hint_if_mkl_dispatch_slow(FAST, model)
        assert not hint_if_mkl_dispatch_slow(SLOW, half)  # bf16 products do not go through MKL's sgemm
        assert not hint_if_mkl_dispatch_slow(LatencyModel((1, 4), (1.0, 3.0)), model)  # no 2-token size
        assert hint_if_mkl_dispatch_slow(SLOW, model)
        monkeypatch.setenv(MKL_MODE_VARIABLE, "AUTO")
        assert not hint_if_mkl_dispatch_slow(SLOW, model)  # the user chose a mode: nothing to suggest
    (record,) = caplog.records
    assert "1.72x" in record.getMessage() and "MKL_CBWR=AUTO" in record.getMessage()
