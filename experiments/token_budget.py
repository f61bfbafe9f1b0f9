"""Compression vs per-step cost (the paper's claim: decoding steps fall linearly in log(FLOPs)
per step): the compression ratio against the per-step token budget (W + G)(N - 1) and against the
FLOPs per step, log scale.

    python experiments/token_budget.py            # reads (or runs) the scaling-law sweep on SmolLM2
    python experiments/token_budget.py --quick

It uses the scaling-law sweep (experiments/scaling_law.py, same folder layout; completed jobs are
not rerun). FLOPs per step = 2 x parameters x tokens fed per step (measured: 1 + (W + G')(N - 1),
with G' <= G the candidates the pool actually had), the matmul cost of a decoder forward; the
attention over the cache adds a context-dependent term that is small at these lengths and ignored.
The paper's claim: compression grows linearly in log(FLOPs per step), for N large enough.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import scaling_law

from lade.figures import figure_setting, markdown_table, pyplot, write_outputs
from lade.model import load_model


def parameter_count(model_name: str) -> int:
    """Parameters of the model (tied input/output embeddings counted once)."""
    model, _ = load_model(model_name)
    return sum(p.numel() for p in model.parameters())


def main(argv: list[str] | None = None) -> None:
    setting, _ = figure_setting("token_budget", __doc__, limit=6, max_new_tokens=64, argv=argv)
    # the scaling-law sweep, in the scaling_law folder next to this one
    sweep_setting = replace(setting, name="scaling_law", out=setting.out.parent / "scaling_law")
    table, _ = scaling_law.run(sweep_setting)
    parameters = parameter_count(setting.model)  # the same in any dtype
    table["token_budget"] = (table["window"] + table["guess"]) * (table["ngram"] - 1)
    table["flops_per_step"] = 2.0 * parameters * table["step_tokens_mean"]

    slope, intercept = np.polyfit(np.log2(table["flops_per_step"]), table["compression"], 1)
    slopes = {  # per N: tokens/step gained per doubling of FLOPs per step
        ngram: np.polyfit(np.log2(group["flops_per_step"]), group["compression"], 1)[0]
        for ngram, group in table.groupby("ngram")
    }
    plt = pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for index, (ngram, group) in enumerate(table.groupby("ngram")):
        axes[0].plot(group["token_budget"], group["compression"], "o-", color=f"C{index}", label=f"N={ngram}")
        axes[1].plot(
            group["flops_per_step"], group["compression"], "o-", color=f"C{index}", label=f"N={ngram}"
        )
    flops = np.geomspace(table["flops_per_step"].min(), table["flops_per_step"].max(), 20)
    axes[1].plot(flops, slope * np.log2(flops) + intercept, "k:", label=f"{slope:.3f} per doubling")
    axes[0].set_xlabel("per-step token budget (W + G)(N - 1), log scale")
    axes[1].set_xlabel(f"FLOPs per step (2 x {parameters / 1e6:.0f}M params x tokens fed), log scale")
    axes[0].set_ylabel("compression ratio (tokens / step)")
    for axis in axes:
        axis.set_xscale("log", base=2)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8, loc="lower right")
    figure.suptitle(setting.title("Compression vs per-step cost"), fontsize=10)
    figure.tight_layout()

    columns = [
        "window",
        "ngram",
        "guess",
        "token_budget",
        "step_tokens_mean",
        "flops_per_step",
        "compression",
        "speedup",
    ]
    table = table[columns]
    markdown = markdown_table(
        table.assign(flops_per_step=[f"{f:.2e}" for f in table["flops_per_step"]]),
        {"compression": ".3f", "speedup": ".3f", "step_tokens_mean": ".1f"},
    )
    notes = [
        f"Least-squares line over all points: compression = {slope:.3f} x log2(FLOPs per step) "
        f"{intercept:+.2f}; per N, tokens/step gained per doubling of FLOPs: "
        + ", ".join(f"N={n}: {v:.3f}" for n, v in slopes.items())
        + ".",
        f"Parameters: {parameters:,} ({setting.model}).",
    ]
    write_outputs(setting, table, "Compression vs per-step token budget and FLOPs", markdown, figure, notes)


if __name__ == "__main__":
    main()
