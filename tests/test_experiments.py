"""The paper-figure scripts (experiments/) in quick mode, and the pieces they are built from
(lade.figures, lade.scaling)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lade.figures import (
    REPO,
    FigureSetting,
    figure_setting,
    markdown_table,
    run_command,
    sweep_model_overrides,
)
from lade.scaling import candidate_shares, expected_tokens, fit, mixed_expected_tokens

SCRIPTS = [
    "scaling_law",
    "token_budget",
    "ablations",
    "sampling",
    "datasets",
    "prompt_length",
    "batch_size",
    "real_models",
    "modeled_auto",
]


def run_quick(name: str, out: Path) -> pd.DataFrame:
    """Run experiments/NAME.py --quick into out/NAME; check its three outputs; return its CSV."""
    completed = subprocess.run(
        [sys.executable, f"experiments/{name}.py", "--quick", "--out", str(out / name)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert "$ python -m lade." in completed.stdout or "(in this process)" in completed.stdout
    for suffix in (".csv", ".md", ".png"):
        assert (out / name / f"{name}{suffix}").stat().st_size > 0
    markdown = (out / name / f"{name}.md").read_text()
    assert f"experiments/{name}.py --quick" in markdown and "| " in markdown
    return pd.read_csv(out / name / f"{name}.csv")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return tmp_path_factory.mktemp("figures")


def test_every_figure_script_is_tested():
    scripts = (REPO / "experiments").glob("*.py")
    assert sorted(p.stem for p in scripts if "figure_setting(" in p.read_text()) == sorted(SCRIPTS)


def test_scaling_law_and_token_budget(outputs):
    budget = run_quick("token_budget", outputs)  # runs the scaling-law sweep in outputs/scaling_law
    table = run_quick("scaling_law", outputs)  # resumes it: every job completed before
    assert set(zip(table["window"], table["ngram"], strict=True)) == {(1, 3), (4, 3), (1, 4), (4, 4)}
    assert (table["guess"] == table["window"]).all()
    assert (table["identical"] == table["prompts"]).all()
    assert np.allclose(budget["token_budget"], (budget["window"] + budget["guess"]) * (budget["ngram"] - 1))
    assert (budget["flops_per_step"] > 0).all()
    assert 0 < table["full_acceptance"].iloc[0] < 1 and table["paper_exponent"].iloc[0] == 1.0
    assert table["nominal_exponent"].iloc[0] == 1.0  # the paper's model as stated, b = G
    assert ((0 <= table["candidates_mean"]) & (table["candidates_mean"] <= table["guess"])).all()


def test_ablations(outputs):
    table = run_quick("ablations", outputs)
    assert {
        "reference",
        "prompt_only",
        "seed_prompt",
        "guess_1",
        "gauss_seidel",
        "evict_lfu",
        "plain",
    } <= set(table["ablation"])
    assert (table["identical"] == table["prompts"]).all()
    assert (table.loc[table["ablation"] == "plain", "compression"] == 1.0).all()


def test_sampling(outputs):
    table = run_quick("sampling", outputs)
    assert sorted(table["temperature"]) == [0.0, 0.7, 1.0]
    greedy = table[table["temperature"] == 0.0]
    assert (greedy["identical"] == greedy["prompts"]).all()
    assert table.loc[table["temperature"] > 0, "identical"].isna().all()  # sampled: not comparable


def test_datasets(outputs):
    table = run_quick("datasets", outputs)
    assert list(table["method"]) == [
        "hf_greedy", "plain_loop", "hf_prompt_lookup", "auto", "lookahead W=7 N=5 G=7"
    ]  # fmt: skip
    assert (table["identical_to_hf"] == table["prompts"]).all()
    assert {"speedup_vs_hf_total", "speedup_vs_hf_median", "compression", "tokens_per_s"} <= set(table)


def test_real_models(outputs):
    table = run_quick("real_models", outputs)
    assert sorted(set(table["dtype"])) == ["bfloat16", "float32"]
    assert set(table["method"]) == {
        "hf_greedy",
        "plain_loop",
        "hf_prompt_lookup K=3",
        "hf_prompt_lookup K=10",
        "auto",
        "lookahead W=5 N=3 G=5",
        "lookahead W=7 N=5 G=7",
    }
    fp32, bf16 = table[table["dtype"] == "float32"], table[table["dtype"] == "bfloat16"]
    assert (fp32["identical_to_hf"] == fp32["prompts"]).all()
    assert (bf16["identical_to_hf"] + bf16["near_tie"] == bf16["prompts"]).all()
    assert (table["load_seconds"] > 0).all() and (table["peak_rss_mib"] >= table["rss_after_load_mib"]).all()
    assert table["machine"].str.contains("threads").all()
    rerun = subprocess.run(  # every cell is on disk: nothing is measured again
        [sys.executable, "experiments/real_models.py", "--quick", "--out", str(outputs / "real_models")],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert rerun.returncode == 0 and rerun.stdout.count("exists: skipped") == 2, rerun.stdout + rerun.stderr
    assert "$ python -m lade.bench" not in rerun.stdout
    pd.testing.assert_frame_equal(pd.read_csv(outputs / "real_models" / "real_models.csv"), table)


def test_modeled_auto(outputs):
    table = run_quick("modeled_auto", outputs)
    assert (table["identical"] == table["prompts"]).all()
    hf = table.set_index("method").loc["hf_greedy"]
    assert hf["modeled_speedup_vs_hf"] == 1.0 and hf["compression"] == 1.0
    assert {"auto", "hf_prompt_lookup K=3", "lookahead W=7 N=5 G=7"} <= set(table["method"])
    assert (table["modeled_speedup_vs_hf"] > 0).all() and (table["fed_per_token"] >= 1).all()


def test_rendering_runs_no_command(tmp_path):
    setting = FigureSetting("x", quick=True, out=tmp_path, limit=1, max_new_tokens=1, model="m", render=True)
    run_command(setting, ["-c", "raise SystemExit(3)"])  # would raise if it ran
    assert setting.commands == [] and setting.machine == "machine not recorded"


def test_a_figure_is_redrawn_from_its_results_without_measuring(outputs):
    """``--render`` (after test_prompt_length wrote its quick results, or now): no command runs, the
    .csv and .md stay as they were, the .png is drawn again."""
    for name in ("prompt_length",):  # one script: the other scripts' render path is run_command's
        folder = outputs / name
        if not (folder / f"{name}.csv").exists():
            run_quick(name, outputs)
        kept = {s: (folder / f"{name}{s}").read_bytes() for s in (".csv", ".md")}
        (folder / f"{name}.png").unlink()
        assert (folder / "machine.txt").read_text().strip()  # where the results were measured
        completed = subprocess.run(
            [sys.executable, f"experiments/{name}.py", "--quick", "--render", "--out", str(folder)],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        assert completed.returncode == 0, completed.stderr[-3000:]
        assert "$ python" not in completed.stdout and "(in this process)" not in completed.stdout
        assert {s: (folder / f"{name}{s}").read_bytes() for s in (".csv", ".md")} == kept
        assert (folder / f"{name}.png").stat().st_size > 0


def test_prompt_length(outputs):
    table = run_quick("prompt_length", outputs)
    assert sorted(set(table["length"])) == [16, 64]
    assert (table["identical"] == table["prompts"]).all()
    assert not (outputs / "prompt_length" / "prompt_length.partial.csv").exists()


def test_batch_size(outputs):
    table = run_quick("batch_size", outputs)
    assert sorted(set(table["batch_size"])) == [1, 2, 4]
    assert (table["identical_to_hf"] == table["rows"]).all()


def test_expected_tokens_is_speculative_decoding_for_one_guess():
    a, n = 0.6, 5
    assert expected_tokens(a, 1, n) == pytest.approx((1 - a**n) / (1 - a))
    assert expected_tokens(0.0, 7, 5) == 1.0 and expected_tokens(1.0, 7, 5) == 5.0
    more = expected_tokens(0.5, np.array([1, 2, 4, 8]), 5)
    assert np.all(np.diff(more) > 0) and np.all(more <= 5)


def test_fit_recovers_the_model_parameters():
    guesses, ngram = np.meshgrid([1, 2, 4, 8, 16], [3, 4, 5])
    measured = expected_tokens(0.35, guesses.ravel(), ngram.ravel(), 0.6)
    found = fit(guesses.ravel(), ngram.ravel(), measured)
    assert found["acceptance"] == pytest.approx(0.35, abs=0.002)
    assert found["exponent"] == pytest.approx(0.6, abs=0.011)
    assert found["rmse"] < 1e-2
    assert fit(guesses.ravel(), ngram.ravel(), measured, exponent=1.0)["exponent"] == 1.0
    correlated = expected_tokens(0.2, guesses.ravel(), ngram.ravel(), 0.5, continuation=0.8)
    found = fit(guesses.ravel(), ngram.ravel(), correlated, exponent=0.5, continuation=True)
    assert (found["acceptance"], found["continuation"]) == (
        pytest.approx(0.2, abs=0.002),
        pytest.approx(0.8, abs=0.002),
    )
    with pytest.raises(ValueError, match="equally long"):
        fit([1, 2], [3], [1.0, 1.1])


def test_candidate_shares_and_the_mixed_model():
    shares = candidate_shares([[0, 2, 2, 2], [1, 1], []])
    assert np.allclose(shares, [[0.25, 0, 0.75], [0, 1, 0], [0, 0, 0]])
    a, ngram = 0.3, np.array([5, 5])
    point_masses = np.array([[0, 0, 0, 1.0], [0, 1.0, 0, 0]])  # every step verifies 3, or 1, candidates
    assert np.allclose(mixed_expected_tokens(a, point_masses, ngram), expected_tokens(a, [3, 1], ngram))
    half_empty = np.array([[0.5, 0, 0, 0.5]])  # half the steps have no candidates: 1 token each
    assert mixed_expected_tokens(a, half_empty, [5]) == pytest.approx(0.5 + 0.5 * expected_tokens(a, 3, 5))
    grid = np.array([[0.2], [0.4]])  # [2, 1] parameter values: [2, 1, P] predictions
    values = mixed_expected_tokens(grid, point_masses, ngram, continuation=np.array([[0.5, 0.6]]))
    assert values.shape == (2, 2, 2)
    assert values[1, 0] == pytest.approx(expected_tokens(0.4, [3, 1], ngram, continuation=0.5))


def test_fit_with_measured_candidates_recovers_what_nominal_g_misses():
    rng = np.random.default_rng(0)
    ngram = np.repeat([3, 4, 5], 5)
    nominal = np.tile([1, 2, 4, 8, 16], 3)
    # steps verify 0..G candidates (a pool that is still filling), uniformly
    shares = candidate_shares([rng.integers(0, g + 1, size=400) for g in nominal])
    measured = mixed_expected_tokens(0.35, shares, ngram)
    found = fit(shares, ngram, measured, exponent=1.0)
    assert found["acceptance"] == pytest.approx(0.35, abs=0.002) and found["rmse"] < 1e-6
    biased = fit(nominal, ngram, measured, exponent=1.0)  # b = G overstates the guesses
    assert biased["acceptance"] < 0.34 and biased["rmse"] > found["rmse"]


def test_figure_setting_modes_and_bad_values(tmp_path):
    quick, _ = figure_setting(
        "demo", "", limit=6, max_new_tokens=64, argv=["--quick", "--out", str(tmp_path)]
    )
    assert (quick.quick, quick.limit, quick.max_new_tokens, quick.model) == (True, 2, 12, "tiny-random-llama")
    full, _ = figure_setting(
        "demo", "", limit=6, max_new_tokens=64, argv=["--out", str(tmp_path), "--limit", "3"]
    )
    assert (full.quick, full.limit, full.max_new_tokens, full.model) == (False, 3, 64, "smollm2")
    with pytest.raises(SystemExit):
        figure_setting("demo", "", limit=6, max_new_tokens=64, argv=["--limit", "0"])
    with pytest.raises(SystemExit):
        figure_setting("demo", "", limit=6, max_new_tokens=64, argv=["--quick", "--model", "smollm2"])
    assert full.dtype == "float32" and sweep_model_overrides(full) == ["model=smollm2", "logger=none"]
    bf16, _ = figure_setting(
        "demo", "", limit=6, max_new_tokens=64, argv=["--out", str(tmp_path), "--dtype", "bfloat16"]
    )
    assert sweep_model_overrides(bf16) == ["model=smollm2", "logger=none", "model.dtype=bfloat16"]
    with pytest.raises(SystemExit):
        figure_setting("demo", "", limit=6, max_new_tokens=64, argv=["--dtype", "bf16"])


def test_markdown_table_formats_and_missing_values():
    frame = pd.DataFrame({"name": ["a", "b"], "x": [1.23456, float("nan")]})
    assert markdown_table(frame, {"x": ".2f"}).splitlines() == [
        "| name | x |",
        "|---|---|",
        "| a | 1.23 |",
        "| b | - |",
    ]


def test_blas_mode_measures_each_mode_in_its_own_process(tmp_path):
    completed = subprocess.run(
        [sys.executable, "experiments/blas_mode.py", "--quick", "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    table = pd.read_csv(tmp_path / "blas_mode.csv")
    assert set(table["mode"]) == {"default", "AUTO"} and set(table["size"]) == {1, 2}
    assert (table["seconds"] > 0).all()
    markdown = (tmp_path / "blas_mode.md").read_text()
    assert "experiments/blas_mode.py --quick" in markdown
    assert "| tiny-random-llama | float32 | AUTO |" in markdown


def test_step_costs_splits_each_step_and_summarises_it(tmp_path):
    sys.path.insert(0, str(REPO / "experiments"))
    try:
        import step_costs
    finally:
        sys.path.remove(str(REPO / "experiments"))
    methods = "auto,auto_only_suffix_tree,plain_loop,fixed_3_3_3"
    quick = ["--model", "tiny-random-llama", "--datasets", "synthetic", "--limit", "2"]
    step_costs.main([*quick, "--max-new-tokens", "12", "--methods", methods, "--out", str(tmp_path)])
    steps, stages = pd.read_csv(tmp_path / "steps.csv"), pd.read_csv(tmp_path / "stages.csv")
    assert sorted(set(steps["method"])) == sorted(methods.split(",")) and len(stages) == 2 * 4
    # every call's steps commit its 12 tokens (a random model does not stop early)
    assert (steps.groupby(["method", "prompt"])["committed"].sum() == 12).all()
    assert steps.loc[steps["method"] == "plain_loop", "fed"].eq(1).all()
    branch_steps = stages.groupby("method")["branch_steps"].sum()
    assert branch_steps["plain_loop"] == 0 and branch_steps["fixed_3_3_3"] > 0
    assert steps.loc[steps["method"].isin(["plain_loop", "fixed_3_3_3"]), "planned_s"].isna().all()
    assert steps.loc[steps["method"].str.startswith("auto"), "planned_s"].gt(0).all()
    table = step_costs.summary(steps, stages).set_index("method")
    assert table.loc["plain_loop", "compression"] == 1.0
    assert table["host_share"].between(0, 1).all()
    assert (tmp_path / "summary.md").read_text().count("| synthetic |") >= 4
    with pytest.raises(ValueError, match="unknown method"):
        step_costs.build("fixed_3_3", None)
    # the curve auto planned with is kept; pinned, every auto method plans with it, and the ratios to
    # the --versus method are written (1 for itself; none for a method without a planner's prices)
    curve = json.loads((tmp_path / "latency_curve.json").read_text())
    pinned = tmp_path / "pinned"
    pinned.mkdir()
    sizes = curve["sizes"]
    curve["seconds"] = [s * (1 + size / 4) for size, s in zip(sizes, curve["seconds"], strict=True)]
    (pinned / "given.json").write_text(json.dumps({"latency": curve}))  # a calibration cache file's form
    methods = "auto,auto_without_token_recycling,plain_loop"
    args = [*quick, "--max-new-tokens", "12", "--methods", methods, "--out", str(pinned)]
    step_costs.main([*args, "--latency", str(pinned / "given.json"), "--versus", "auto"])
    assert json.loads((pinned / "latency_curve.json").read_text()) == curve  # written from the decoders'
    ratios = pd.read_csv(pinned / "versus.csv").set_index("method")
    assert ratios.loc["auto", ["wall_ratio", "planned_ratio", "modelled_ratio"]].eq(1.0).all()
    assert ratios.loc["plain_loop", "planned_ratio"] != ratios.loc["plain_loop", "planned_ratio"]  # NaN
    assert ratios.loc["auto_without_token_recycling", "planned_ratio"] > 0
    interval = ["planned_ratio_ci_low", "planned_ratio_ci_high"]  # bootstrap over the two prompts
    assert ratios.loc["auto", interval].eq(1.0).all()
    low, high = ratios.loc["auto_without_token_recycling", interval]
    assert 0 < low <= high
    assert ratios.loc["plain_loop", interval].isna().all()
    with pytest.raises(SystemExit):
        step_costs.main([*args, "--versus", "auto_only_lookahead"])


def test_switch_rules_simulate_a_switch_from_priced_steps(tmp_path):
    sys.path.insert(0, str(REPO / "experiments"))
    try:
        import switch_rules
    finally:
        sys.path.remove(str(REPO / "experiments"))
    # the call commits 2 tokens per 1 s step; the suffix tree alone 1 token per 1 s for its first 9
    # tokens, then 4 per 1 s: from the first token on, it first leads at position 29 (13 s against 14 s)
    call = switch_rules.priced_trace([1] + [2] * 20, [1.0] * 21)
    alone = switch_rules.priced_trace([1] * 9 + [4] * 8, [1.0] * 17)
    assert (call.end, alone.end, call.cost_at(2), alone.cost_at(11)) == (41, 41, 1.5, 9.5)
    assert switch_rules.cumulative(4, 1.0, stop=False)(call, alone) == 29
    assert switch_rules.cumulative(4, 1.0, stop=True)(call, alone) is None  # the call led first
    assert switch_rules.cumulative(30, 1.5, stop=False)(call, alone) is None  # never 1.5 times cheaper
    best = switch_rules.oracle(call, alone)
    assert switch_rules.switched_cost(call, alone, best) == min(
        switch_rules.switched_cost(call, alone, p) for p in range(call.end + 1)
    )
    assert switch_rules.switched_cost(call, alone, None) == call.total == 21.0
    # the script: per dataset the alone's seconds over the call's under each rule, the 'alone' rule 1
    steps = pd.DataFrame(
        [("auto", "qa", 0, i, k, s) for i, (k, s) in enumerate(zip([1] + [2] * 20, [1.0] * 21, strict=True))]
        + [(switch_rules.ALONE, "qa", 0, i, k, 1.0) for i, k in enumerate([1] * 9 + [4] * 8)],
        columns=["method", "dataset", "prompt", "step", "committed", "planned_s"],
    )
    steps.to_csv(tmp_path / "steps.csv", index=False)
    switch_rules.main(["--before", str(tmp_path), "--after", str(tmp_path), "--out", str(tmp_path / "out")])
    results = pd.read_csv(tmp_path / "out" / "switch_rules.csv").set_index(["run", "rule", "dataset"])
    assert results.loc[("before", "alone", "qa"), "ratio"] == 1.0
    ran = results.loc[("after", "the replay as it ran", "qa"), "ratio"]
    assert results.loc[("before", "none", "qa"), "ratio"] == ran == 17 / 21
    assert results.loc[("before", "oracle", "geomean"), "ratio"] >= results["ratio"].max() - 1e-12
    assert "| before | oracle |" in (tmp_path / "out" / "switch_rules.md").read_text()
