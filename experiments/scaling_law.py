"""The scaling law (the paper's scaling-law analysis): compression ratio vs window size W for several n-gram
sizes N, with G = W, and the paper's analytic model fitted to it.

    python experiments/scaling_law.py            # SmolLM2, MT-Bench, W = 1,2,4,8,16 x N = 3,4,5
    python experiments/scaling_law.py --quick    # tiny random model, seconds
    python experiments/scaling_law.py --render   # redraw from the committed results

The model (lade/scaling.py, after the paper's): E[tokens per step] = 1 + sum_{i=1}^{N-1} (1 - (1 - a^i)^b)
for b independent guesses whose tokens are each right with probability a. The paper sets b = G; but a
step verifies only the candidates the pool holds for its key, often far fewer than G, so every fit here
takes b from the candidates each step actually verified (the per-step counts in each job's steps.csv,
the model averaged over them), and the paper's b = G is reported beside it. We fit the model and two
relaxations: b^k effective guesses (guesses from one window are correlated) and a guess's first i
tokens right with probability a * c^(i-1) (once a guess starts right it tends to stay right).
The lookahead branch alone feeds the pool here (no prompt seeding), so the figure measures what the
Jacobi window finds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lade.figures import figure_setting, identical_counts, markdown_table, pyplot, run_sweep, write_outputs
from lade.results import load_steps
from lade.scaling import candidate_shares, expected_tokens, fit, mixed_expected_tokens

WINDOWS = "1,2,4,8,16"
NGRAMS = "3,4,5"
QUICK_WINDOWS = "1,4"
QUICK_NGRAMS = "3,4"


def sweep_overrides(quick: bool) -> list[str]:
    """The W x N grid (G = W, the config default), lookahead branch only."""
    grid = [f"window={QUICK_WINDOWS if quick else WINDOWS}", f"ngram={QUICK_NGRAMS if quick else NGRAMS}"]
    data = [] if quick else ["data=mt_bench"]  # quick mode's data is synthetic (lade.figures.QUICK_SWEEP)
    return [*data, *grid, "pool.seed_prompt=false"]


def run(setting) -> tuple[pd.DataFrame, np.ndarray]:
    """Run (or resume) the sweep; one row per (W, N) job, and [jobs, K] the share of each job's steps
    that verified b = 0..K-1 candidates (``lade.scaling.candidate_shares``)."""
    frame = run_sweep(setting, sweep_overrides(setting.quick))
    frame = frame.sort_values(["ngram", "window"]).reset_index(drop=True)
    steps = load_steps(setting.out / "sweep")  # its job_dir column names the folders as frame's
    if "candidates" not in steps or steps["candidates"].isna().any():
        stale = setting.out / "sweep"
        raise RuntimeError(f"{stale} has jobs without per-step candidate counts (older): delete it, rerun")
    counts = {job: job_steps["candidates"].to_numpy() for job, job_steps in steps.groupby("job_dir")}
    shares = candidate_shares([counts[job] for job in frame["job_dir"]])
    columns = ["window", "ngram", "guess", "candidates_mean", "compression", "speedup", "tokens_per_s"]
    columns += ["step_tokens_mean", "identical", "prompts"]
    return frame[columns], shares


def main(argv: list[str] | None = None) -> None:
    setting, _ = figure_setting("scaling_law", __doc__, limit=6, max_new_tokens=64, argv=argv)
    table, shares = run(setting)
    ngram, compression = table["ngram"], table["compression"]
    nominal = fit(table["guess"], ngram, compression, exponent=1.0)  # the paper's model as stated: b = G
    paper = fit(shares, ngram, compression, exponent=1.0)  # b = the candidates each step verified
    free = fit(shares, ngram, compression)  # b^k effective guesses
    full = fit(shares, ngram, compression, continuation=True)  # and P(first i right) = a * c^(i-1)
    table["model_nominal_g"] = expected_tokens(nominal["acceptance"], table["guess"], ngram)
    table["model_paper"] = mixed_expected_tokens(paper["acceptance"], shares, ngram)
    table["model_fitted"] = mixed_expected_tokens(
        full["acceptance"], shares, ngram, full["exponent"], full["continuation"]
    )

    plt = pyplot()
    # two panels, the measurements in both: the fitted model (left) and the paper's (right); each
    # model is evaluated at the measured points only, where the candidates verified are known
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    fitted = f"fitted: a={full['acceptance']:.3f} c={full['continuation']:.2f} k={full['exponent']:.2f}"
    models = (
        (fitted, "model_fitted"),
        (f"paper's model, b = candidates verified: a={paper['acceptance']:.3f}", "model_paper"),
    )
    for axis, (label, column) in zip(axes, models, strict=True):
        for index, (n, group) in enumerate(table.groupby("ngram")):
            color = f"C{index}"
            axis.plot(group["window"], group["compression"], "o", color=color, label=f"N={n} measured")
            axis.plot(group["window"], group[column], "--", color=color, alpha=0.8, label=f"N={n} model")
        axis.set_xscale("log", base=2)
        axis.set_xlabel("window size W (= guesses G), log scale")
        axis.set_title(label, fontsize=9)
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("compression ratio (tokens / step)")
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    figure.suptitle(setting.title("Scaling law: compression vs W for several N (G = W)"), fontsize=10)
    figure.tight_layout()

    view = table.assign(identical=identical_counts(table["identical"], table["prompts"])).drop(
        columns=["prompts"]
    )
    markdown = markdown_table(
        view,
        {c: ".3f" for c in ("compression", "speedup", "model_nominal_g", "model_paper", "model_fitted")}
        | {"tokens_per_s": ".1f", "step_tokens_mean": ".1f", "candidates_mean": ".2f"},
    )
    notes = [
        "candidates_mean: candidates verified per step, G at most; fewer while the pool holds fewer "
        "n-grams for the step's key. Every fit below takes b from each step's count (the model averaged "
        "over the steps), except the first.",
        f"The paper's model as stated (b = G independent guesses, each token right with probability a): "
        f"a = {nominal['acceptance']:.3f}, RMSE {nominal['rmse']:.3f} tokens/step (column model_nominal_g).",
        f"The paper's model with b = the candidates each step verified: a = {paper['acceptance']:.3f}, "
        f"RMSE {paper['rmse']:.3f} (column model_paper, right panel).",
        f"With b^k effective guesses: a = {free['acceptance']:.3f}, k = {free['exponent']:.2f}, "
        f"RMSE {free['rmse']:.3f}.",
        f"With b^k and a guess's first i tokens right with probability a * c^(i-1): "
        f"a = {full['acceptance']:.3f}, c = {full['continuation']:.2f}, k = {full['exponent']:.2f}, "
        f"RMSE {full['rmse']:.3f} (column model_fitted, left panel).",
        "compression: new tokens / steps over all prompts; speedup: tokens/s over HF greedy on the same "
        "prompts, alternating; step_tokens_mean: tokens fed per step (1 + W(N - 1) + the candidates' "
        "token-trie nodes).",
    ]
    fits = {
        f"{name}_{key}": value
        for name, found in (("nominal", nominal), ("paper", paper), ("free", free), ("full", full))
        for key, value in found.items()
    }
    title = "Scaling law: compression vs W for several N (G = W)"
    write_outputs(setting, table.assign(**fits), title, markdown, figure, notes)


if __name__ == "__main__":
    main()
