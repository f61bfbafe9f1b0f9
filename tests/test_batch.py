"""Batched lookahead decoding (B > 1): every row equals HF batched greedy ``generate`` (left padding)
and the same prompt decoded alone; sampling rows keep the exact distribution."""

import pytest
import torch

from lade import LookaheadDecoder
from lade.autotune import Planner
from lade.cache import commit_rows, new_cache
from lade.calibration import BatchLatency, LatencyModel, batch_sizes_to_measure
from lade.layout import batch_visibility, step_layout, visibility
from pools import BucketedNGramPool, PromptLookupPool
from strategies import AutoregressiveProposer, GaussSeidelProposer, JacobiProposer
from tests.conftest import ARCHITECTURES, VOCAB, hf_greedy

NEW_TOKENS = 32
FLAT = LatencyModel((1, 1024), (1.0, 1.05))  # a GPU-like curve: auto runs the branch
CONFIGS = [(1, 2, 0), (5, 3, 5), (2, 5, 1), (5, 4, 5), ("auto", "auto", "auto")]


def left_padded(lengths: list[int], seed: int, pad: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of prompts of ``lengths`` tokens (random and repetitive ones alternating), left-padded:
    ``(input_ids, attention_mask)``, both [B, max(lengths)]."""
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.full((len(lengths), width), pad, dtype=torch.long)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for b, length in enumerate(lengths):
        if b % 2:
            row = torch.randint(1, VOCAB, (3,), generator=generator).repeat(length)[:length]
        else:
            row = torch.randint(1, VOCAB, (length,), generator=generator)
        ids[b, width - length :] = row
        mask[b, width - length :] = 1
    return ids, mask


def hf_batched(model, ids, mask, new_tokens, eos=None):
    eos = [] if eos is None else eos
    return model.generate(
        ids, attention_mask=mask, do_sample=False, max_new_tokens=new_tokens, eos_token_id=eos, pad_token_id=0
    )


def decoder(model, config, **kwargs):
    window, ngram, guess = config
    return LookaheadDecoder(model, window, ngram, guess, latency=FLAT, **kwargs)


BATCHES = {2: [9, 4], 3: [12, 1, 7], 5: [6, 11, 3, 11, 8]}


@pytest.mark.parametrize("batch", sorted(BATCHES))
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_batched_greedy_equals_hf_batched_and_one_at_a_time(tiny_models, arch, batch):
    model = tiny_models(arch, "sdpa")
    lengths = BATCHES[batch]
    ids, mask = left_padded(lengths, seed=batch)
    reference = hf_batched(model, ids, mask, NEW_TOKENS)
    alone = [
        hf_greedy(model, ids[b : b + 1, ids.shape[1] - n :], NEW_TOKENS)[0, n:] for b, n in enumerate(lengths)
    ]
    multi_token_steps = 0
    for config in CONFIGS:
        result = decoder(model, config).generate(ids, NEW_TOKENS, attention_mask=mask, eos_token_id=[])
        assert torch.equal(result.sequences, reference), config
        for b, n in enumerate(lengths):
            assert torch.equal(result.sequences[b, ids.shape[1] :], alone[b]), (config, b)
            single = decoder(model, config).generate(
                ids[b : b + 1, ids.shape[1] - n :], NEW_TOKENS, eos_token_id=[]
            )
            assert torch.equal(single.sequences[0, n:], alone[b]), (config, b)
        assert len(result.row_metrics) == batch
        assert result.metrics.new_tokens == batch * NEW_TOKENS
        assert result.metrics.steps == sum(m.steps for m in result.row_metrics)
        assert result.metrics.forward_passes == max(m.steps for m in result.row_metrics)
        multi_token_steps += sum(n > 1 for n in result.metrics.tokens_per_step)
    assert multi_token_steps > 0  # rows accepted several tokens per step: the ragged path ran


@pytest.mark.parametrize("arch", ("llama", "gemma3", "mistral"))
def test_batched_greedy_with_eager_attention(tiny_models, arch):
    model = tiny_models(arch, "eager")
    ids, mask = left_padded([10, 3, 14], seed=4)
    reference = hf_batched(model, ids, mask, NEW_TOKENS)
    for config in ((5, 4, 5), ("auto", "auto", "auto")):
        result = decoder(model, config).generate(ids, NEW_TOKENS, attention_mask=mask, eos_token_id=[])
        assert torch.equal(result.sequences, reference), config


@pytest.mark.parametrize("arch", ("llama", "gpt2", "gemma3"))
def test_rows_stop_at_eos_at_different_steps(tiny_models, arch):
    """A row that emits EOS stops there (padded afterwards, as HF does) while the others go on."""
    model = tiny_models(arch, "sdpa")
    ids, mask = left_padded([8, 5, 12, 6], seed=11)
    free = hf_batched(model, ids, mask, NEW_TOKENS)
    eos = int(free[1, ids.shape[1] + 3])  # a token row 1 emits early
    reference = hf_batched(model, ids, mask, NEW_TOKENS, eos=[eos])
    result = decoder(model, (5, 4, 5)).generate(
        ids, NEW_TOKENS, attention_mask=mask, eos_token_id=eos, pad_token_id=0
    )
    assert torch.equal(result.sequences, reference)
    lengths = [m.new_tokens for m in result.row_metrics]
    assert lengths[1] <= 4 and max(lengths) > lengths[1]


@pytest.mark.parametrize("arch", ("llama", "gemma3"))
def test_every_strategy_works_batched(tiny_models, arch):
    model = tiny_models(arch, "sdpa")
    ids, mask = left_padded([9, 14, 4], seed=3)
    reference = hf_batched(model, ids, mask, NEW_TOKENS)
    strategies = {
        "gauss_seidel": dict(proposer=GaussSeidelProposer(5, 4)),
        "jacobi_key2_output": dict(
            proposer=JacobiProposer(4, 4),
            pool=BucketedNGramPool(4, capacity=4, key_length=2, seed_prompt=True, seed_output=True),
        ),
        "shared_pool": dict(
            proposer=JacobiProposer(5, 4),
            pool=BucketedNGramPool(4, capacity=5, seed_output=True),
            shared_pool=True,
        ),
        "span_mixed_lengths": dict(  # 3-token harvested and 7-token seeded candidates, padded
            proposer=JacobiProposer(4, 4),
            pool=BucketedNGramPool(4, capacity=4, key_length=2, seed_prompt=True, seed_output=True, span=7),
        ),
        "prompt_lookup": dict(proposer=AutoregressiveProposer(5, 4), pool=PromptLookupPool(4)),
        "plain": dict(proposer=AutoregressiveProposer(5, 4), guess=0),
    }
    for name, options in strategies.items():
        guess = options.pop("guess", 5)
        dec = LookaheadDecoder(model, 5, 4, guess, **options)
        result = dec.generate(ids, NEW_TOKENS, attention_mask=mask, eos_token_id=[])
        assert torch.equal(result.sequences, reference), name
    processed = LookaheadDecoder(model, 5, 4, 5).generate(
        ids, NEW_TOKENS, attention_mask=mask, eos_token_id=[], repetition_penalty=1.3
    )
    hf = model.generate(
        ids,
        attention_mask=mask,
        do_sample=False,
        max_new_tokens=NEW_TOKENS,
        eos_token_id=[],
        pad_token_id=0,
        repetition_penalty=1.3,
    )
    assert torch.equal(processed.sequences, hf)


def test_a_pool_that_follows_one_sequence_cannot_be_shared(tiny_models):
    model = tiny_models("llama", "sdpa")
    ids, mask = left_padded([5, 7], seed=0)
    dec = LookaheadDecoder(
        model, 3, 3, 3, proposer=AutoregressiveProposer(3, 3), pool=PromptLookupPool(3), shared_pool=True
    )
    with pytest.raises(NotImplementedError, match="cannot be shared"):
        dec.generate(ids, 4, attention_mask=mask)


def test_one_padded_row_keeps_its_padding_and_equals_the_unpadded_prompt(tiny_models):
    model = tiny_models("llama", "sdpa")
    ids, mask = left_padded([5, 9], seed=2)
    row = ids[:1]  # 4 pads, then 5 tokens
    padded = LookaheadDecoder(model, 3, 3, 3).generate(row, 10, attention_mask=mask[:1], eos_token_id=[])
    plain = LookaheadDecoder(model, 3, 3, 3).generate(row[:, 4:], 10, eos_token_id=[])
    assert torch.equal(padded.sequences[:, :9], row)
    assert torch.equal(padded.sequences[:, 9:], plain.sequences[:, 5:])


@pytest.mark.parametrize(
    ("mask", "match"),
    [
        (torch.tensor([[1, 1, 0], [1, 1, 1]]), "left padding"),
        (torch.tensor([[0, 1, 0], [1, 1, 1]]), "left padding"),
        (torch.tensor([[1, 1], [1, 1]]), "shape"),
        (torch.tensor([[2, 1, 1], [1, 1, 1]]), "only 0"),
    ],
)
def test_bad_attention_masks_are_refused(tiny_models, mask, match):
    model = tiny_models("llama", "sdpa")
    ids = torch.ones(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match=match):
        LookaheadDecoder(model, 3, 3, 3).generate(ids, 4, attention_mask=mask)


def test_a_batch_cannot_be_streamed(tiny_models):
    model = tiny_models("llama", "sdpa")
    with pytest.raises(ValueError, match="streamed"):
        LookaheadDecoder(model, 3, 3, 3).generate(torch.ones(2, 3, dtype=torch.long), 4, streamer=print)


# ---------------------------------------------------------------- the pieces


def test_batch_visibility_is_per_row_visibility_with_holes():
    layout = step_layout(2, 3, 2, 2)
    positions = torch.tensor([[7], [4]]) + layout.depths[None]
    key_valid = torch.tensor([[True] * 8, [False, False, True, True, False, True, True, False]])
    key_positions = torch.tensor([list(range(8)), [0, 0, 0, 1, 0, 2, 3, 0]])
    for window in (None, 3):
        batched = batch_visibility(layout.tree_mask, key_valid, key_positions, positions, window)
        assert torch.equal(batched[0], visibility(layout.tree_mask, 8, positions[0], window))
        # row 1 holds positions 0-3 in slots 2, 3, 5, 6: the same as a cache of 4 slots without holes
        compact = visibility(layout.tree_mask, 4, positions[1], window)
        assert torch.equal(batched[1][:, [2, 3, 5, 6, *range(8, 8 + layout.size)]], compact)
        assert not batched[1][:, [0, 1, 4, 7]].any()


def test_commit_rows_gathers_each_rows_accepted_tokens():
    cache = new_cache()
    keys = torch.arange(2 * 1 * 6 * 1, dtype=torch.float).view(2, 1, 6, 1)  # 2 prefix slots + 4 step rows
    cache.update(keys, keys.clone(), 0)
    commit_rows(cache, prefix_len=2, step_len=4, keep=torch.tensor([[0, 2, 3], [0, 1, 2]]))
    layer = cache.layers[0]
    assert layer.keys.shape[2] == 5
    assert layer.keys[0, 0, :, 0].tolist() == [0, 1, 2, 4, 5]
    assert layer.keys[1, 0, :, 0].tolist() == [6, 7, 8, 9, 10]  # in place: untouched
    commit_rows(cache, prefix_len=5, step_len=0, keep=torch.zeros(2, 0, dtype=torch.long))
    assert layer.keys.shape[2] == 5
    layer.batch_select_indices(torch.tensor([1]))
    assert layer.keys.shape[0] == 1 and layer.keys[0, 0, :, 0].tolist() == [6, 7, 8, 9, 10]


def test_a_batch_plan_pays_for_every_rows_tokens():
    """On a curve where one row profits from verifying a 2-token candidate (1.05x the time for ~2x
    the tokens), 8 rows do not: 8 rows x 3 tokens cost 3x what 8 single tokens do."""
    curve = LatencyModel((1, 2, 3, 8, 24, 64), (1.0, 1.03, 1.05, 1.5, 6.0, 16.0))

    def trained(rows: int) -> Planner:
        planner = Planner(curve, window=0, branch_levels=2, max_guess=1, max_length=2, min_records=4)
        planner.start(rows)
        for row in range(rows):
            for i in range(6):
                planner.offer(i * 3, [(1, 2)], [False], row=row)
                planner.resolve([0] * (i * 3) + [1, 2, 9], row=row)
        return planner

    assert trained(1).plan(available=1).guesses == 1
    eight = trained(8).plan(available=[1] * 8)
    assert eight.guesses == 0 and eight.predicted_tokens == 8.0
    with pytest.raises(ValueError, match="rows"):
        trained(2).plan(available=[1, 1, 1])


def test_a_static_batch_is_planned_for_its_slowest_row():
    """Row 0's candidates always hold, row 1 has none. Counting the sum, verifying pays; but when
    row 1 has the most tokens left (it bounds the batch), extra tokens of row 0 do not shorten the
    call, so the plan is plain."""
    curve = LatencyModel((1, 2, 8), (1.0, 1.01, 1.2))
    planner = Planner(curve, window=0, branch_levels=2, max_guess=1, max_length=2, min_records=4)
    planner.start(2)
    for i in range(6):
        planner.offer(i * 3, [(1, 2)], [False], row=0)
        planner.resolve([0] * (i * 3) + [1, 2, 9], row=0)
    assert planner.plan(available=[1, 0]).guesses == 1
    assert planner.plan(available=[1, 0], behind=[True, True]).guesses == 0
    assert planner.plan(available=[1, 0], behind=[True, False]).guesses == 1  # row 0 is the one behind


def test_batch_latency_interpolates_between_measured_batch_sizes():
    one = LatencyModel((1, 8), (1.0, 2.0))
    four = LatencyModel((1, 8), (3.0, 10.0))
    latency = BatchLatency({1: one, 4: four})
    assert latency(1, 8) == 2.0 and latency(4, 1) == 3.0
    assert latency(2, 1) == pytest.approx(1.0 + (3.0 - 1.0) / 3)
    assert latency(8, 1) == pytest.approx(6.0)  # beyond the largest: in proportion to B
    assert batch_sizes_to_measure(1) == [] and batch_sizes_to_measure(5) == [2, 4, 8]
    dipping = BatchLatency(
        {1: LatencyModel((1, 3, 4), (1.0, 3.0, 1.5)), 4: LatencyModel((1, 3, 4), (2.0, 4.0, 3.0))}
    )
    assert dipping.floor(1, 2) == 1.5 and dipping.floor(4, 3) == 3.0
    for rows in (2, 3, 8):  # the floor is the least cost of the same batch at the sizes from there on
        assert dipping.floor(rows, 2) == pytest.approx(min(dipping(rows, s) for s in range(2, 60)))
    with pytest.raises(ValueError, match="batch size 1"):
        BatchLatency({2: one})


def test_auto_batches_measure_their_own_latency_curves(tiny_models, tmp_path):
    """Without a given latency, an auto batch of 3 measures (and caches) the curves of batches of 2
    and 4 rows, and its rows still equal HF batched greedy."""
    model = tiny_models("llama", "sdpa")
    ids, mask = left_padded([6, 10, 3], seed=8)
    decoder = LookaheadDecoder(model, calibration_dir=str(tmp_path))
    result = decoder.generate(ids, 16, attention_mask=mask, eos_token_id=[])
    assert torch.equal(result.sequences, hf_batched(model, ids, mask, 16))
    names = sorted(path.name.rsplit("-", 1)[-1] for path in tmp_path.glob("*.json"))
    assert names[-2:] == ["rows2.json", "rows4.json"] and len(names) == 3
    assert LookaheadDecoder(model, latency=FLAT).batch_latency(4) is None  # a given latency is used as is


def test_finished_rows_are_padded_with_the_first_eos_id_when_the_model_has_no_pad(tiny_models):
    model = tiny_models("llama", "sdpa")
    ids, mask = left_padded([8, 5, 12], seed=11)
    free = hf_batched(model, ids, mask, 20)
    early = int(free[1, ids.shape[1] + 2])  # row 1 emits it early
    eos = [127 if early != 127 else 126, early]  # the first id is not the smallest
    saved = model.generation_config.pad_token_id
    model.generation_config.pad_token_id = None
    try:
        reference = model.generate(
            ids, attention_mask=mask, do_sample=False, max_new_tokens=20, eos_token_id=eos
        )
        result = LookaheadDecoder(model, 5, 4, 5).generate(ids, 20, attention_mask=mask, eos_token_id=eos)
    finally:
        model.generation_config.pad_token_id = saved
    assert torch.equal(result.sequences, reference)
    assert int(result.sequences[1, -1]) == eos[0]


def test_a_batch_with_no_new_tokens_returns_the_prompts(tiny_models):
    ids, mask = left_padded([4, 2], seed=1)
    result = LookaheadDecoder(tiny_models("llama", "sdpa"), 3, 3, 3).generate(ids, 0, attention_mask=mask)
    assert torch.equal(result.sequences, ids) and len(result.row_metrics) == 2
