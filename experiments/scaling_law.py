"""The scaling law (the paper's scaling-law analysis): compression ratio vs window size W for several n-gram
sizes N, with G = W, and the paper's analytic model fitted to it.

    python experiments/scaling_law.py            # SmolLM2, MT-Bench, W = 1,2,4,8,16 x N = 3,4,5
    python experiments/scaling_law.py --quick    # tiny random model, seconds

The model (lade/scaling.py, after the paper's): E[tokens per step] = 1 + sum_{i=1}^{N-1} (1 - (1 - a^i)^b)
for b = G independent guesses whose tokens are each right with probability a. We fit it, and two
relaxations: b = G^k (guesses from one window are correlated) and a guess's first i tokens right with
probability a * c^(i-1) (once a guess starts right it tends to stay right), and report all three.
The lookahead branch alone feeds the pool here (no prompt seeding), so the figure measures what the
Jacobi window finds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lade.figures import figure_setting, identical_counts, markdown_table, pyplot, run_sweep, write_outputs
from lade.scaling import expected_tokens, fit

WINDOWS = "1,2,4,8,16"
NGRAMS = "3,4,5"
QUICK_WINDOWS = "1,4"
QUICK_NGRAMS = "3,4"


def sweep_overrides(quick: bool) -> list[str]:
    """The W x N grid (G = W, the config default), lookahead branch only."""
    grid = [f"window={QUICK_WINDOWS if quick else WINDOWS}", f"ngram={QUICK_NGRAMS if quick else NGRAMS}"]
    data = [] if quick else ["data=mt_bench"]  # quick mode's data is synthetic (lade.figures.QUICK_SWEEP)
    return [*data, *grid, "pool.seed_prompt=false"]


def run(setting) -> pd.DataFrame:
    """Run (or resume) the sweep; one row per (W, N) job."""
    frame = run_sweep(setting, sweep_overrides(setting.quick))
    columns = ["window", "ngram", "guess", "compression", "speedup", "tokens_per_s", "step_tokens_mean"]
    columns += ["identical", "prompts"]
    return frame[columns].sort_values(["ngram", "window"]).reset_index(drop=True)


def main(argv: list[str] | None = None) -> None:
    setting, _ = figure_setting("scaling_law", __doc__, limit=6, max_new_tokens=64, argv=argv)
    table = run(setting)
    points = (table["guess"], table["ngram"], table["compression"])
    paper = fit(*points, exponent=1.0)  # the paper's model: b = G independent guesses, P(i right) = a^i
    free = fit(*points)  # b = G^k effective guesses
    full = fit(*points, continuation=True)  # and P(first i right) = a * c^(i-1)
    table["model_paper"] = expected_tokens(paper["acceptance"], table["guess"], table["ngram"])
    table["model_fitted"] = expected_tokens(
        full["acceptance"], table["guess"], table["ngram"], full["exponent"], full["continuation"]
    )

    plt = pyplot()
    # two panels, the measurements in both: the fitted model (left) and the paper's (right), whose
    # curves drawn together overlapped the fitted ones
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    dense = np.unique(np.geomspace(1, table["window"].max(), 60))
    models = (
        (f"fitted: a={full['acceptance']:.3f} c={full['continuation']:.2f} k={full['exponent']:.2f}", full),
        (f"paper's model (b = G independent guesses): a={paper['acceptance']:.3f}", paper),
    )
    if paper["acceptance"] ** 2 < 0.01:  # its later levels add ~nothing: one curve for every N
        models = (models[0], (models[1][0] + " (the N curves coincide: a^2 ~ 0)", paper))
    for axis, (label, found) in zip(axes, models, strict=True):
        for index, (ngram, group) in enumerate(table.groupby("ngram")):
            color = f"C{index}"
            axis.plot(group["window"], group["compression"], "o", color=color, label=f"N={ngram} measured")
            curve = expected_tokens(
                found["acceptance"], dense, ngram, found.get("exponent", 1.0), found.get("continuation")
            )
            axis.plot(dense, curve, "--", color=color, alpha=0.8, label=f"N={ngram} model")
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
        {c: ".3f" for c in ("compression", "speedup", "model_fitted", "model_paper")}
        | {"tokens_per_s": ".1f", "step_tokens_mean": ".1f"},
    )
    notes = [
        f"The paper's model (b = G independent guesses, each token right with probability a): "
        f"a = {paper['acceptance']:.3f}, RMSE {paper['rmse']:.3f} tokens/step (column model_paper).",
        f"With b = G^k effective guesses: a = {free['acceptance']:.3f}, k = {free['exponent']:.2f}, "
        f"RMSE {free['rmse']:.3f}.",
        f"With b = G^k and a guess's first i tokens right with probability a * c^(i-1): "
        f"a = {full['acceptance']:.3f}, c = {full['continuation']:.2f}, k = {full['exponent']:.2f}, "
        f"RMSE {full['rmse']:.3f} (column model_fitted, dashed in the figure).",
        "compression: new tokens / steps over all prompts; speedup: tokens/s over HF greedy on the same "
        "prompts, alternating; step_tokens_mean: tokens fed per step (1 + (W + G')(N - 1), G' <= G found).",
    ]
    fits = {
        f"{name}_{key}": value
        for name, found in (("paper", paper), ("free", free), ("full", full))
        for key, value in found.items()
    }
    title = "Scaling law: compression vs W for several N (G = W)"
    write_outputs(setting, table.assign(**fits), title, markdown, figure, notes)


if __name__ == "__main__":
    main()
