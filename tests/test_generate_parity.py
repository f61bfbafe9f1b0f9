"""HF ``generate`` parity: a call means what it means in ``model.generate`` (the model's generation config,
stopping rules, scores, the global RNG, ``custom_generate``), on tiny random models."""

import copy
import math

import pytest
import torch
from tokenizers import Regex, Tokenizer, decoders, pre_tokenizers
from tokenizers.models import WordLevel
from transformers import GenerationConfig, PreTrainedTokenizerFast, StoppingCriteria, StoppingCriteriaList

import lade
from lade import LookaheadDecoder
from tests.conftest import VOCAB, prompt

NEW = 32
CONFIGS = [(5, 3, 5), (4, 5, 4), ("auto", "auto", "auto")]
FLAT = lade.calibration.LatencyModel((1, 1024), (1.0, 1.05))  # auto verifies candidates on this curve


def decoder(model, config, **kwargs):
    window, ngram, guess = config
    return LookaheadDecoder(model, window, ngram, guess, latency=FLAT, **kwargs)


@pytest.fixture
def llama(tiny_models):
    """A private copy of the tiny Llama whose generation config a test may change."""
    model = copy.copy(tiny_models("llama", "sdpa"))
    model.generation_config = copy.deepcopy(model.generation_config)
    return model


def char_tokenizer() -> PreTrainedTokenizerFast:
    """A tokenizer of the tiny models' vocabulary: each token is one character (``!`` to ``~``, then
    Latin letters), text splits into characters and tokens join without spaces."""
    chars = [chr(0x21 + i) if i < 94 else chr(0x100 + i) for i in range(VOCAB)]
    tokenizer = Tokenizer(WordLevel({c: i for i, c in enumerate(chars)}, unk_token="!"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer)


# ---------------------------------------------------------------- the model's generation config


@pytest.mark.parametrize("config", CONFIGS)
def test_the_models_generation_config_applies_as_in_generate(llama, config):
    llama.generation_config.repetition_penalty = 1.3
    llama.generation_config.no_repeat_ngram_size = 3
    llama.generation_config.max_new_tokens = 24
    for seed in (1, 2):
        ids = prompt("repetitive", seed)
        reference = llama.generate(ids)  # every setting from the generation config
        assert reference.shape[1] == ids.shape[1] + 24
        assert torch.equal(decoder(llama, config).generate(ids).sequences, reference)


def test_a_passed_generation_config_and_its_lengths_apply(llama):
    ids = prompt("random", 3)
    config = GenerationConfig(max_new_tokens=9, repetition_penalty=1.2, do_sample=False)
    reference = llama.generate(ids, generation_config=config)
    result = decoder(llama, (5, 3, 5)).generate(ids, generation_config=config)
    assert result.sequences.shape[1] == ids.shape[1] + 9
    assert torch.equal(result.sequences, reference)
    reference = llama.generate(ids, max_length=ids.shape[1] + 5, do_sample=False)
    assert torch.equal(
        decoder(llama, (5, 3, 5)).generate(ids, max_length=ids.shape[1] + 5).sequences, reference
    )


@pytest.mark.parametrize(
    "options",
    [
        {"no_repeat_ngram_size": 2},
        {"bad_words_ids": [[5], [7, 8]], "suppress_tokens": [9, 10]},
        {"sequence_bias": {(11,): 4.0, (12, 13): -3.0}},
        {"exponential_decay_length_penalty": (4, 1.5), "eos_token_id": [3, 17]},
        {"min_new_tokens": 20, "eos_token_id": [3, 17, 30]},
        {"remove_invalid_values": True, "renormalize_logits": True},
    ],
)
def test_processor_options_equal_generate(llama, options):
    for seed in (4, 5):
        ids = prompt("repetitive", seed)
        kwargs = {"max_new_tokens": NEW, "do_sample": False, **options}
        reference = llama.generate(ids, **kwargs)
        for config in CONFIGS[:2]:
            assert torch.equal(decoder(llama, config).generate(ids, **kwargs).sequences, reference), config


def test_min_new_tokens_holds_back_eos_inside_accepted_blocks(llama):
    """The EOS ids are tokens the unconstrained output produces early; min_new_tokens suppresses them."""
    ids = prompt("repetitive", 6)
    free = decoder(llama, (5, 4, 5)).generate(ids, NEW, eos_token_id=[]).sequences[0, ids.shape[1] :].tolist()
    eos = free[2:4]
    reference = llama.generate(ids, max_new_tokens=NEW, min_new_tokens=12, eos_token_id=eos, do_sample=False)
    result = decoder(llama, (5, 4, 5)).generate(ids, NEW, eos_token_id=eos, min_new_tokens=12)
    assert torch.equal(result.sequences, reference)
    assert result.sequences.shape[1] - ids.shape[1] >= 12


def test_explicit_do_sample_wins_over_the_decoders_sampling_verifier(llama):
    from strategies import SamplingVerifier

    ids = prompt("random", 7)
    sampler = decoder(llama, (5, 3, 5), verifier=SamplingVerifier(temperature=0.7))
    reference = llama.generate(ids, max_new_tokens=NEW, do_sample=False)
    assert torch.equal(sampler.generate(ids, NEW, do_sample=False).sequences, reference)
    torch.manual_seed(0)
    sampled = sampler.generate(ids, NEW).sequences  # the verifier's mode when the call says nothing
    assert not torch.equal(sampled, reference)


def test_a_sampling_generation_config_samples_like_generate(llama):
    """Qwen-style generation configs ship do_sample=True: a default decoder then samples, from the
    global RNG (same seed, same tokens; different seeds, different tokens)."""
    llama.generation_config.do_sample = True
    llama.generation_config.temperature = 0.8
    ids = prompt("random", 8)
    runs = []
    for seed in (0, 0, 1):
        torch.manual_seed(seed)
        runs.append(decoder(llama, (5, 3, 5)).generate(ids, NEW).sequences)
    assert torch.equal(runs[0], runs[1]) and not torch.equal(runs[0], runs[2])
    assert not torch.equal(runs[0], decoder(llama, (5, 3, 5)).generate(ids, NEW).sequences)  # unseeded


def test_sampling_without_a_generator_follows_hfs_default_top_k(llama):
    """Plain do_sample=True: generate applies its global default top_k=50 and the model's generation
    config (here a temperature and a top_p). The first sampled token, drawn from the global RNG, must
    follow exactly that distribution (chi-square over 2,000 draws)."""
    from scipy.stats import chisquare

    ids = prompt("random", 9)
    llama.generation_config.temperature = 2.0  # flatter: the top-k cut matters
    llama.generation_config.top_p = 0.995
    config, _ = llama._prepare_generation_config(None, do_sample=True)
    processors = llama._get_logits_processor(config, ids.shape[1])
    with torch.no_grad():
        probs = torch.softmax(processors(ids, llama(ids).logits[:, -1].float()).double(), -1)[0]
    assert 30 < int((probs > 0).sum()) < 50  # both cuts bite
    sampler = decoder(llama, (3, 3, 3))
    torch.manual_seed(123)
    counts = torch.zeros(VOCAB)
    for _ in range(2000):
        counts[int(sampler.generate(ids, 1, do_sample=True).sequences[0, -1])] += 1
    assert int(counts[probs == 0].sum()) == 0
    frequent, rare = probs * 2000 >= 5, (probs > 0) & (probs * 2000 < 5)  # rare cells pooled
    observed, expected = counts[frequent].tolist(), (probs[frequent] * 2000).tolist()
    if bool(rare.any()):
        observed.append(float(counts[rare].sum()))
        expected.append(float(probs[rare].sum() * 2000))
    assert chisquare(observed, expected).pvalue > 1e-3


# ---------------------------------------------------------------- stopping


class StopAfter(StoppingCriteria):
    """Stops a row once it ends with ``pattern`` (a user criterion, as generate accepts them)."""

    def __init__(self, pattern):
        self.pattern = torch.tensor(pattern)

    def __call__(self, input_ids, scores, **kwargs):
        tail = input_ids[:, -len(self.pattern) :]
        return (tail == self.pattern.to(tail.device)).all(dim=1)


def _inner_pair(model, ids, config):
    """Two consecutive tokens that one step committed together, inside the unconstrained output."""
    result = decoder(model, config).generate(ids, NEW, eos_token_id=[])
    new, start = result.sequences[0, ids.shape[1] :].tolist(), 0
    for count in result.metrics.tokens_per_step:
        if count >= 3:
            return new[start : start + 2], start + 2
        start += count
    return None


@pytest.mark.parametrize("kind", ["stop_strings", "stopping_criteria"])
def test_a_stop_inside_an_accepted_block_cuts_exactly_there(llama, kind):
    tokenizer = char_tokenizer()
    for seed in range(30):
        ids = prompt("repetitive", seed)
        found = _inner_pair(llama, ids, (5, 5, 5))
        if found is None:
            continue
        pair, end = found
        if kind == "stop_strings":
            options = {"stop_strings": tokenizer.decode(pair), "tokenizer": tokenizer}
        else:
            options = {"stopping_criteria": StoppingCriteriaList([StopAfter(pair)])}
        reference = llama.generate(ids, max_new_tokens=NEW, do_sample=False, **options)
        result = decoder(llama, (5, 5, 5)).generate(ids, NEW, **options)
        assert torch.equal(result.sequences, reference)
        assert result.sequences.shape[1] <= ids.shape[1] + end
        return
    pytest.fail("no prompt gave a step of 3 or more tokens")


def test_stopping_rows_of_a_batch_end_where_generate_ends_them(llama):
    ids = torch.stack([prompt("repetitive", 11)[0], prompt("random", 12)[0], prompt("repetitive", 13)[0]])
    mask = torch.ones_like(ids)
    options = {"stopping_criteria": StoppingCriteriaList([StopAfter([ids[0, -2], ids[0, -1]])])}
    reference = llama.generate(
        ids, attention_mask=mask, max_new_tokens=NEW, do_sample=False, pad_token_id=0, **options
    )
    result = decoder(llama, (5, 4, 5)).generate(ids, NEW, attention_mask=mask, pad_token_id=0, **options)
    assert torch.equal(result.sequences, reference)


def test_max_time_stops_the_call(llama):
    result = decoder(llama, (5, 3, 5)).generate(prompt("random", 1), 400, max_time=0.0)
    assert result.metrics.new_tokens == 1  # checked after the first committed token, as in generate


# ---------------------------------------------------------------- scores and logits


@pytest.mark.parametrize("sample", [False, True])
def test_scores_and_logits_match_generates(llama, sample):
    ids = prompt("repetitive", 14)
    options = {"max_new_tokens": 20, "repetition_penalty": 1.2, "return_dict_in_generate": True}
    options |= {"output_scores": True, "output_logits": True, "do_sample": sample}
    torch.manual_seed(11)
    reference = llama.generate(ids, **options)
    torch.manual_seed(11)
    result = decoder(llama, (5, 4, 5)).generate(ids, **options)
    if sample:  # the same distributions at the positions both sampled alike
        same = int((result.sequences[0] == reference.sequences[0]).cumprod(0).sum()) - ids.shape[1]
    else:
        assert torch.equal(result.sequences, reference.sequences)
        same = 20
    assert len(result.scores) == len(result.logits) == result.sequences.shape[1] - ids.shape[1]
    assert max(result.metrics.tokens_per_step) > 1
    for mine, theirs in [(result.scores, reference.scores), (result.logits, reference.logits)]:
        for step in range(max(same, 1)):
            finite = torch.isfinite(theirs[step])
            assert torch.equal(finite, torch.isfinite(mine[step]))
            assert torch.allclose(mine[step][finite], theirs[step][finite], atol=1e-3)
    transition = llama.compute_transition_scores(result.sequences, result.scores, normalize_logits=True)
    assert transition.shape == (1, len(result.scores)) and bool((transition <= 0).all())


def test_batch_scores_are_one_row_per_sequence(llama):
    ids = torch.tensor([[0, 0, 5, 6, 7], [1, 2, 3, 4, 5]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    options = {
        "max_new_tokens": 12,
        "return_dict_in_generate": True,
        "output_scores": True,
        "do_sample": False,
    }
    reference = llama.generate(ids, attention_mask=mask, pad_token_id=0, **options)
    result = decoder(llama, (4, 3, 4)).generate(ids, attention_mask=mask, pad_token_id=0, **options)
    assert torch.equal(result.sequences, reference.sequences)
    assert len(result.scores) == 12 and result.scores[0].shape == (2, VOCAB)
    assert all(torch.allclose(a, b, atol=1e-3) for a, b in zip(result.scores, reference.scores, strict=True))


# ---------------------------------------------------------------- padding, as generate infers it


def test_mask_inferred_from_the_pad_token_as_generate_does(llama):
    ids = torch.tensor([[9, 9, 9, 4, 5, 6, 4, 5, 6, 4, 5]])  # 9 is the pad token here
    reference = llama.generate(ids, max_new_tokens=NEW, do_sample=False, pad_token_id=9)
    result = decoder(llama, (5, 3, 5)).generate(ids, NEW, pad_token_id=9)
    assert torch.equal(result.sequences, reference)
    holed = torch.tensor([[4, 5, 9, 6, 4, 5, 6, 4, 5, 6, 4, 5], [7, 7, 7, 7, 7, 9, 9, 8, 1, 2, 8, 1]])
    reference = llama.generate(holed, max_new_tokens=NEW, do_sample=False, pad_token_id=9)
    assert torch.equal(decoder(llama, (5, 3, 5)).generate(holed, NEW, pad_token_id=9).sequences, reference)


def test_holes_in_the_mask_of_a_sliding_window_model_are_refused(tiny_models):
    ids = torch.tensor([[4, 5, 9, 6, 4, 5]])
    with pytest.raises(ValueError, match="sliding-window"):
        LookaheadDecoder(tiny_models("mistral", "sdpa"), 3, 3, 3).generate(ids, 4, pad_token_id=9)


def test_batched_repetition_penalty_ignores_each_rows_own_padding(llama):
    ids = torch.tensor([[0, 0, 0, 5, 6, 5, 6], [1, 2, 3, 1, 2, 3, 1], [0, 4, 4, 8, 4, 4, 8]])
    mask = (torch.arange(7)[None] >= torch.tensor([[3], [0], [1]])).long()
    options = {"max_new_tokens": NEW, "do_sample": False, "repetition_penalty": 1.5, "pad_token_id": 0}
    reference = llama.generate(ids, attention_mask=mask, **options)
    for config in CONFIGS:
        result = decoder(llama, config).generate(ids, attention_mask=mask, **options)
        assert torch.equal(result.sequences, reference), config


def test_num_return_sequences_repeats_rows_as_generate(llama):
    ids = prompt("random", 15)
    torch.manual_seed(3)
    result = decoder(llama, (4, 3, 4)).generate(ids, 10, do_sample=True, num_return_sequences=3)
    assert result.sequences.shape == (3, ids.shape[1] + 10)
    assert len({tuple(row.tolist()) for row in result.sequences}) > 1


# ---------------------------------------------------------------- custom_generate


@pytest.mark.parametrize("batched", [False, True])
def test_custom_generate_callable_and_folder_equal_greedy(llama, batched):
    if batched:
        ids = torch.tensor([[0, 0, 0, 5, 6, 5, 6, 5], [1, 2, 3, 1, 2, 3, 1, 2]])
        extra = {"attention_mask": (ids != 0).long() | (torch.arange(8) >= 3).long()[None], "pad_token_id": 0}
    else:
        ids, extra = prompt("repetitive", 16), {}
    reference = llama.generate(ids, max_new_tokens=NEW, do_sample=False, **extra)
    out = llama.generate(
        ids,
        max_new_tokens=NEW,
        do_sample=False,
        custom_generate=lade.custom_generate,
        window=5,
        ngram=4,
        guess=5,
        **extra,
    )
    assert torch.equal(out, reference)
    out = llama.generate(
        ids,
        max_new_tokens=NEW,
        do_sample=False,
        custom_generate="hub/lade-lookahead",
        trust_remote_code=True,
        window=5,
        ngram=4,
        guess=5,
        **extra,
    )
    assert torch.equal(out, reference)
    assert torch.equal(lade.generate(llama, ids, max_new_tokens=NEW, do_sample=False, **extra), reference)


def test_custom_generate_returns_generates_output_type_with_metrics(llama):
    ids = prompt("repetitive", 17)
    out = llama.generate(
        ids,
        max_new_tokens=NEW,
        do_sample=False,
        custom_generate=lade.custom_generate,
        decoder=decoder(llama, (5, 4, 5)),
        return_dict_in_generate=True,
        output_scores=True,
    )
    assert isinstance(out, lade.GenerationResult) and len(out.scores) == NEW
    assert out.metrics.new_tokens == NEW and out.metrics.steps < NEW


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"num_beams": 3}, "beam"),
        ({"prompt_lookup_num_tokens": 3}, "assisted"),
        ({"penalty_alpha": 0.6, "top_k": 4}, "contrastive"),
        ({"guidance_scale": 2.0}, "guidance_scale"),
        ({"output_attentions": True, "return_dict_in_generate": True}, "output_attentions"),
        ({"output_hidden_states": True, "return_dict_in_generate": True}, "output_hidden_states"),
        ({"token_healing": True}, "token_healing"),
        ({"cache_implementation": "quantized"}, "quantized"),
        ({"inputs_embeds": torch.zeros(1, 3, 64)}, "inputs_embeds"),
        ({"max_new_tokn": 3}, "max_new_tokn"),  # a typo, reported as generate reports it
        ({"synced_gpus": True}, "synced_gpus"),
    ],
)
def test_what_cannot_be_reproduced_is_refused_by_name(llama, options, match):
    with pytest.raises(ValueError, match=match):
        decoder(llama, (3, 3, 3)).generate(prompt("random", 1), 4, **options)


def test_outputs_are_usable_by_autograd(llama):
    result = decoder(llama, (4, 3, 4)).generate(
        prompt("random", 2), 8, output_scores=True, return_dict_in_generate=True
    )
    assert not result.sequences.is_inference() and not result.scores[0].is_inference()
    loss = llama(result.sequences, labels=result.sequences).loss
    loss.backward()
    assert math.isfinite(float(loss)) and llama.model.embed_tokens.weight.grad is not None
    llama.zero_grad()
