"""The scaling law (paper Section 4, Figure 4): compression ratio vs window size W for several n-gram
sizes N, with G = W, and the paper's analytic model fitted to it.

    python experiments/scaling_law.py            # SmolLM2, MT-Bench, W = 1,2,4,8,16 x N = 3,4,5
    python experiments/scaling_law.py --quick    # tiny random model, seconds

The model (paper Section 4, after speculative decoding's E = (1 - a^(g+1)) / (1 - a)): a step
verifies b guesses of g = N - 1 tokens; if each guessed token is right with probability a and the
guesses are independent, at least i tokens are accepted with probability 1 - (1 - a^i)^b, so

    E[tokens per step] = 1 + sum_{i=1}^{N-1} (1 - (1 - a^i)^b),     b = G^k

(the 1 is the model's own token, committed at every step). The paper's reading is k = 1 (every one
of the G guesses independent): growing b exponentially grows E linearly, until N caps it. Guesses
from one lookahead window are correlated, so we fit a (token acceptance) and k (how fast the number
of effectively independent guesses grows with G) to the measured points by least squares, and
report k = 1 next to it. The lookahead branch alone feeds the pool here (no prompt seeding), so the
figure measures what the Jacobi window finds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lade.figures import figure_setting, markdown_table, pyplot, run_sweep, write_outputs

WINDOWS = "1,2,4,8,16"
NGRAMS = "3,4,5"
QUICK_WINDOWS = "1,4"
QUICK_NGRAMS = "3,4"


def sweep_overrides(quick: bool) -> list[str]:
    """The W x N grid (G = W, the config default), lookahead branch only."""
    grid = [f"window={QUICK_WINDOWS if quick else WINDOWS}", f"ngram={QUICK_NGRAMS if quick else NGRAMS}"]
    data = [] if quick else ["data=mt_bench"]  # quick mode's data is synthetic (lade.figures.QUICK_SWEEP)
    return [*data, *grid, "pool.seed_prompt=false"]


def expected_tokens(acceptance: float, guesses: np.ndarray, ngram: np.ndarray, exponent: float) -> np.ndarray:
    """The analytic tokens per step for arrays of G and N (see the module docstring)."""
    guesses = np.maximum(np.asarray(guesses, dtype=float), 1.0) ** exponent
    ngram = np.asarray(ngram)
    total = np.ones(np.broadcast(guesses, ngram).shape)
    for i in range(1, int(ngram.max())):
        total = total + np.where(i <= ngram - 1, 1 - (1 - acceptance**i) ** guesses, 0.0)
    return total


def fit(frame: pd.DataFrame, exponent: float | None = None) -> dict:
    """Least-squares fit of the acceptance a (and the exponent k unless given) to the compression
    ratios of ``frame`` (columns guess, ngram, compression), by grid search then local refinement."""
    guesses, ngram, measured = (frame[c].to_numpy(dtype=float) for c in ("guess", "ngram", "compression"))

    def error(a, k):
        return float(np.mean((expected_tokens(a, guesses, ngram, k) - measured) ** 2))

    exponents = [exponent] if exponent is not None else np.linspace(0.0, 1.5, 151)
    best = min((error(a, k), a, k) for a in np.linspace(0.001, 0.999, 999) for k in exponents)
    return {"acceptance": best[1], "exponent": best[2], "rmse": best[0] ** 0.5}


def run(setting) -> pd.DataFrame:
    """Run (or resume) the sweep; one row per (W, N) job."""
    frame = run_sweep(setting, sweep_overrides(setting.quick))
    columns = ["window", "ngram", "guess", "compression", "speedup", "tokens_per_s", "step_tokens_mean"]
    columns += ["identical", "prompts"]
    return frame[columns].sort_values(["ngram", "window"]).reset_index(drop=True)


def main(argv: list[str] | None = None) -> None:
    setting, _ = figure_setting("scaling_law", __doc__, limit=6, max_new_tokens=64, argv=argv)
    table = run(setting)
    free, paper = fit(table), fit(table, exponent=1.0)
    table["model_fitted"] = expected_tokens(
        free["acceptance"], table["guess"], table["ngram"], free["exponent"]
    )
    table["model_k1"] = expected_tokens(paper["acceptance"], table["guess"], table["ngram"], 1.0)

    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6.4, 4.2))
    dense = np.unique(np.geomspace(1, table["window"].max(), 60))
    for index, (ngram, group) in enumerate(table.groupby("ngram")):
        color = f"C{index}"
        axis.plot(group["window"], group["compression"], "o-", color=color, label=f"N={ngram} measured")
        axis.plot(
            dense,
            expected_tokens(free["acceptance"], dense, np.full_like(dense, ngram), free["exponent"]),
            "--",
            color=color,
            alpha=0.7,
            label=f"N={ngram} model",
        )
    axis.set_xscale("log", base=2)
    axis.set_xlabel("window size W (= guesses G), log scale")
    axis.set_ylabel("compression ratio (tokens / step)")
    axis.set_title(
        f"Scaling law, {setting.model}: fit a={free['acceptance']:.3f}, k={free['exponent']:.2f}", fontsize=10
    )
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8, ncol=2)

    view = table.assign(
        identical=[f"{i}/{p}" for i, p in zip(table["identical"], table["prompts"], strict=True)]
    )
    view = view.drop(columns=["prompts"])
    markdown = markdown_table(
        view,
        {c: ".3f" for c in ("compression", "speedup", "model_fitted", "model_k1")}
        | {"tokens_per_s": ".1f", "step_tokens_mean": ".1f"},
    )
    notes = [
        f"Fitted model: a = {free['acceptance']:.3f}, k = {free['exponent']:.2f} "
        f"(b = G^k effective guesses), RMSE {free['rmse']:.3f} tokens/step.",
        f"Paper's independence (k = 1): a = {paper['acceptance']:.3f}, RMSE {paper['rmse']:.3f}.",
        "compression: new tokens / steps over all prompts; speedup: tokens/s over HF greedy on the same "
        "prompts, alternating; step_tokens_mean: tokens fed per step (1 + (W + G')(N - 1), G' <= G found).",
    ]
    write_outputs(
        setting,
        table.assign(fit_acceptance=free["acceptance"], fit_exponent=free["exponent"]),
        "Scaling law: compression vs W for several N (G = W)",
        markdown,
        figure,
        notes,
    )


if __name__ == "__main__":
    main()
