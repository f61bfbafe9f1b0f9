"""The heart of the suite: lookahead output equals ``model.generate(do_sample=False)`` token for token."""

import itertools

import pytest
import torch

from lade import LookaheadDecoder
from lade.types import STEP_STAGES
from pools import BucketedNGramPool
from tests.conftest import ARCHITECTURES, ATTENTION, hf_greedy, prompt

GRID = list(itertools.product((1, 2, 5), (2, 3, 5), (0, 1, 5)))  # (W, N, G)
NEW_TOKENS = 40


@pytest.mark.parametrize("attn", ATTENTION)
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_greedy_equivalence_over_the_wng_grid(tiny_models, arch, attn):
    model = tiny_models(arch, attn)
    multi_token_steps = 0
    for kind, seed in (("random", 1), ("repetitive", 2)):
        ids = prompt(kind, seed)
        reference = hf_greedy(model, ids, NEW_TOKENS)
        for window, ngram, guess in GRID:
            result = LookaheadDecoder(model, window=window, ngram=ngram, guess=guess).generate(
                ids, max_new_tokens=NEW_TOKENS, eos_token_id=[]
            )
            assert torch.equal(result.sequences, reference), (kind, window, ngram, guess)
            assert result.metrics.new_tokens == NEW_TOKENS
            assert max(result.metrics.tokens_per_step) <= ngram
            if guess == 0:
                assert result.metrics.steps == NEW_TOKENS
            multi_token_steps += sum(n > 1 for n in result.metrics.tokens_per_step)
    # the grid must exercise acceptance of several tokens per step, or it proves little
    assert multi_token_steps > 0


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_pool_span_mixes_candidate_lengths_exactly(tiny_models, arch):
    """A pool whose text n-grams are longer than the branch's (``span``): each step verifies
    candidates of both lengths, the shorter padded; output still HF greedy's. A second call with the
    pool kept (``persistent``) holds the model's own continuation: steps then accept long copies."""
    model = tiny_models(arch, "sdpa")
    for kind, seed in (("random", 1), ("repetitive", 2)):
        ids = prompt(kind, seed, length=24)
        reference = hf_greedy(model, ids, NEW_TOKENS)
        pool = BucketedNGramPool(
            3, capacity=5, key_length=2, seed_prompt=True, seed_output=True, span=8, persistent=True
        )
        decoder = LookaheadDecoder(model, window=4, ngram=3, guess=5, pool=pool)
        for call in range(2):
            result = decoder.generate(ids, max_new_tokens=NEW_TOKENS, eos_token_id=[])
            assert torch.equal(result.sequences, reference), (kind, seed, call)
            assert max(result.metrics.tokens_per_step) <= 1 + 8
        assert max(result.metrics.tokens_per_step) > 3  # long copies accepted: the span is exercised


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_long_prompt_beyond_sliding_window(tiny_models, arch):
    """Prompts far longer than the tiny models' sliding windows (4 for gemma3, 8 for mistral)."""
    model = tiny_models(arch, "sdpa")
    ids = prompt("random", 7, length=70)
    reference = hf_greedy(model, ids, 30)
    result = LookaheadDecoder(model, window=5, ngram=4, guess=5).generate(
        ids, max_new_tokens=30, eos_token_id=[]
    )
    assert torch.equal(result.sequences, reference)


def test_sliding_window_is_applied(tiny_models):
    """Sanity check that the window matters for the tiny Gemma 3: ignoring it changes the output."""
    from lade.attention import MaskPlan

    model = tiny_models("gemma3", "sdpa")
    ids = prompt("random", 7, length=40)
    reference = hf_greedy(model, ids, 20)
    decoder = LookaheadDecoder(model, window=3, ngram=3, guess=3)
    decoder.executor.mask_plan = MaskPlan({"full_attention": None}, by_layer_type=False)
    assert not torch.equal(decoder.generate(ids, max_new_tokens=20, eos_token_id=[]).sequences, reference)


def _block_with_fresh_middle_token(tokens, steps):
    """(eos id, index in output) of a token inside a multi-token step that does not occur earlier."""
    start = 0
    for count in steps:
        block = tokens[start : start + count]
        for offset in range(count - 1):  # not the last token of the block: truly inside it
            token = block[offset]
            if token not in tokens[: start + offset]:
                return token, start + offset
        start += count
    return None


@pytest.mark.parametrize("arch", ("llama", "gpt2", "qwen2"))
def test_eos_inside_an_accepted_block_stops_exactly_there(tiny_models, arch):
    model = tiny_models(arch, "sdpa")
    for seed in range(40):
        ids = prompt("repetitive", seed)
        probe = LookaheadDecoder(model, window=5, ngram=5, guess=5).generate(
            ids, max_new_tokens=40, eos_token_id=[]
        )
        new = probe.sequences[0, ids.shape[1] :].tolist()
        found = _block_with_fresh_middle_token(new, probe.metrics.tokens_per_step)
        if found is None:
            continue
        eos, index = found
        never_generated = next(t for t in range(128) if t not in new)
        eos_ids = [never_generated, eos]  # several EOS ids; the one generated is second
        reference = hf_greedy(model, ids, 40, eos_token_id=eos_ids)
        result = LookaheadDecoder(model, window=5, ngram=5, guess=5).generate(
            ids, max_new_tokens=40, eos_token_id=eos_ids
        )
        assert torch.equal(result.sequences, reference)
        assert result.sequences.shape[1] == ids.shape[1] + index + 1
        assert int(result.sequences[0, -1]) == eos
        return
    pytest.fail("no prompt produced an accepted block to put an EOS in")


@pytest.mark.parametrize("max_new_tokens", (1, 2, 3, 7, 13))
def test_never_more_than_max_new_tokens(tiny_models, max_new_tokens):
    model = tiny_models("llama", "sdpa")
    ids = prompt("repetitive", 3)
    reference = hf_greedy(model, ids, max_new_tokens)
    result = LookaheadDecoder(model, window=4, ngram=5, guess=4).generate(
        ids, max_new_tokens=max_new_tokens, eos_token_id=[]
    )
    assert torch.equal(result.sequences, reference)


def test_single_token_prompt(tiny_models):
    model = tiny_models("llama", "sdpa")
    ids = torch.tensor([[5]])
    result = LookaheadDecoder(model, window=3, ngram=3, guess=3).generate(
        ids, max_new_tokens=20, eos_token_id=[]
    )
    assert torch.equal(result.sequences, hf_greedy(model, ids, 20))


def test_streamer_receives_every_token_in_order(tiny_models):
    model = tiny_models("llama", "sdpa")
    ids = prompt("repetitive", 4)
    received = []
    result = LookaheadDecoder(model, window=4, ngram=4, guess=4).generate(
        ids, max_new_tokens=30, eos_token_id=[], streamer=received.extend
    )
    assert received == result.sequences[0, ids.shape[1] :].tolist()


def test_hf_style_streamer_gets_prompt_then_tokens_then_end(tiny_models):
    model = tiny_models("llama", "sdpa")
    ids = prompt("random", 4)

    class Recorder:
        def __init__(self):
            self.chunks, self.ended = [], False

        def put(self, value):
            self.chunks.append(value.flatten().tolist())

        def end(self):
            self.ended = True

    recorder = Recorder()
    result = LookaheadDecoder(model, window=3, ngram=3, guess=3).generate(
        ids, max_new_tokens=10, eos_token_id=[], streamer=recorder
    )
    assert recorder.chunks[0] == ids[0].tolist() and recorder.ended
    assert sum(recorder.chunks[1:], []) == result.sequences[0, ids.shape[1] :].tolist()


def test_seeded_runs_repeat_and_metrics_add_up(tiny_models):
    model = tiny_models("qwen2", "sdpa")
    ids = prompt("repetitive", 5)
    first = LookaheadDecoder(model, window=5, ngram=4, guess=5, seed=3).generate(ids, 30, eos_token_id=[])
    second = LookaheadDecoder(model, window=5, ngram=4, guess=5, seed=3).generate(ids, 30, eos_token_id=[])
    assert first.metrics.tokens_per_step == second.metrics.tokens_per_step
    m = first.metrics
    assert sum(m.tokens_per_step) == m.new_tokens == 30
    assert sum(k * v for k, v in m.accepted_histogram.items()) >= m.new_tokens
    assert m.compression_ratio == pytest.approx(m.new_tokens / m.steps)
    assert m.tokens_per_s > 0 and set(m.time_s) == set(STEP_STAGES)
    # candidates verified per step: at most G, and some step verified one (the repetitive prompt fills
    # the pool); a step that accepted drafted tokens had candidates
    assert len(m.candidate_counts) == m.steps and max(m.candidate_counts) <= 5 and max(m.candidate_counts) > 0
    assert all(c > 0 for c, n in zip(m.candidate_counts, m.tokens_per_step, strict=True) if n > 1)


@pytest.mark.parametrize("arch", ("llama", "gpt2"))
def test_logits_only_where_read_change_nothing(tiny_models, arch):
    """lean_logits runs the LM head on the rows that are read only; the output must not change."""
    model = tiny_models(arch, "sdpa")
    ids = prompt("repetitive", 8)
    runs = [
        LookaheadDecoder(model, 4, 4, 4, lean_logits=lean).generate(ids, max_new_tokens=30, eos_token_id=[])
        for lean in (True, False)
    ]
    assert torch.equal(runs[0].sequences, runs[1].sequences)
    assert runs[0].metrics.tokens_per_step == runs[1].metrics.tokens_per_step
    assert torch.equal(runs[0].sequences, hf_greedy(model, ids, 30))
