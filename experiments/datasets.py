"""Speedup and compression per dataset, side by side with the baselines (the setting of the
paper's main evaluation: greedy, one prompt at a time): HF ``generate`` greedy, the library's plain
loop, HF prompt lookup decoding (``prompt_lookup_num_tokens=10``), lookahead with auto W, N, G (the
library default) and the paper's W=7 N=5 G=7, alternating per prompt in one process
(``python -m lade.bench``).

    python experiments/datasets.py            # SmolLM2; HumanEval + 6 Spec-Bench categories
    python experiments/datasets.py --quick    # tiny random model, synthetic prompts

Per dataset and method: compression (new tokens / steps; HF methods: forward calls), tokens/s,
speedup over HF greedy as the ratio of total times and as the median of per-prompt ratios, and the
number of outputs identical to HF greedy.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from lade.figures import (
    figure_setting,
    identical_counts,
    markdown_table,
    method_colour,
    pyplot,
    repo_relative,
    run_command,
    write_outputs,
)

DATASETS = "humaneval,mt_bench,gsm8k,summarization,translation,qa,rag"
CONFIG = "7,5,7"  # the paper's setting for 7B models


def run(setting) -> pd.DataFrame:
    """Run the benchmark; one row per (dataset, method)."""
    out = setting.out / "bench.json"
    model = [
        "--model",
        setting.model,
        "--dtype",
        setting.dtype,
        "--dataset",
        "synthetic" if setting.quick else DATASETS,
    ]
    sized = ["--limit", str(setting.limit), "--max-new-tokens", str(setting.max_new_tokens)]
    methods = ["--methods", "hf_prompt_lookup,auto", "--config", CONFIG]
    run_command(setting, ["-m", "lade.bench", *model, *sized, *methods, "--json", repo_relative(out)])
    results = json.loads(out.read_text())
    return pd.DataFrame([{"dataset": dataset, **row} for dataset, rows in results.items() for row in rows])


def main(argv: list[str] | None = None) -> None:
    setting, _ = figure_setting("datasets", __doc__, limit=6, max_new_tokens=128, argv=argv)
    table = run(setting)
    datasets = list(dict.fromkeys(table["dataset"]))
    methods = list(dict.fromkeys(table["method"]))

    view = table.assign(identical=identical_counts(table["identical_to_hf"], table["prompts"]))[
        [
            "dataset",
            "method",
            "compression",
            "tokens_per_s",
            "speedup_vs_hf_total",
            "speedup_vs_hf_median",
            "speedup_vs_plain_total",
            "overhead_outside_forward",
            "identical",
        ]
    ]
    markdown = markdown_table(
        view,
        {
            c: ".3f"
            for c in ("compression", "speedup_vs_hf_total", "speedup_vs_hf_median", "speedup_vs_plain_total")
        }
        | {"tokens_per_s": ".1f", "overhead_outside_forward": ".1%"},
    )

    plt = pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    shown = [m for m in methods if m != "hf_greedy"]
    positions = np.arange(len(datasets))
    width = 0.8 / len(shown)
    for index, method in enumerate(shown):
        rows = table[table["method"] == method].set_index("dataset").reindex(datasets)
        colour = method_colour(method)
        axes[0].bar(positions + index * width, rows["speedup_vs_hf_total"], width, label=method, color=colour)
        axes[1].bar(positions + index * width, rows["compression"], width, label=method, color=colour)
    for axis, label in zip(
        axes, ("speedup over HF greedy (total time)", "compression (tokens / step)"), strict=True
    ):
        axis.axhline(1.0, color="k", linewidth=0.8)
        axis.set_xticks(positions + width * (len(shown) - 1) / 2, datasets, rotation=30, ha="right")
        axis.set_ylabel(label)
        axis.grid(axis="y", alpha=0.3)
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # off the bars
    figure.suptitle(
        setting.title(f"Per dataset, {setting.limit} prompts x {setting.max_new_tokens} new tokens"),
        fontsize=10,
    )
    figure.tight_layout()
    notes = [
        "HF prompt lookup's compression counts its forward calls (prefill included), as the library counts "
        "its steps (the first step is the prefill).",
        "overhead_outside_forward: median share of the library's step time spent outside the model forward.",
    ]
    write_outputs(
        setting, table, "Speedup and compression per dataset, with baselines", markdown, figure, notes
    )


if __name__ == "__main__":
    main()
