"""``dtype="auto"`` (`lade.dtype_choice`): both dtypes timed once, the choice recorded and reused."""

from __future__ import annotations

import json

import pytest
import torch

import lade
from lade.dtype_choice import GAIN_PER_DOUBLING, load_in_faster_dtype, seconds_per_token


def counting_loader(calls: list):
    def load(dtype):
        calls.append(dtype)
        return lade.load_model("tiny-random-llama", dtype=dtype)

    return load


def test_both_dtypes_are_timed_once_then_the_recorded_choice_is_loaded(tmp_path):
    calls = []
    model, _ = load_in_faster_dtype(
        counting_loader(calls), model_of=lambda loaded: loaded[0], calibration_dir=tmp_path
    )
    assert calls == [torch.float32, torch.bfloat16]
    (record,) = tmp_path.glob("dtype-*.json")
    data = json.loads(record.read_text())
    assert set(data["seconds"]) == {"float32", "bfloat16"}
    assert all(set(by_size) == {"1", "4", "16"} for by_size in data["seconds"].values())
    faster = min(data["seconds_per_token"], key=data["seconds_per_token"].get)
    assert data["chosen"] == faster and model.dtype == getattr(torch, faster)

    calls.clear()
    again, _ = load_in_faster_dtype(
        counting_loader(calls), model_of=lambda loaded: loaded[0], calibration_dir=tmp_path
    )
    assert again.dtype == model.dtype
    assert calls == [torch.float32] if faster == "float32" else calls == [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("recorded", ["float32", "bfloat16"])
def test_a_recorded_choice_decides_and_a_damaged_record_is_measured_again(tmp_path, recorded):
    calls = []
    load_in_faster_dtype(counting_loader(calls), model_of=lambda loaded: loaded[0], calibration_dir=tmp_path)
    (record,) = tmp_path.glob("dtype-*.json")
    data = json.loads(record.read_text())
    record.write_text(json.dumps(data | {"chosen": recorded}))
    model, _ = load_in_faster_dtype(
        lambda d: lade.load_model("tiny-random-llama", dtype=d), lambda x: x[0], tmp_path
    )
    assert model.dtype == getattr(torch, recorded)
    record.write_text("{ not json")
    calls.clear()
    load_in_faster_dtype(counting_loader(calls), model_of=lambda loaded: loaded[0], calibration_dir=tmp_path)
    assert calls == [torch.float32, torch.bfloat16]  # measured again
    assert json.loads(record.read_text())["format"] == 1


def test_seconds_per_token_credits_larger_steps_with_the_planners_prior():
    # fast at one token, slow at 16: the plain loop decides
    assert seconds_per_token({1: 0.05, 4: 0.12, 16: 0.36}) == pytest.approx(0.05)
    # flat: the 16-token step, committing 1 + 4 * GAIN tokens, decides
    assert seconds_per_token({1: 0.10, 4: 0.10, 16: 0.10}) == pytest.approx(
        0.10 / (1 + 4 * GAIN_PER_DOUBLING)
    )


def test_load_model_takes_auto():
    model, _ = lade.load_model("tiny-random-qwen2", dtype="auto")
    assert model.dtype in (torch.float32, torch.bfloat16)
