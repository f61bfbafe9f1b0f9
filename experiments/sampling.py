"""Sampling (the paper's lossless sampling verification): compression and speedup at temperature 0
(greedy), 0.7 and 1.0, W=7 N=5 G=7, against HF ``generate`` sampling with the same controls.

    python experiments/sampling.py            # SmolLM2, HumanEval + MT-Bench
    python experiments/sampling.py --quick

Sampled outputs are exact in distribution, not token for token (tests/test_sampling.py checks the
distribution); here only greedy rows can be compared with HF output. Higher temperatures make the
model's next token less predictable, so fewer guessed n-grams match what is sampled.
"""

from __future__ import annotations

import pandas as pd

from lade.figures import (
    dataset_names,
    figure_setting,
    identical_counts,
    line_panels,
    markdown_table,
    run_sweep,
    write_outputs,
)

TEMPERATURES = "0.7,1.0"


def run(setting) -> pd.DataFrame:
    """Greedy and sampling sweeps (two folders: one Hydra multirun each); one row per job."""
    data = [] if setting.quick else ["data=humaneval,mt_bench"]
    common = ["window=7", "ngram=5", "guess=7", *data]
    greedy = run_sweep(setting, [*common, "verifier=greedy"], folder="sweep_greedy")
    sampled = run_sweep(
        setting, [*common, "verifier=sampling", f"temperature={TEMPERATURES}"], folder="sweep_sampling"
    )
    greedy["temperature"] = 0.0
    frame = pd.concat([greedy, sampled], ignore_index=True)
    frame["dataset"] = dataset_names(frame)
    columns = ["dataset", "temperature", "compression", "speedup", "tokens_per_s", "baseline_tokens_per_s"]
    columns += ["identical", "prompts"]
    return frame[columns].sort_values(["dataset", "temperature"]).reset_index(drop=True)


def main(argv: list[str] | None = None) -> None:
    setting, _ = figure_setting("sampling", __doc__, limit=6, max_new_tokens=64, argv=argv)
    table = run(setting)
    figure = line_panels(
        table,
        "temperature",
        [
            ("compression", "compression ratio (tokens / step)"),
            ("speedup", "speedup over HF generate (same controls)"),
        ],
        by="dataset",
        xlabel="temperature (0 = greedy)",
        title=setting.title("Sampling, W=7 N=5 G=7"),
        log_x=False,
    )
    view = table.assign(
        identical=identical_counts(table["identical"], table["prompts"], missing="(sampled)")
    ).drop(columns=["prompts"])
    markdown = markdown_table(
        view, {"compression": ".3f", "speedup": ".3f", "tokens_per_s": ".1f", "baseline_tokens_per_s": ".1f"}
    )
    notes = [
        "top_k and top_p off (0 and 1.0); seed 0; the speedup's baseline samples with the same controls."
    ]
    write_outputs(setting, table, "Sampling: compression at temperature 0, 0.7, 1.0", markdown, figure, notes)


if __name__ == "__main__":
    main()
