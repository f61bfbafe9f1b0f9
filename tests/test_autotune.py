"""Auto W/N/G: latency curves, counterfactual acceptance, the planner, and lossless auto decoding."""

from __future__ import annotations

import json
import logging
import random

import pytest
import torch

from lade import LookaheadDecoder
from lade.acceptance import AcceptanceStats, common_prefix
from lade.autotune import Planner, StepPlan
from lade.calibration import LatencyModel, calibration_key, load_cached, measure, shape_drift, store
from lade.model import load_model
from lade.priors import PlannerPriors, prior_acceptance

# A CPU-like curve (each extra token costs) and a GPU-like one (extra tokens nearly free).
STEEP = LatencyModel((1, 2, 4, 8, 16, 32, 64), (1.0, 1.1, 1.6, 1.9, 2.2, 2.6, 3.3))
FLAT = LatencyModel((1, 128), (1.0, 1.05))


def greedy(model, ids, n):
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n)
    return out[0, ids.shape[1] :].tolist()


# ---------------------------------------------------------------------------- latency model


def test_latency_interpolates_and_extrapolates():
    curve = LatencyModel((1, 3, 5), (1.0, 2.0, 2.5))
    assert curve(1) == 1.0 and curve(2) == pytest.approx(1.5) and curve(5) == 2.5
    assert curve(7) == pytest.approx(3.0)  # along the last segment
    assert curve.relative(3) == pytest.approx(2.0)


# float32 Qwen2.5-Coder-1.5B on an AVX512 EPYC (MKL_CBWR=AUTO), ms per step of S tokens: S = 3 is dearer
# than S = 4 to 12 (MKL's kernels for some row counts are faster than for fewer rows)
DIPPING = LatencyModel((1, 2, 3, 4, 5, 6, 8, 12, 16), (366, 442, 622, 405, 458, 457, 467, 529, 594))


def test_latency_from_measurements_keeps_a_larger_size_that_costs_less():
    curve = LatencyModel.from_measurements([1, 2, 3, 4], [1.0, 1.5, 1.7, 1.1])
    assert curve.seconds == (1.0, 1.5, 1.7, 1.1)
    assert curve(4) < curve(3)


def test_latency_floor_is_the_least_cost_from_a_size_on():
    assert DIPPING.floor(1) == 366 and DIPPING.floor(2) == 405 and DIPPING.floor(3) == 405
    assert DIPPING.floor(7) == pytest.approx(462)  # between 6 and 8: linear, then only dearer sizes
    assert DIPPING.floor(13) == pytest.approx(DIPPING(13))
    # brute force over every size up to far beyond the curve
    for size in range(1, 40):
        assert DIPPING.floor(size) == pytest.approx(min(DIPPING(s) for s in range(size, 400)))


def test_latency_beyond_a_falling_last_segment_keeps_growing():
    curve = LatencyModel((1, 2, 4), (1.0, 2.0, 1.5))
    assert curve(4) == 1.5 and curve(8) > curve(6) > curve(4)
    assert curve(7) == pytest.approx(1.5 + (1.5 - 1.0) / 3 * 3)  # along the chord from size 1


def test_the_planner_prices_the_cheaper_larger_step():
    # a 2-token candidate cut to 2 would feed 3 tokens, the dearest size: the planner verifies a
    # shape that feeds 2 or 4 instead (each next token of the candidates holds with chance 0.9)
    curve = LatencyModel.from_measurements(DIPPING.sizes, DIPPING.seconds)  # as the calibration makes it
    priors = PlannerPriors(candidate=0.9)
    planner = Planner(curve, window=0, branch_levels=4, max_guess=3, max_length=4, priors=priors)
    plan = planner.plan(available=3)
    assert 1 + plan.guesses * plan.length != 3 and plan.guesses >= 1
    assert plan.predicted_seconds == DIPPING(1 + plan.guesses * plan.length) < DIPPING(3)


def test_a_branch_is_not_skipped_when_a_larger_step_costs_less_than_its_smallest():
    # the branch's own tokens make a step of 3 (dear), its shapes with candidates a step of 4 or more
    # (cheap): the skip that keeps planning cheap must use the floor, not the price of 3 tokens
    curve = LatencyModel((1, 3, 4, 16), (1.0, 3.0, 1.05, 1.1))
    priors = PlannerPriors(candidate=0.9, branch=1.0)
    planner = Planner(curve, window=1, branch_levels=2, max_guess=3, max_length=4, priors=priors)
    plan = planner.choose(available=3)
    assert plan.branch and plan.guesses >= 1


@pytest.mark.parametrize(
    "sizes, seconds", [((), ()), ((2, 1), (1.0, 1.0)), ((1, 2), (1.0,)), ((1,), (0.0,)), ((0, 1), (1.0, 1.0))]
)
def test_latency_rejects_bad_curves(sizes, seconds):
    with pytest.raises(ValueError):
        LatencyModel(sizes, seconds)


def test_measure_takes_medians_per_size():
    calls = []
    curve = measure(calls.append, sizes=(1, 4), repeats=3)
    assert calls == [1, 4] + [1, 4] * 3  # a warm-up round, then interleaved rounds
    assert curve.sizes == (1, 4) and all(s > 0 for s in curve.seconds)


def test_calibration_cache_roundtrip_and_corruption(tmp_path):
    path = tmp_path / "curve.json"
    store(path, STEEP, "key")
    assert load_cached(path) == STEEP
    path.write_text("{not json")
    assert load_cached(path) is None
    path.write_text(json.dumps({"format": 999, "latency": STEEP.to_dict()}))
    assert load_cached(path) is None


def test_calibration_key_depends_on_dtype_and_architecture():
    llama, _ = load_model("tiny-random-llama")
    gpt2, _ = load_model("tiny-random-gpt2")
    llama16, _ = load_model("tiny-random-llama", dtype="bfloat16")
    keys = {calibration_key(llama), calibration_key(gpt2), calibration_key(llama16)}
    assert len(keys) == 3 and calibration_key(llama) == calibration_key(load_model("tiny-random-llama")[0])


def test_decoder_calibrates_once_and_caches(tmp_path):
    model, _ = load_model("tiny-random-llama")
    decoder = LookaheadDecoder(model, calibration_dir=tmp_path)
    curve = decoder.calibrate(sizes=(1, 2, 4, 8), repeats=1)
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 1 and load_cached(files[0]) == curve
    assert 1 in curve.sizes and all(s <= 64 for s in curve.sizes)
    reloaded = LookaheadDecoder(model, calibration_dir=tmp_path)
    reloaded.calibrator.tolerance = None  # a tiny model's sub-millisecond steps are too noisy to check
    again = reloaded.calibrate(sizes=(1, 2, 4, 8), repeats=1)
    assert again == curve  # loaded, not re-measured (a re-measurement would differ in timing noise)


def test_drift_compares_relative_step_costs_not_absolute_speed():
    slower = LatencyModel(STEEP.sizes, tuple(3 * s for s in STEEP.seconds), STEEP.context)
    assert shape_drift(STEEP, slower, STEEP.sizes) == pytest.approx(0.0)  # uniformly slower: same plans
    steeper = LatencyModel(
        STEEP.sizes,
        tuple(s * (1 if n == 1 else 1.5) for n, s in zip(STEEP.sizes, STEEP.seconds, strict=True)),
    )
    assert shape_drift(STEEP, steeper, STEEP.sizes) == pytest.approx(0.5)
    assert shape_drift(STEEP, steeper, [1]) == 0.0


def cache_a_stale_curve(model, directory):
    """Measure ``model``'s curve into ``directory``, then replace the cached one by a curve where every
    step of 2+ tokens costs 1000x more, relative to one token, than here now (as if measured on another
    host, or beside another job); returns (the decoder, the cache file, the stale curve)."""
    decoder = LookaheadDecoder(model, calibration_dir=directory)
    curve = decoder.calibrate(sizes=(1, 2, 4, 8, 16), repeats=1)
    (path,) = directory.glob("*.json")
    distorted = (s * (1 if n == 1 else 1000) for n, s in zip(curve.sizes, curve.seconds, strict=True))
    stale = LatencyModel(curve.sizes, tuple(distorted))
    store(path, stale, "key")
    return decoder, path, stale


def test_a_cached_curve_far_off_the_machine_now_is_measured_again(tmp_path, caplog):
    model, _ = load_model("tiny-random-llama")
    decoder, path, stale = cache_a_stale_curve(model, tmp_path)
    assert decoder.calibrator.drift(stale) > 0.9
    again = LookaheadDecoder(model, calibration_dir=tmp_path)
    again.calibrator.competition = lambda: FixedCompetition(0.0)  # an idle machine, whatever runs beside
    fresh = again.calibrate(sizes=(1, 2, 4, 8, 16), repeats=1)
    assert fresh.relative(2) < stale.relative(2) / 5 and load_cached(path) == fresh  # measured again
    assert any("off this machine now" in r.getMessage() for r in caplog.records)


def test_a_cached_curve_checked_beside_other_work_is_kept(tmp_path, caplog):
    """A drift check while other processes keep the cores busy says little about the machine, and a
    curve measured then would be priced beside them: the cached curve stays, with a warning."""
    model, _ = load_model("tiny-random-llama")
    _, path, stale = cache_a_stale_curve(model, tmp_path)
    busy = LookaheadDecoder(model, calibration_dir=tmp_path)
    busy.calibrator.competition = lambda: FixedCompetition(1.6)
    with caplog.at_level(logging.WARNING, logger="lade.calibrator"):
        kept = busy.calibrate(sizes=(1, 2, 4, 8, 16), repeats=1)
    assert kept == stale and load_cached(path) == stale
    assert any("1.6 CPU cores busy during the check; keeping it" in r.getMessage() for r in caplog.records)


class FixedCompetition:
    """A ``CpuCompetition`` that reads ``cores`` whatever ran."""

    def __init__(self, cores: float | None):
        self.cores = cores

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


# ---------------------------------------------------------------------------- acceptance records


def test_counterfactual_acceptance_scores_every_shape():
    stats = AcceptanceStats(max_guess=3, max_length=4)
    sequence = [9, 1, 2, 3, 4, 5]
    # at position 1 (after token 9) the pool offered three candidates; the truth is 1 2 3 4
    stats.offer(1, [(1, 2, 7, 7), (1, 2, 3, 7), (5, 5, 5, 5)], [False, True, False])
    stats.resolve(sequence[:3])
    assert len(stats) == 0  # not yet covered
    stats.resolve(sequence)
    assert len(stats) == 1
    assert stats.expected(1, 4) == 2  # first candidate matches 1 2
    assert stats.expected(2, 4) == 3 and stats.expected(2, 2) == 2  # second matches 1 2 3, cut at 2
    assert stats.expected(3, 1) == 1 and stats.expected(0, 4) == 0
    assert stats.expected(2, 4, without_harvested=True) == 2  # the harvested one does not count


def test_acceptance_history_is_a_sliding_window():
    stats = AcceptanceStats(max_guess=1, max_length=2, history=2)
    for position, truth in enumerate([1, 1, 0, 0]):
        stats.offer(position, [(1, 1)], [False])
        sequence = [0] * position + [truth, 9]
        stats.resolve(sequence)
    assert len(stats) == 2 and stats.expected(1, 2) == 0  # only the last two (misses) remain


def test_final_resolve_scores_partial_spans():
    stats = AcceptanceStats(max_guess=1, max_length=3)
    stats.offer(0, [(4, 5, 6)], [False])
    stats.resolve([4, 5], final=True)
    assert stats.expected(1, 3) == 2


def test_acceptance_sums_equal_a_naive_mean_over_the_window():
    """The running sums (records added and evicted) against the definition, recomputed from the
    last ``history`` scored offers: the mean of min(l, best match among the first g)."""
    rng = random.Random(0)
    for max_guess, max_length, history in [(1, 1, 1), (3, 4, 5), (7, 10, 16)]:
        stats = AcceptanceStats(max_guess, max_length, history)
        sequence = [rng.randint(0, 2) for _ in range(300)]
        scored = []  # (matches, harvested) of every offer, in order
        for position in range(250):
            count = rng.randint(0, max_guess + 2)
            candidates = [tuple(rng.randint(0, 2) for _ in range(rng.randint(1, 12))) for _ in range(count)]
            harvested = [rng.random() < 0.3 for _ in candidates]
            stats.offer(position, candidates, harvested)
            stats.resolve(sequence[: position + 14])  # every offer so far is covered
            if candidates:
                kept = [c[:max_length] for c in candidates[:max_guess]]
                matches = [common_prefix(c, sequence[position:]) for c in kept]
                scored.append((matches, harvested[:max_guess]))
            window = scored[-history:]
            assert len(stats) == len(window)
            for seed in (False, True):  # without the harvested candidates: the others, in order
                counted = [[m for m, h in zip(ms, hs, strict=True) if not (seed and h)] for ms, hs in window]
                for g in range(max_guess + 1):
                    for cut in range(max_length + 1):
                        naive = [min(cut, max(matches[:g], default=0)) for matches in counted]
                        expected = sum(naive) / len(naive) if naive and g else 0.0
                        assert stats.expected(g, cut, without_harvested=seed) == pytest.approx(expected)
                        assert stats.means(seed)[g][cut] == pytest.approx(expected)  # all at once
            # leaving the harvested candidates out changes some record's best match (at some g)
            seeds = [[m for m, h in zip(ms, hs, strict=True) if not h] for ms, hs in window]
            changed = any(
                max(ms[:g], default=0) != max(seed[:g], default=0)
                for (ms, _), seed in zip(window, seeds, strict=True)
                for g in range(1, max_guess + 1)
            )
            assert stats.harvest_matters == changed


# ---------------------------------------------------------------------------- planner


def _trained(planner: Planner, matches: list[int], rounds: int = 20) -> Planner:
    """Feed ``rounds`` offers of len(matches) candidates; candidate i matches ``matches[i]`` tokens."""
    length = planner.max_length
    for r in range(rounds):
        truth = [100 + r] * length
        offers = [tuple(truth[:m] + [1] * (length - m)) for m in matches]
        planner.offer(0, offers, [False] * len(offers))
        planner.resolve(truth)
    return planner


def test_the_plan_is_the_best_of_every_shape_priced():
    """The planner prices one shape per step size (the one accepting the most) and skips the pass
    with the harvests where they change nothing: its plan must be what pricing every (g, l) gives,
    the first of equal rates in (g, l) order, on a curve where larger steps may cost less."""
    rng = random.Random(3)
    for _ in range(40):
        planner = Planner(DIPPING, window=0, branch_levels=4, max_guess=5, max_length=6, min_records=1)
        truth = [rng.randint(0, 2) for _ in range(400)]
        for position in range(0, 120, 3):
            candidates = [tuple(rng.randint(0, 2) for _ in range(6)) for _ in range(rng.randint(1, 5))]
            planner.offer(position, candidates, [rng.random() < 0.2 for _ in candidates])
            planner.resolve(truth[: position + 3])
        available = rng.randint(1, 5)
        plan = planner.choose(available)
        shapes = [(g, cut) for g in range(available + 1) for cut in ((6,) if g == 0 else range(1, 7))]

        def rate(shape, without_harvested, stats=planner.stats):
            g, cut = shape
            return (1 + stats.expected(g, cut, without_harvested)) / DIPPING(1 + g * cut)

        if max(rate(shape, True) for shape in shapes) < planner.margin / DIPPING(1):
            assert plan.guesses == 0
            continue
        g, cut = max(shapes, key=lambda shape: rate(shape, False))
        assert (plan.guesses, plan.length) == (g, cut) or g == 0 and plan.guesses == 0
        assert plan.rate == pytest.approx(rate((g, cut), False))
    # equal rates: (1, 3) and (3, 1) both feed 4 tokens and accept 1, the cheapest step here (4
    # tokens cost less than 2 or 3 on this curve); the first in (g, l) order is the plan
    planner = _trained(Planner(DIPPING, window=0, branch_levels=4, max_guess=3, max_length=3), [1, 0, 0])
    assert (planner.choose(3).guesses, planner.choose(3).length) == (1, 3)


def test_planner_falls_back_to_plain_when_nothing_is_accepted():
    planner = _trained(Planner(STEEP, window=0, branch_levels=4, max_guess=3, max_length=4), [0, 0, 0])
    plan = planner.plan(available=3)
    assert (plan.branch, plan.guesses) == (False, 0)


def test_planner_verifies_what_pays_on_steep_hardware():
    # the first candidate always matches 3 tokens, the others never: verify one, cut at 3
    planner = _trained(Planner(STEEP, window=0, branch_levels=4, max_guess=3, max_length=4), [3, 0, 0])
    plan = planner.plan(available=3)
    assert (plan.guesses, plan.length) == (1, 3)
    assert plan.rate > 1 / STEEP(1)


def test_planner_verifies_everything_on_flat_hardware():
    planner = _trained(Planner(FLAT, window=0, branch_levels=4, max_guess=3, max_length=4), [1, 2, 4])
    plan = planner.plan(available=3)
    assert (plan.guesses, plan.length) == (3, 4)


def _prior_planner(curve: LatencyModel, candidate: float) -> Planner:
    """A planner without branch, G = 3, N - 1 = 4, assuming ``candidate`` for each next token."""
    return Planner(
        curve, window=0, branch_levels=4, max_guess=3, max_length=4, priors=PlannerPriors(candidate=candidate)
    )


def test_planner_waits_for_records_before_trusting_candidates_without_a_candidate_prior():
    planner = _prior_planner(FLAT, 0.0)
    assert planner.plan(available=3).guesses == 0


def test_prior_acceptance_is_the_geometric_sum():
    assert prior_acceptance(0.5, 3) == pytest.approx(0.5 + 0.25 + 0.125)
    assert prior_acceptance(0.0, 4) == 0.0


def test_before_records_the_candidate_prior_prices_one_candidate_against_the_curve():
    # flat hardware: verifying is nearly free, so the prior pays for one candidate at full length;
    # more candidates are not credited by the prior (g = 1), and the prediction is the prior's
    flat = _prior_planner(FLAT, 0.3)
    plan = flat.plan(available=3)
    assert (plan.guesses, plan.length) == (1, 4)
    assert plan.predicted_tokens == pytest.approx(1 + prior_acceptance(0.3, 4))
    # steep hardware (the second token costs 10%, each of the next ones more): a weak prior verifies
    # nothing, a strong one a short candidate (its later tokens' chances no longer pay for them)
    weak = _prior_planner(STEEP, 0.05)
    assert weak.plan(available=3).guesses == 0
    strong = _prior_planner(STEEP, 0.6)
    plan = strong.plan(available=3)
    assert plan.guesses == 1 and 1 <= plan.length < 4
    # nothing offered: the prior is not applied
    assert flat.plan(available=0).guesses == 0


def test_the_records_replace_the_candidate_prior_once_trusted():
    planner = _trained(_prior_planner(FLAT, 0.9), [0, 0, 0])
    assert planner.plan(available=3).guesses == 0  # the prior said 0.9 per token; the records say 0


def test_planner_runs_the_branch_only_where_it_can_pay():
    cheap = _trained(Planner(FLAT, window=7, branch_levels=4, max_guess=3, max_length=4), [1, 0, 0])
    assert cheap.plan(available=3).branch
    steep = _trained(Planner(STEEP, window=7, branch_levels=4, max_guess=3, max_length=4), [1, 0, 0])
    assert not steep.plan(available=3).branch


def _plans(planner: Planner, matches: list[int], harvested: list[bool], steps: int) -> list[StepPlan]:
    """Plan ``steps`` steps, each offering candidates that match ``matches`` tokens of the text (those
    flagged ``harvested`` came from the branch)."""
    plans, length = [], planner.max_length
    for step in range(steps):
        truth = [500 + step] * length
        planner.offer(0, [tuple(truth[:m] + [1] * (length - m)) for m in matches], harvested)
        plans.append(planner.plan(available=len(matches)))
        planner.resolve(truth)
    return plans


def _branch_runs(planner: Planner, matches: list[int], harvested: list[bool], steps: int) -> list[bool]:
    """Whether each of ``_plans``'s steps ran the branch."""
    return [plan.branch for plan in _plans(planner, matches, harvested, steps)]


def _trial_planner(**options) -> Planner:
    curve = LatencyModel((1, 128), (1.0, 1.3))
    return Planner(curve, window=7, branch_levels=4, max_guess=3, max_length=4, **options)


def test_measured_useless_branch_is_switched_off_then_retried():
    planner = _trained(_trial_planner(priors=PlannerPriors(trial=4), branch_retry=10), [2, 0, 0])
    runs = _branch_runs(planner, [2, 0, 0], [False] * 3, 30)  # seeded candidates do all the work
    assert runs[:4] == [True] * 4  # the prior: try it
    assert not any(runs[4:14])  # measured: useless, off
    assert any(runs[14:])  # retried from the prior after branch_retry idle steps


def test_branch_whose_harvests_are_accepted_stays_on():
    planner = _trained(_trial_planner(priors=PlannerPriors(trial=4)), [1, 0, 0])
    runs = _branch_runs(planner, [1, 4, 0], [False, True, False], 30)  # a harvested one adds 3 tokens
    assert all(runs)
    assert planner.branch_gain() > 2


def test_branch_steps_verify_the_harvested_candidates():
    """The branch is chosen for its harvests: a step running it verifies them, even where the other
    candidates fail (the steady-state choice of the branch leaves them out of its count)."""
    planner = _trained(_trial_planner(priors=PlannerPriors(trial=4)), [0, 0, 0])
    plans = _plans(planner, [0, 4, 0], [False, True, False], 12)
    assert all(plan.branch and plan.guesses >= 2 for plan in plans[1:])
    planner.offer(0, [(1,) * 4, (9,) * 4, (1,) * 4], [False, True, False])
    last = planner.plan(available=3)  # predicts the bonus token and what the offered candidates give
    assert last.predicted_tokens == pytest.approx(1 + planner.stats.expected(last.guesses, last.length))


def test_branch_gain_is_measured_on_the_steps_it_ran():
    """Offers made while the branch was off (a warm-up, an earlier text) do not dilute its gain:
    its harvests were not in the pool then."""
    planner = _trained(_trial_planner(priors=PlannerPriors(trial=4)), [2, 0, 0], rounds=60)
    runs = _branch_runs(planner, [2, 4, 0], [False, True, False], 20)  # its harvests add 2 tokens
    assert all(runs)
    assert planner.branch_gain() > 1


def test_the_decoders_planner_priors_reach_each_calls_planner():
    from lade.session import new_planner

    model, _ = load_model("tiny-random-llama")
    priors = PlannerPriors(branch=0.5, trial=3, candidate=0.2)
    decoder = LookaheadDecoder(model, planner_priors=priors, latency=STEEP)
    decoder.proposer.start(torch.tensor([1, 2, 3]))
    chooser = new_planner(decoder.options, STEEP, decoder.proposer, None, decoder.pool)
    assert [p.priors for p in chooser.planners] == [priors] * 4  # each source, and all of them merged
    assert LookaheadDecoder(model, latency=STEEP).options.priors == PlannerPriors()


@pytest.mark.parametrize(
    "bad, error",
    [
        (PlannerPriors(branch=-0.1), "planner_priors.branch"),
        (PlannerPriors(branch=True), "planner_priors.branch"),
        (PlannerPriors(trial=0), "planner_priors.trial"),
        (PlannerPriors(candidate=1.0), "planner_priors.candidate"),
        (PlannerPriors(candidate=-0.1), "planner_priors.candidate"),
        (PlannerPriors(candidate="0.3"), "planner_priors.candidate"),
        ({"candidate": 0.3}, "PlannerPriors"),
    ],
)
def test_bad_planner_priors_are_refused(bad, error):
    with pytest.raises((ValueError, TypeError), match=error):
        LookaheadDecoder(load_model("tiny-random-llama")[0], latency=STEEP, planner_priors=bad)


def test_fixed_settings_are_respected():
    planner = _trained(
        Planner(
            STEEP, window=7, branch_levels=4, max_guess=3, max_length=4, auto_window=False, auto_guess=False
        ),
        [0, 0, 0],
    )
    plan = planner.plan(available=2)
    assert plan.branch and plan.guesses == 2 and plan.length in range(1, 5)


# ---------------------------------------------------------------------------- lossless auto decoding


@pytest.mark.parametrize("arch", ["llama", "gpt2", "gemma3"])
@pytest.mark.parametrize("latency", [STEEP, FLAT], ids=["steep", "flat"])
@pytest.mark.parametrize("auto", [("auto", "auto", "auto"), (5, "auto", 3), ("auto", 4, "auto")])
def test_auto_decoding_equals_greedy(arch, latency, auto):
    model, _ = load_model(f"tiny-random-{arch}")
    decoder = LookaheadDecoder(model, *auto, latency=latency)
    torch.manual_seed(1)
    repetitive = torch.randint(1, 128, (6,)).repeat(4)[None]
    for ids in (repetitive, torch.randint(1, 128, (1, 9))):
        result = decoder.generate(ids, max_new_tokens=40)
        assert result.sequences[0, ids.shape[1] :].tolist() == greedy(model, ids, 40)


def test_auto_decoding_mixes_plain_and_lookahead_steps():
    model, _ = load_model("tiny-random-llama")
    ids = torch.arange(1, 9).repeat(5)[None]  # a loop the model will likely continue
    result = LookaheadDecoder(model, latency=FLAT).generate(ids, max_new_tokens=60)
    m = result.metrics
    assert result.sequences[0, ids.shape[1] :].tolist() == greedy(model, ids, 60)
    assert len(m.step_sizes) == m.steps and min(m.step_sizes) >= 1
    assert m.branch_steps > 0  # cheap tokens: the branch runs
    assert len(m.planned_tokens) == len(m.planned_s) == m.steps  # each step's plan, beside its outcome
    assert min(m.planned_tokens) >= 1 and min(m.planned_s) > 0


def test_auto_is_the_default_and_calibrates_lazily(tmp_path, caplog):
    model, _ = load_model("tiny-random-qwen2")
    decoder = LookaheadDecoder(model, calibration_dir=tmp_path)
    assert decoder.is_auto and decoder.latency is None
    ids = torch.randint(1, 128, (1, 8))
    out = decoder.generate(ids, max_new_tokens=12)
    assert decoder.latency is not None and list(tmp_path.glob("*.json"))
    announced = [r.getMessage() for r in caplog.records if "measuring forward latency" in r.getMessage()]
    assert len(announced) == 1 and str(tmp_path) in announced[0] and "latency=" in announced[0]
    decoder.generate(ids, max_new_tokens=4)  # measured once: later calls say nothing
    assert len([r for r in caplog.records if "measuring forward latency" in r.getMessage()]) == 1
    assert out.sequences[0, 8:].tolist() == greedy(model, ids, 12)


@pytest.mark.parametrize("bad", ["Auto", "", 0, -1, 2.5])
def test_bad_window_values(bad):
    model, _ = load_model("tiny-random-llama")
    with pytest.raises((ValueError, TypeError)):
        LookaheadDecoder(model, window=bad)


def test_latency_is_linear_in_the_context_between_two_curves():
    long = LatencyModel((1, 4), (2.0, 6.0), context=1000)
    curve = LatencyModel((1, 4), (1.0, 2.0), context=0, longer=long)
    assert curve(4) == 2.0 and curve(4, 500) == pytest.approx(4.0) and curve(4, 2000) == pytest.approx(10.0)
    assert curve(1, -5) == 1.0  # shorter than the first context: the first curve
    assert LatencyModel.from_dict(curve.to_dict()) == curve
    with pytest.raises(ValueError, match="longer context"):
        LatencyModel((1,), (1.0,), context=10, longer=LatencyModel((1,), (1.0,), context=5))


def test_long_contexts_make_the_planner_more_careful():
    long = LatencyModel((1, 2, 4, 8), (1.0, 2.0, 3.0, 4.0), context=1000)
    curve = LatencyModel((1, 2, 4, 8), (1.0, 1.05, 1.1, 1.2), context=0, longer=long)
    planner = _trained(Planner(curve, window=0, branch_levels=4, max_guess=1, max_length=1), [1], rounds=4)
    planner.min_records = 4
    assert planner.plan(available=1, context=0).guesses == 1  # 2 tokens for 1.05x the time
    assert planner.plan(available=1, context=1000).guesses == 0  # 2 tokens would cost 2x: plain


def test_auto_window_size_follows_the_latency_curve():
    def planner(curve):
        return _trained(
            Planner(curve, window=15, branch_levels=4, max_guess=1, max_length=4, windows=(1, 3, 7, 15)), [2]
        )

    assert planner(FLAT).plan(available=1).window == 15  # free tokens: the widest branch
    moderate = LatencyModel((1, 8, 16, 32, 64), (1.0, 1.05, 1.1, 1.6, 3.0))
    assert planner(moderate).plan(available=1).window in (1, 3)  # only narrow branches are cheap
    assert not planner(STEEP).plan(available=1).branch


def test_jacobi_resize_keeps_columns_and_output_stays_exact():
    from strategies import JacobiProposer

    proposer = JacobiProposer(window=3, ngram=4)
    proposer.start(torch.arange(10, 20))
    before = proposer.lookahead_branch().levels.clone()
    proposer.resize(5)
    after = proposer.lookahead_branch().levels
    assert after.shape == (1, 5) and torch.equal(after[:, :3], before)
    proposer.resize(2)
    assert torch.equal(proposer.lookahead_branch().levels, before[:, :2])
    model, _ = load_model("tiny-random-llama")
    ids = torch.arange(1, 9).repeat(4)[None]
    moderate = LatencyModel((1, 8, 16, 32, 64), (1.0, 1.02, 1.05, 1.4, 2.5))
    result = LookaheadDecoder(model, latency=moderate).generate(ids, max_new_tokens=50)
    assert result.sequences[0, ids.shape[1] :].tolist() == greedy(model, ids, 50)


def test_calibration_stops_at_the_first_size_that_cannot_pay():
    """A step feeding S tokens that costs more than N single-token steps can never pay: sizes past the
    first such one are not measured (a modelled clock that each step advances by its latency, so the
    machine's sleep jitter cannot move the cut)."""
    from lade.calibration import sizes_worth_measuring

    def modelled(latency):
        now = [0.0]
        fed = []

        def run_step(size):
            fed.append(size)
            now[0] += latency(size)

        return run_step, (lambda: now[0]), fed

    run_step, clock, fed = modelled(lambda size: 0.001 * size)  # linear, as bf16 without native kernels
    kept = sizes_worth_measuring(run_step, [1, 2, 4, 8, 16, 32], most_tokens=5, clock=clock)
    assert kept == [1, 2, 4, 8]  # 8 ms > 1.25 * 5 * 1 ms: kept as the last, 16 and 32 never run
    assert max(fed) == 8

    run_step, clock, _ = modelled(lambda size: 0.002)  # flat: every size can pay
    flat = sizes_worth_measuring(run_step, [1, 2, 4, 8, 16, 32], most_tokens=5, clock=clock)
    assert flat == [1, 2, 4, 8, 16, 32]

    run_step, clock, _ = modelled(lambda size: 0.001 * size)
    assert sizes_worth_measuring(run_step, [1, 2, 4, 8], most_tokens=8, clock=clock) == [1, 2, 4, 8]


def test_auto_verifies_long_copies_from_the_text():
    """An auto N stores 10-token continuations from the prompt and output (``AUTO_SPAN``) beside the
    branch's N-1. A repeated request with a persistent pool holds the model's own continuation, so
    steps verify and accept more than N tokens, still exactly (tiny random models do not loop)."""
    from lade.decoding import AUTO_GUESS, AUTO_NGRAM, AUTO_SPAN
    from pools import BucketedNGramPool

    model, _ = load_model("tiny-random-llama")
    assert LookaheadDecoder(model, latency=FLAT).options.candidate_length == AUTO_SPAN > AUTO_NGRAM - 1
    pool = BucketedNGramPool(
        AUTO_NGRAM,
        AUTO_GUESS,
        key_length=3,
        seed_prompt=True,
        seed_output=True,
        span=AUTO_SPAN,
        persistent=True,
    )
    decoder = LookaheadDecoder(model, latency=FLAT, pool=pool)
    ids = torch.randint(1, 128, (1, 9), generator=torch.Generator().manual_seed(4))
    reference = greedy(model, ids, 60)
    for _ in range(2):
        result = decoder.generate(ids, max_new_tokens=60)
        assert result.sequences[0, ids.shape[1] :].tolist() == reference
    assert max(result.metrics.tokens_per_step) > AUTO_NGRAM


def test_guess_ceiling_sets_how_many_candidates_auto_may_verify():
    """``guess_ceiling`` raises (or lowers) auto's G: the planners, the candidates each source offers
    and the n-gram pool's capacity follow it; the output stays the model's greedy one."""
    model, _ = load_model("tiny-random-llama")
    default, wider = (
        LookaheadDecoder(model, latency=FLAT),
        LookaheadDecoder(model, latency=FLAT, guess_ceiling=16),
    )
    assert default.options.guess == 7 and wider.options.guess == 16 and wider.options.auto_guess
    assert wider.pool.sources["lookahead"].capacity == 16
    ids = torch.randint(1, 128, (1, 9), generator=torch.Generator().manual_seed(5))
    result = wider.generate(ids, max_new_tokens=40)
    assert result.sequences[0, ids.shape[1] :].tolist() == greedy(model, ids, 40)
    assert max(result.metrics.candidate_counts) <= 16
    with pytest.raises(ValueError, match="guess_ceiling applies to guess='auto'"):
        LookaheadDecoder(model, 7, 5, 7, guess_ceiling=16)
    with pytest.raises(ValueError, match="guess_ceiling must be an integer >= 1"):
        LookaheadDecoder(model, latency=FLAT, guess_ceiling=0)
