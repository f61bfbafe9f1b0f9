"""Bad input gets a clear ValueError naming the parameter."""

import pytest
import torch

from lade import LookaheadDecoder


@pytest.fixture
def model(tiny_models):
    return tiny_models("llama", "sdpa")


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"window": 0}, "window"),
        ({"ngram": 1}, "ngram"),
        ({"guess": -1}, "guess"),
        ({"window": 2.5}, "window"),
        ({"ngram": "five"}, "ngram"),
    ],
)
def test_bad_wng(model, kwargs, name):
    with pytest.raises(ValueError, match=name):
        LookaheadDecoder(model, **kwargs)


@pytest.mark.parametrize(
    ("input_ids", "match"),
    [
        (torch.zeros(1, 0, dtype=torch.long), "empty"),
        (torch.zeros(1, 3), "integer"),
        ([[1, 2, 3]], "LongTensor"),
        (torch.zeros(1, 1, 3, dtype=torch.long), "shape"),
        (torch.tensor([[1, 500]]), "vocabulary"),
    ],
)
def test_bad_input_ids(model, input_ids, match):
    with pytest.raises(ValueError, match=match):
        LookaheadDecoder(model).generate(input_ids, max_new_tokens=4)


def test_bad_max_new_tokens_and_context(model):
    decoder = LookaheadDecoder(model)
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="max_new_tokens"):
        decoder.generate(ids, max_new_tokens=-1)
    with pytest.raises(ValueError, match="context length"):
        decoder.generate(ids, max_new_tokens=model.config.max_position_embeddings)


def test_eos_outside_vocabulary(model):
    with pytest.raises(ValueError, match="eos_token_id"):
        LookaheadDecoder(model).generate(torch.tensor([[1, 2]]), max_new_tokens=3, eos_token_id=[5, 10_000])


def test_zero_new_tokens_returns_the_prompt(model):
    ids = torch.tensor([[4, 5, 6]])
    result = LookaheadDecoder(model).generate(ids, max_new_tokens=0)
    assert torch.equal(result.sequences, ids)
    assert result.metrics.steps == 0 and result.metrics.new_tokens == 0


def test_one_dimensional_prompt_is_accepted(model):
    result = LookaheadDecoder(model, window=2, ngram=3, guess=2).generate(
        torch.tensor([4, 5, 6]), 5, eos_token_id=[]
    )
    assert result.sequences.shape == (1, 8)


def test_unsupported_layer_types_are_refused_before_generating(model):
    import copy

    config = copy.deepcopy(model.config)
    config.layer_types = ["linear_attention"] * config.num_hidden_layers

    class Stub:
        pass

    stub = Stub()
    stub.config = config
    with pytest.raises(ValueError, match="layer types"):
        LookaheadDecoder(stub)
