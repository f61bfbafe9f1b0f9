"""The ablations (the paper's ablation of its two branches and of prompt as reference, and the
design choices around them): one factor at a time around the reference setting W=7, N=5, G=7
(Jacobi, LRU eviction, one-token keys, no prompt seeding).

    python experiments/ablations.py            # SmolLM2, HumanEval + MT-Bench
    python experiments/ablations.py --quick

Which n-grams are verified: the lookahead branch only (reference), the prompt's n-grams only
(prompt_only: no lookahead window, prompt as reference), or both (seed_prompt); G = 1 vs G = W
(guess_1); Jacobi vs Gauss-Seidel (gauss_seidel); eviction policies (evict_*); two-token keys
(key_length_2); and the baselines through the same loop (plain, prompt_lookup). It is the Hydra
experiment ``experiment=strategy_ablation`` (conf/experiment/strategy_ablation.yaml), every job
against HF greedy on the same prompts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lade.figures import (
    dataset_names,
    figure_setting,
    identical_counts,
    markdown_table,
    pyplot,
    run_sweep,
    write_outputs,
)

# the order of the table and the figure, with what each ablation changes
ABLATIONS = {
    "reference": "lookahead branch only (W=7, N=5, G=7, Jacobi, LRU)",
    "prompt_only": "prompt n-grams only (no lookahead branch)",
    "seed_prompt": "both: lookahead branch + prompt n-grams",
    "guess_1": "G = 1 instead of G = W",
    "gauss_seidel": "Gauss-Seidel proposer instead of Jacobi",
    "evict_fifo": "FIFO eviction",
    "evict_lfu": "LFU eviction",
    "evict_random": "random eviction",
    "evict_unbounded": "no eviction (unbounded buckets)",
    "key_length_2": "two-token keys",
    "plain": "plain decoding through the same loop",
    "prompt_lookup": "prompt lookup through the same loop",
}


def run(setting) -> pd.DataFrame:
    """Run (or resume) the ablation sweep; one row per (ablation, dataset)."""
    # full: the experiment sweeps data=humaneval,mt_bench; quick mode's data=synthetic overrides it
    frame = run_sweep(setting, ["experiment=strategy_ablation"])
    frame = frame.rename(columns={"tag": "ablation"})
    frame["dataset"] = dataset_names(frame)
    frame["change"] = frame["ablation"].map(ABLATIONS)
    frame["order"] = frame["ablation"].map({name: i for i, name in enumerate(ABLATIONS)})
    columns = ["ablation", "change", "dataset", "compression", "speedup", "tokens_per_s"]
    columns += ["baseline_tokens_per_s", "step_tokens_mean", "identical", "prompts", "job_dir"]
    return frame.sort_values(["order", "dataset"])[columns].reset_index(drop=True)


def main(argv: list[str] | None = None) -> None:
    setting, _ = figure_setting("ablations", __doc__, limit=5, max_new_tokens=64, argv=argv)
    table = run(setting)
    datasets = list(dict.fromkeys(table["dataset"]))

    cells = table.assign(identical=identical_counts(table["identical"], table["prompts"]))
    wide = cells.pivot(index="ablation", columns="dataset", values=["compression", "speedup", "identical"])
    wide.columns = [f"{dataset} {measure}" for measure, dataset in wide.columns]
    order = [f"{d} {m}" for d in datasets for m in ("compression", "speedup", "identical")]
    view = wide.reindex([a for a in ABLATIONS if a in wide.index])[order].reset_index()
    view.insert(1, "change", view["ablation"].map(ABLATIONS))
    markdown = markdown_table(
        view, {c: ".3f" for c in view.columns if c.endswith(("compression", "speedup"))}
    )

    plt = pyplot()
    figure, axis = plt.subplots(figsize=(9, 4))
    positions = np.arange(len(view))
    width = 0.8 / len(datasets)
    for index, dataset in enumerate(datasets):
        axis.bar(positions + index * width, view[f"{dataset} compression"], width, label=dataset)
    axis.axhline(1.0, color="k", linewidth=0.8)
    axis.set_xticks(positions + width * (len(datasets) - 1) / 2, view["ablation"], rotation=35, ha="right")
    axis.set_ylabel("compression ratio (tokens / step)")
    axis.set_title(setting.title("Ablations around W=7 N=5 G=7"), fontsize=10)
    axis.grid(axis="y", alpha=0.3)
    axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # off the bars
    notes = [
        "compression: new tokens / steps; speedup: tokens/s over HF greedy in the same job (alternating per "
        "prompt); identical: outputs equal to HF greedy token for token.",
    ]
    write_outputs(setting, table.drop(columns=["job_dir"]), "Ablations", markdown, figure, notes)


if __name__ == "__main__":
    main()
