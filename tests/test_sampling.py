"""Lossless sampling: the committed tokens are distributed exactly as the model's own sampling."""

import itertools
import math

import pytest
import torch
from scipy.stats import chisquare
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

from lade import LookaheadDecoder
from lade.calibration import LatencyModel
from lade.types import Candidates
from pools import BucketedNGramPool, CombinedPool, SuffixTreePool, TokenRecyclingPool
from strategies import SamplingVerifier

# ---------------------------------------------------------------- the acceptance rule on hand-made rows

V = 4
CANDIDATES = torch.tensor([[1, 2], [1, 3], [2, 0]])  # G' = 3 candidates of N-1 = 2 tokens
# rows: 0 after the last token; 1 + 2i + j after token j of candidate i
ROWS = {
    0: [0.1, 0.5, 0.3, 0.1],
    1: [0.2, 0.1, 0.4, 0.3],  # after "1" (candidate 0, token 0)
    2: [0.25, 0.25, 0.25, 0.25],  # after "1 2"
    3: [0.2, 0.1, 0.4, 0.3],  # after "1" (candidate 1, token 0): same context as row 1
    4: [0.7, 0.1, 0.1, 0.1],  # after "1 3"
    5: [0.6, 0.2, 0.1, 0.1],  # after "2" (candidate 2, token 0)
    6: [0.1, 0.2, 0.3, 0.4],  # after "2 0"
}


def exact_sequences() -> dict[tuple[int, ...], float]:
    """The model's sampling distribution over what one verification step can commit."""
    p = {row: torch.tensor(probs, dtype=torch.float64) for row, probs in ROWS.items()}
    out = {}
    for x in range(V):
        if x == 1:
            for y in range(V):
                if y in (2, 3):
                    row = 2 if y == 2 else 4
                    for z in range(V):
                        out[(1, y, z)] = float(p[0][1] * p[1][y] * p[row][z])
                else:
                    out[(1, y)] = float(p[0][1] * p[1][y])
        elif x == 2:
            for y in range(V):
                if y == 0:
                    for z in range(V):
                        out[(2, 0, z)] = float(p[0][2] * p[5][0] * p[6][z])
                else:
                    out[(2, y)] = float(p[0][2] * p[5][y])
        else:
            out[(x,)] = float(p[0][x])
    return out


def run_rule(verifier_class, draws: int = 20_000) -> dict[tuple[int, ...], int]:
    logits = torch.log(torch.tensor([ROWS[r] for r in range(7)]))
    verifier = verifier_class(temperature=1.0, generator=torch.Generator().manual_seed(1234))
    counts: dict[tuple[int, ...], int] = {}
    for _ in range(draws):
        out = tuple(verifier.verify(logits, Candidates(CANDIDATES)).tokens)
        counts[out] = counts.get(out, 0) + 1
    return counts


def chi_square_p(counts: dict, expected: dict) -> float:
    assert set(counts) <= set(expected), set(counts) - set(expected)
    total = sum(counts.values())
    cells = sorted(expected, key=str)
    observed = [counts.get(c, 0) for c in cells]
    wanted = [expected[c] * total for c in cells]
    return chisquare(observed, wanted).pvalue


def test_acceptance_rule_matches_the_exact_distribution():
    expected = exact_sequences()
    assert math.isclose(sum(expected.values()), 1.0)
    assert chi_square_p(run_rule(SamplingVerifier), expected) > 1e-3


class SlightlyBiased(SamplingVerifier):
    """A wrong rule that accepts drafts 3% too often: about +1.5 percentage points on the most
    likely draft (p = 0.5 -> 0.515). The test above must be able to reject it."""

    def _uniform(self) -> float:
        return super()._uniform() * 0.97


def test_the_distribution_test_detects_a_small_bias():
    assert chi_square_p(run_rule(SlightlyBiased), exact_sequences()) < 1e-4


def test_sampling_never_accepts_padding():
    """Past a candidate's own tokens (``lengths``) its row is padding: no draft, even when it is the
    model's all but certain token; the bonus is sampled after the last own token."""
    logits = torch.full((4, 5), -30.0)
    logits[:, 2] = 30.0  # token 2 everywhere, with probability ~1
    verifier = SamplingVerifier(temperature=1.0, generator=torch.Generator().manual_seed(0))
    out = verifier.verify(logits, Candidates(torch.tensor([[2, 2, 2]]), rows=((1, 2, 3),), lengths=(2,)))
    assert out.tokens == [2, 2, 2] and out.matched == 2 and out.candidate_index == 0


# ---------------------------------------------------------------- end to end on a tiny model

SMALL_VOCAB = 12


@pytest.fixture(scope="module")
def small_model():
    config = LlamaConfig(
        vocab_size=SMALL_VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        initializer_range=0.15,
        pad_token_id=0,
        bos_token_id=None,
        eos_token_id=None,  # Llama's default eos (2) would stop HF's reference runs early
    )
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return LlamaForCausalLM(config).eval()


def exact_first_tokens(model, prompt: torch.Tensor, settings: dict, length: int = 3) -> dict[tuple, float]:
    """Probability of every sequence of the first ``length`` sampled tokens, with HF's own processors."""
    processors = model._get_logits_processor(GenerationConfig(do_sample=True, **settings), prompt.shape[1])
    probs = {(): 1.0}
    for _ in range(length):
        prefixes = list(probs)
        ids = torch.cat(
            [
                prompt.repeat(len(prefixes), 1),
                torch.tensor(prefixes, dtype=torch.long).view(len(prefixes), -1),
            ],
            1,
        )
        with torch.no_grad():
            scores = processors(ids, model(ids).logits[:, -1].float())
        step = torch.softmax(scores.double(), dim=-1)
        probs = {
            p + (t,): probs[p] * float(step[i, t]) for i, p in enumerate(prefixes) for t in range(SMALL_VOCAB)
        }
    return probs


SETTINGS = [
    ({"temperature": 1.0}, (5, 4, 5), "bucketed"),
    ({"temperature": 0.7}, ("auto", 4, "auto"), "bucketed"),  # planner on a flat latency curve
    ({"temperature": 0.7}, ("auto", 4, "auto"), "combined"),  # the planner choosing among sources
    ({"temperature": 0.7, "top_p": 0.9}, (3, 3, 3), "bucketed"),
    ({"top_k": 5, "repetition_penalty": 1.3}, (4, 4, 2), "bucketed"),
]


@pytest.mark.parametrize(("settings", "wng", "pool_kind"), SETTINGS)
def test_lookahead_sampling_matches_plain_sampling(small_model, settings, wng, pool_kind):
    prompt = torch.tensor([[3, 7, 5, 3, 7, 5, 3, 7, 5, 3, 7]])
    expected = exact_first_tokens(small_model, prompt, settings)
    window, ngram, guess = wng
    capacity = 5 if guess == "auto" else guess
    pool = BucketedNGramPool(ngram, capacity=capacity, seed_prompt=True, seed_output=True, persistent=True)
    if pool_kind == "combined":  # every source kept across the calls, as the n-gram pool is
        suffix = SuffixTreePool(ngram, persistent=True)
        pool = CombinedPool({"ngrams": pool, "suffix_tree": suffix, "recycled": TokenRecyclingPool(ngram)})
    flat = LatencyModel((1, 128), (1.0, 1.01))
    # many short calls: an auto planner needs the records of earlier calls to trust candidates
    decoder = LookaheadDecoder(
        small_model, window, ngram, guess, pool=pool, latency=flat, learn_across_calls=True
    )
    generator = torch.Generator().manual_seed(99)
    counts, multi = {}, 0
    for _ in range(1500):
        result = decoder.generate(
            prompt, max_new_tokens=3, eos_token_id=[], do_sample=True, generator=generator, **settings
        )
        key = tuple(result.sequences[0, prompt.shape[1] :].tolist())
        counts[key] = counts.get(key, 0) + 1
        multi += any(n > 1 for n in result.metrics.tokens_per_step)
    # candidates were accepted often: the test exercises the speculative path (the first of the three
    # tokens comes from the prefill's logits, so two are left to speculate on)
    assert multi > 20
    assert pooled_chi_square_p(counts, expected) > 1e-3


def pooled_chi_square_p(counts: dict, expected: dict) -> float:
    """Chi-square p-value of observed sequence counts against exact probabilities, the rare cells
    pooled so every expected count is >= 5."""
    total = sum(counts.values())
    frequent = {k for k, v in expected.items() if v * total >= 5}
    observed = {k: v for k, v in counts.items() if k in frequent}
    observed["rest"] = total - sum(observed.values())
    wanted = {k: expected[k] for k in frequent} | {"rest": 1.0 - sum(expected[k] for k in frequent)}
    return chi_square_p(observed, wanted)


@pytest.mark.parametrize("shared_pool", (False, True))
def test_batched_sampling_rows_match_plain_sampling(small_model, shared_pool):
    """Each row of a left-padded batch samples exactly from its own prompt's distribution."""
    prompts = [[3, 7, 5, 3, 7, 5, 3, 7, 5, 3, 7], [4, 9, 4, 9, 4]]
    width = max(map(len, prompts))
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    settings = {"temperature": 0.8}
    expected = [exact_first_tokens(small_model, torch.tensor([p]), settings) for p in prompts]
    pool = BucketedNGramPool(4, capacity=4, seed_prompt=True, seed_output=True)
    decoder = LookaheadDecoder(small_model, 4, 4, 4, pool=pool, shared_pool=shared_pool)
    generator = torch.Generator().manual_seed(7)
    counts, multi = [{}, {}], 0
    for _ in range(1000):
        result = decoder.generate(
            ids,
            max_new_tokens=3,
            attention_mask=mask,
            eos_token_id=[],
            do_sample=True,
            generator=generator,
            **settings,
        )
        for b in range(2):
            key = tuple(result.sequences[b, width:].tolist())
            counts[b][key] = counts[b].get(key, 0) + 1
        multi += sum(n > 1 for n in result.metrics.tokens_per_step)
    assert multi > 5  # steps that accepted a candidate: the speculative path ran in the batch
    for b in range(2):
        assert pooled_chi_square_p(counts[b], expected[b]) > 1e-3, b


def test_seeded_sampling_runs_repeat_exactly(small_model):
    prompt = torch.tensor([[3, 7, 5, 3, 7, 5]])
    runs = [
        LookaheadDecoder(small_model, 3, 3, 3).generate(
            prompt,
            20,
            eos_token_id=[],
            do_sample=True,
            temperature=0.8,
            generator=torch.Generator().manual_seed(5),
        )
        for _ in range(2)
    ]
    assert torch.equal(runs[0].sequences, runs[1].sequences)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"temperature": 0.0}, "temperature"),
        ({"temperature": -1.0}, "temperature"),
        ({"top_k": -1}, "top_k"),
        ({"min_p": 2.0}, "min_p"),
        ({"repetition_penalty": 0.0}, "penalty"),  # HF's own checks and messages
        ({"generation_config": GenerationConfig(num_beams=4)}, "num_beams"),
        ({"generation_config": GenerationConfig(guidance_scale=1.5)}, "guidance_scale"),
    ],
)
def test_bad_sampling_options(small_model, kwargs, match):
    with pytest.raises(ValueError, match=match):
        LookaheadDecoder(small_model, 2, 3, 2).generate(
            torch.tensor([[1, 2, 3]]), 4, do_sample=True, **kwargs
        )


def test_greedy_with_repetition_penalty_equals_hf(small_model):
    for prompt in ([[3, 7, 5, 3, 7, 5, 3]], [[1, 2, 1, 2, 1, 2]]):
        ids = torch.tensor(prompt)
        reference = small_model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=24,
            repetition_penalty=1.4,
        )
        for window, ngram, guess in itertools.product((2, 4), (3, 4), (0, 3)):
            pool = BucketedNGramPool(ngram, capacity=max(guess, 1), seed_prompt=True)
            result = LookaheadDecoder(small_model, window, ngram, guess, pool=pool).generate(
                ids, 24, eos_token_id=[], repetition_penalty=1.4
            )
            assert torch.equal(result.sequences, reference), (prompt, window, ngram, guess)
