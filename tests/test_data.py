"""Prompt loaders: real files by path, clear errors when missing."""

from pathlib import Path

import pytest

from lade.data import (
    MT_BENCH_CATEGORIES,
    encode,
    load_humaneval,
    load_jsonl,
    load_spec_bench,
    load_synthetic,
)

SPEC_BENCH = Path("../shared/data/spec_bench/question.jsonl")
needs_spec_bench = pytest.mark.skipif(
    not SPEC_BENCH.exists(), reason=f"{SPEC_BENCH} is not beside the checkout"
)


def test_humaneval_in_task_order():
    prompts = load_humaneval(limit=3)
    assert [p.id for p in prompts] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert prompts[0].text.startswith("from typing import List")


@needs_spec_bench
def test_spec_bench_categories_and_limit():
    assert len(load_spec_bench(SPEC_BENCH, "summarization", limit=None)) == 80
    mt_bench = load_spec_bench(SPEC_BENCH, list(MT_BENCH_CATEGORIES), limit=None)
    assert len(mt_bench) == 80 and {p.category for p in mt_bench} == set(MT_BENCH_CATEGORIES)
    assert len(load_spec_bench(SPEC_BENCH, None, limit=None)) == 480
    assert len(load_spec_bench(SPEC_BENCH, "qa", limit=5)) == 5


@needs_spec_bench
def test_stratified_takes_the_categories_in_turn():
    categories = list(MT_BENCH_CATEGORIES)
    in_file_order = load_spec_bench(SPEC_BENCH, categories, limit=8)
    assert {p.category for p in in_file_order} == {"writing"}  # why MT-Bench needs stratifying
    stratified = load_spec_bench(SPEC_BENCH, categories, limit=16, stratified=True)
    assert [p.category for p in stratified] == categories * 2
    everything = load_spec_bench(SPEC_BENCH, categories, limit=None)
    for category in categories:  # each category keeps its file order
        ours = [p.text for p in stratified if p.category == category]
        assert ours == [p.text for p in everything if p.category == category][:2]
    assert len(load_spec_bench(SPEC_BENCH, categories, limit=None, stratified=True)) == 80


def test_missing_file_names_the_path_and_the_source(tmp_path):
    missing = tmp_path / "question.jsonl"
    with pytest.raises(FileNotFoundError, match="Spec-Bench") as info:
        load_spec_bench(missing)
    assert str(missing) in str(info.value)


def test_jsonl_accepts_prompt_text_and_turns(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a", "prompt": "one"}\n\n{"text": "two"}\n{"turns": ["three", "x"]}\n')
    assert [p.text for p in load_jsonl(path)] == ["one", "two", "three"]
    path.write_text('{"other": 1}\n')
    with pytest.raises(ValueError, match="turns"):
        load_jsonl(path)
    path.write_text("{not json\n")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_jsonl(path)


def test_synthetic_prompts_are_deterministic_and_mixed():
    first, second = load_synthetic(4, seed=1), load_synthetic(4, seed=1)
    assert first == second and [p.category for p in first] == ["random", "repetitive"] * 2
    motif = first[1].token_ids
    assert motif[:4] == motif[4:8]
    assert encode(first[0], tokenizer=None).shape == (1, 16)


def test_text_prompt_needs_a_tokenizer():
    with pytest.raises(ValueError, match="no tokenizer"):
        encode(load_humaneval(1)[0], tokenizer=None)


@pytest.mark.parametrize("limit", [0, -1, 2.5])
def test_bad_limit(limit):
    with pytest.raises(ValueError, match="limit"):
        load_humaneval(limit)


def test_humaneval_splits_are_disjoint_and_cover_all():
    dev, test = load_humaneval(None, split="dev"), load_humaneval(None, split="test")
    assert [p.id for p in dev] == [f"HumanEval/{i}" for i in range(41)]  # the first quarter of 164
    assert [p.id for p in test] == [f"HumanEval/{i}" for i in range(41, 164)]
    assert [p.id for p in load_humaneval(3, split="test")] == ["HumanEval/41", "HumanEval/42", "HumanEval/43"]
    with pytest.raises(ValueError, match="split must be one of"):
        load_humaneval(3, split="train")


@needs_spec_bench
def test_spec_bench_splits_are_per_category():
    categories = list(MT_BENCH_CATEGORIES)
    dev = load_spec_bench(SPEC_BENCH, categories, None, stratified=True, split="dev")
    test = load_spec_bench(SPEC_BENCH, categories, None, stratified=True, split="test")
    assert len(dev) == 16 and len(test) == 64  # 2 + 8 of each category of 10
    assert [p.category for p in dev] == categories * 2
    assert not {p.id for p in dev} & {p.id for p in test}
    everything = load_spec_bench(SPEC_BENCH, categories, None)
    for category in categories:  # dev is the first two of each category in file order
        ids = [p.id for p in everything if p.category == category]
        assert [p.id for p in dev if p.category == category] == ids[:2]
    qa_dev = load_spec_bench(SPEC_BENCH, "qa", None, split="dev")
    qa_test = load_spec_bench(SPEC_BENCH, "qa", None, split="test")
    assert len(qa_dev) == 20 and len(qa_test) == 60
