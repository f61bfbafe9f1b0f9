"""Proposer update rules on hand-made windows, and the strategy grid against HF greedy."""

import itertools

import pytest
import torch

from lade import LookaheadDecoder
from lade.types import Verification
from pools import BucketedNGramPool, FIFOEviction, LFUEviction, LRUEviction, NoEviction, RandomEviction
from strategies import GaussSeidelProposer, JacobiProposer
from tests.conftest import hf_greedy, prompt

A, B, C, D, E, F, G, H, I, J, K, L = range(12)  # noqa: E741 - token names of the worked example


def logits_from(tokens: list[list[int]], vocab: int = 12) -> torch.Tensor:
    """Logits [L, W, V] whose argmax is ``tokens``."""
    out = torch.zeros(len(tokens), len(tokens[0]), vocab)
    for r, row in enumerate(tokens):
        for c, token in enumerate(row):
            out[r, c, token] = 1.0
    return out


def accepted(count: int) -> Verification:
    return Verification(tokens=[0] * count, candidate_index=-1 if count == 1 else 0, matched=count - 1)


@pytest.mark.parametrize("proposer_class", [JacobiProposer, GaussSeidelProposer])
def test_harvest_reads_columns_plus_the_new_token(proposer_class):
    proposer = proposer_class(window=3, ngram=3)
    proposer.start(torch.tensor([9, 9, K]))  # K: the last committed token, where every path starts
    proposer._levels = torch.tensor([[A, B, C], [D, E, F]])
    grams = proposer.update(logits_from([[G, H, I], [J, K, L]]), accepted(1))
    assert [gram[-3:] for gram in grams] == [(A, D, J), (B, E, K), (C, F, L)]
    assert [gram[:-3] for gram in grams] == [(K,), (K, A), (K, A, B)]  # left context along the path


def test_worked_example_jacobi_vs_gauss_seidel():
    outputs = logits_from([[G, H, I], [J, K, L]])
    for count, jacobi_levels, gs_levels in [
        (1, [[D, E, F], [J, K, L]], [[G, H, I], [J, K, L]]),
        (2, [[D, E, F], [J, K, L]], [[H, I, L], [K, L, L]]),
    ]:
        jacobi, gauss_seidel = JacobiProposer(3, 3), GaussSeidelProposer(3, 3)
        for proposer in (jacobi, gauss_seidel):
            proposer._levels = torch.tensor([[A, B, C], [D, E, F]])
            proposer.update(outputs, accepted(count))
        assert jacobi._levels.tolist() == jacobi_levels
        assert gauss_seidel._levels.tolist() == gs_levels


def test_warm_up_appends_a_level_without_harvesting():
    for proposer in (JacobiProposer(3, 4), GaussSeidelProposer(3, 4)):
        proposer._levels = torch.tensor([[A, B, C]])
        assert proposer.update(logits_from([[D, E, F]]), accepted(1)) == []
        assert proposer._levels.shape == (2, 3)
    gauss_seidel = GaussSeidelProposer(3, 4)
    gauss_seidel._levels = torch.tensor([[A, B, C]])
    gauss_seidel.update(logits_from([[D, E, F]]), accepted(1))
    assert gauss_seidel._levels.tolist() == [[D, E, F], [E, F, F]]


def test_seeded_window_initialisation_repeats():
    ids = torch.arange(20)
    first, second = JacobiProposer(5, 3, seed=4), JacobiProposer(5, 3, seed=4)
    first.start(ids)
    second.start(ids)
    assert torch.equal(first.lookahead_branch().levels, second.lookahead_branch().levels)
    assert set(first.lookahead_branch().levels.flatten().tolist()) <= set(range(20))


EVICTIONS = {
    "lru": LRUEviction,
    "fifo": FIFOEviction,
    "lfu": LFUEviction,
    "random": RandomEviction,
    "none": NoEviction,
}
STRATEGY_GRID = list(
    itertools.product((JacobiProposer, GaussSeidelProposer), sorted(EVICTIONS), (1, 2), (False, True))
)


@pytest.mark.parametrize("arch", ("llama", "gpt2", "gemma3"))
def test_every_strategy_combination_is_identical_to_greedy(tiny_models, arch):
    """proposer x eviction x key length x prompt seeding, on a repetitive and a random prompt."""
    model = tiny_models(arch, "sdpa")
    multi_token_steps = 0
    for kind, seed in (("repetitive", 11), ("random", 12)):
        ids = prompt(kind, seed, length=20)
        reference = hf_greedy(model, ids, 32)
        for proposer_class, eviction, key_length, seed_prompt in STRATEGY_GRID:
            pool = BucketedNGramPool(
                ngram=4,
                capacity=3,
                eviction=EVICTIONS[eviction](),
                key_length=key_length,
                seed_prompt=seed_prompt,
            )
            decoder = LookaheadDecoder(model, 4, 4, 3, proposer=proposer_class(4, 4), pool=pool)
            result = decoder.generate(ids, max_new_tokens=32, eos_token_id=[])
            assert torch.equal(result.sequences, reference), (
                kind,
                proposer_class.__name__,
                eviction,
                key_length,
            )
            multi_token_steps += sum(n > 1 for n in result.metrics.tokens_per_step)
    assert multi_token_steps > 0


@pytest.mark.parametrize("arch", ("llama", "qwen2"))
def test_prompt_lookup_and_output_seeding_and_persistence_are_identical_to_greedy(tiny_models, arch):
    from pools import PromptLookupPool
    from strategies import AutoregressiveProposer

    model = tiny_models(arch, "sdpa")
    ids = prompt("repetitive", 13, length=24)
    reference = hf_greedy(model, ids, 40)
    lookup = LookaheadDecoder(model, 1, 5, 2, proposer=AutoregressiveProposer(1, 5), pool=PromptLookupPool(5))
    assert torch.equal(lookup.generate(ids, 40, eos_token_id=[]).sequences, reference)
    pool = BucketedNGramPool(ngram=4, capacity=4, seed_output=True, persistent=True)
    decoder = LookaheadDecoder(model, 3, 4, 4, pool=pool)
    first = decoder.generate(ids, 40, eos_token_id=[])
    second = decoder.generate(ids, 40, eos_token_id=[])  # the pool remembers the first answer
    assert torch.equal(first.sequences, reference) and torch.equal(second.sequences, reference)
    assert second.metrics.steps < first.metrics.steps


def test_plain_proposer_with_no_candidates_feeds_one_token_per_step(tiny_models):
    from strategies import AutoregressiveProposer

    model = tiny_models("llama", "sdpa")
    ids = prompt("repetitive", 3)
    decoder = LookaheadDecoder(model, 1, 2, 0, proposer=AutoregressiveProposer(1, 2))
    result = decoder.generate(ids, 20, eos_token_id=[])
    assert torch.equal(result.sequences, hf_greedy(model, ids, 20)) and result.metrics.steps == 20
