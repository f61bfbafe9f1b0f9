"""Greedy verification: longest matching prefix plus the bonus token."""

import pytest
import torch

from lade.types import Candidates
from strategies import GreedyVerifier
from strategies.greedy import greedy_tokens

VOCAB = 10


def logits_for(next_tokens):
    """Logits [R, V] whose argmax in row r is next_tokens[r]."""
    logits = torch.zeros(len(next_tokens), VOCAB)
    logits[torch.arange(len(next_tokens)), torch.tensor(next_tokens)] = 5.0
    return logits


def test_full_match_commits_n_tokens_including_the_bonus():
    # model continues 3 -> 4 -> 5 -> 6; candidate [3, 4, 5] (N-1 = 3) matches fully
    candidates = Candidates(torch.tensor([[3, 4, 5]]))
    out = GreedyVerifier().verify(logits_for([3, 4, 5, 6]), candidates)
    assert out.tokens == [3, 4, 5, 6]
    assert out.matched == 3 and out.candidate_index == 0


def test_longest_prefix_wins_and_bonus_is_the_models_token():
    candidates = Candidates(torch.tensor([[3, 9, 9], [3, 4, 8], [7, 4, 5]]))
    # row 0: after the last token the model says 3; then per candidate token the model's next token
    next_tokens = [3] + [1, 1, 1] + [4, 5, 6] + [2, 2, 2]
    out = GreedyVerifier().verify(logits_for(next_tokens), candidates)
    assert out.candidate_index == 1 and out.matched == 2
    assert out.tokens == [3, 4, 5]  # two matches, then the model's 5 instead of the candidate's 8


def test_no_match_or_no_candidates_commits_one_token():
    verifier = GreedyVerifier()
    out = verifier.verify(logits_for([2, 0, 0]), Candidates(torch.tensor([[7, 7]])))
    assert out.tokens == [2] and out.candidate_index == -1 and out.matched == 0
    out = verifier.verify(logits_for([2]), Candidates(torch.zeros(0, 2, dtype=torch.long)))
    assert out.tokens == [2]


def test_ties_go_to_the_first_candidate():
    candidates = Candidates(torch.tensor([[3, 1], [3, 2]]))
    out = GreedyVerifier().verify(logits_for([3, 8, 8, 9, 9]), candidates)
    assert out.candidate_index == 0 and out.tokens == [3, 8]


def test_padding_is_never_accepted():
    """A candidate's padding (past ``lengths``) is no draft, even where the model predicts it."""
    logits = logits_for([3, 3, 3, 3])  # the model continues 3, 3, 3, ...
    out = GreedyVerifier().verify(logits, Candidates(torch.tensor([[3, 3, 3]]), lengths=(1,)))
    assert out.tokens == [3, 3] and out.matched == 1  # its one own token and the bonus
    two = Candidates(torch.tensor([[3, 3, 3], [3, 3, 3]]), lengths=(1, 2))
    out = GreedyVerifier().verify(logits_for([3] * 7), two)
    assert out.tokens == [3, 3, 3] and out.candidate_index == 1


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_greedy_tokens_take_the_first_maximum_in_any_dtype(dtype):
    """Reduced-precision logits are upcast before the argmax (as HF's greedy does): ties at the
    maximum, common in bfloat16, still go to the first index, as a plain argmax gives them."""
    logits = torch.tensor([[0.5, 2.0, 2.0, -1.0], [3.0, 1.0, 3.0, 3.0], [0.0, 0.0, 0.0, 0.0]], dtype=dtype)
    assert greedy_tokens(logits).tolist() == [1, 0, 0] == logits.argmax(dim=-1).tolist()
    noisy = torch.randn(64, 49152).to(dtype)
    assert torch.equal(greedy_tokens(noisy), noisy.argmax(dim=-1))
    # many ties spread over a long row (SIMD lanes, threads), rows of -inf, a NaN: argmax's index
    generator = torch.Generator().manual_seed(0)
    for vocab in (50, 49152, 151936):
        tied = torch.randint(-3, 4, (12, vocab), generator=generator).to(dtype)
        tied[1] = float("-inf")
        tied[2, vocab // 2] = float("nan")
        tied[3, ::7] = float("-inf")
        assert torch.equal(greedy_tokens(tied), tied.argmax(dim=-1))
        assert torch.equal(greedy_tokens(tied[:, None]), tied[:, None].argmax(dim=-1))  # [..., V]
