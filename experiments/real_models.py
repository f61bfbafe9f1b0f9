"""The real-model benchmark matrix: each built-in model in each dtype, on code, chat and math, against
every baseline, with the load time and peak memory of each model and dtype.

    python experiments/real_models.py                        # the four cells below, 8 prompts x 128 tokens
    python experiments/real_models.py --cells smollm2:float32,qwen2.5-coder-0.5b:float32 --limit 4
    python experiments/real_models.py --model qwen2.5-coder-1.5b --dtype bfloat16 --limit 4   # one cell
    python experiments/real_models.py --quick                 # tiny random model in float32 and bfloat16
    python experiments/real_models.py --split test --out experiments/results/real_models/native_bf16 \
        --cells smollm2:bfloat16,qwen2.5-coder-0.5b:bfloat16      # held-out prompts, another machine's folder

A cell is one ``MODEL:DTYPE``; each runs as its own ``python -m lade.bench`` process (so its peak
memory is its own) on HumanEval, MT-Bench (its 8 categories in turn) and GSM8K, timing HF greedy, HF
prompt lookup at K = 3 and K = 10, the library's plain loop, auto, W=5 N=3 G=5 and W=7 N=5 G=7,
alternating per prompt, on the prompts of ``--split`` (``lade.data``: ``dev`` is the first quarter of
each category, where settings are tuned; ``test`` the rest; ``all``, the default, the first prompts
as the earliest cells were run). Each cell writes ``cells/MODEL_DTYPE.json``; a rerun skips the cells whose
file exists (delete one to redo it), and the table gathers every cell file in the folder, so cells
of different sizes can be run by separate invocations (each cell's command is written beside it).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from lade.data import SPLITS
from lade.figures import (
    DTYPES,
    figure_setting,
    identical_counts,
    markdown_table,
    pyplot,
    repo_relative,
    run_command,
    write_outputs,
)
from lade.machine import has_native_bf16

CELLS = "smollm2:float32,smollm2:bfloat16,qwen2.5-coder-0.5b:bfloat16,qwen2.5-coder-1.5b:bfloat16"
QUICK_CELLS = "tiny-random-llama:float32,tiny-random-llama:bfloat16"
DATASETS = "humaneval,mt_bench,gsm8k"
PROMPT_LOOKUP_K = "3,10"
CONFIGS = ("5,3,5", "7,5,7")


def parse_cells(text: str) -> list[tuple[str, str]]:
    """``"smollm2:float32,qwen2.5-coder-1.5b:bfloat16"`` -> [(model, dtype), ...]."""
    cells = []
    for item in filter(None, text.split(",")):
        model, _, dtype = item.partition(":")
        if not model or dtype not in DTYPES:
            raise SystemExit(f"--cells: expected MODEL:DTYPE with DTYPE one of {DTYPES}, got {item!r}")
        cells.append((model, dtype))
    return cells


def cell_path(out: Path, model: str, dtype: str) -> Path:
    return out / "cells" / f"{model}_{dtype}.json"


def run_cell(setting, model: str, dtype: str, datasets: str, split: str = "all") -> None:
    """Benchmark one model in one dtype into its cell file, unless that file exists already."""
    path = cell_path(setting.out, model, dtype)
    if path.exists():
        print(f"{repo_relative(path)} exists: skipped (delete it to rerun)", flush=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.json")  # renamed on success: a killed run leaves no cell
    sized = ["--limit", str(setting.limit), "--max-new-tokens", str(setting.max_new_tokens)]
    methods = ["--methods", "hf_prompt_lookup,auto", "--prompt-lookup-tokens", PROMPT_LOOKUP_K]
    configs = [arg for config in CONFIGS for arg in ("--config", config)]
    command = ["-m", "lade.bench", "--model", model, "--dtype", dtype, "--dataset", datasets]
    command += ["--split", split]
    run_command(setting, [*command, *sized, *methods, *configs, "--json", repo_relative(partial)])
    path.with_suffix(".command.txt").write_text(setting.commands[-1] + "\n")
    partial.replace(path)


def gather(out: Path) -> pd.DataFrame:
    """Every cell file under ``out/cells``: one row per (model, dtype, dataset, method)."""
    rows = []
    for path in sorted((out / "cells").glob("*.json")):
        if path.name.endswith(".partial.json"):
            continue
        for dataset, dataset_rows in json.loads(path.read_text()).items():
            rows += [{"split": "all", **row, "dataset": dataset} for row in dataset_rows]  # older: no split
    if not rows:
        raise SystemExit(f"no cell results under {out / 'cells'}")
    return pd.DataFrame(rows)


def figure_of(table: pd.DataFrame):
    """One panel per cell: speedup over HF greedy per dataset, one bar per method."""
    plt = pyplot()
    cells = list(dict.fromkeys(zip(table["model"], table["dtype"], strict=True)))
    methods = [m for m in dict.fromkeys(table["method"]) if m != "hf_greedy"]
    colours = dict(zip(methods, plt.get_cmap("tab10").colors, strict=False))
    figure, axes = plt.subplots(1, len(cells), figsize=(4.5 * len(cells), 4), squeeze=False)
    width = 0.8 / len(methods)
    for axis, (model, dtype) in zip(axes[0], cells, strict=True):
        rows = table[(table["model"] == model) & (table["dtype"] == dtype)]
        datasets = list(dict.fromkeys(rows["dataset"]))
        positions = np.arange(len(datasets))
        for index, method in enumerate(methods):
            values = rows[rows["method"] == method].set_index("dataset").reindex(datasets)
            axis.bar(positions + index * width, values["speedup_vs_hf_total"], width, color=colours[method])
        axis.axhline(1.0, color="k", linewidth=0.8)
        axis.set_xticks(positions + width * (len(methods) - 1) / 2, datasets)
        axis.set_title(f"{model} {dtype}", fontsize=9)
        axis.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("speedup over HF greedy (total time)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[m]) for m in methods]
    figure.legend(
        handles, methods, loc="lower center", ncol=len(methods), fontsize=7, bbox_to_anchor=(0.5, -0.08)
    )
    machine = table["machine"].iloc[0] if "machine" in table else "unknown machine"
    figure.suptitle(f"Real models, greedy, one prompt at a time ({machine})", fontsize=10)
    return figure


def main(argv: list[str] | None = None) -> None:
    def extra(parser):
        parser.add_argument("--cells", default=None, help=f"MODEL:DTYPE list (full: {CELLS})")
        parser.add_argument("--datasets", default=DATASETS, help=f"(default: {DATASETS})")
        parser.add_argument("--split", default="all", choices=SPLITS, help="prompt split (lade.data)")

    setting, args = figure_setting(
        "real_models",
        __doc__,
        limit=8,
        max_new_tokens=128,
        quick_limit=1,
        argv=argv,
        extra=extra,
        renders=False,
    )
    if args.quick and args.cells is not None:
        raise SystemExit("--quick runs the tiny random model; drop --cells or --quick")
    if args.cells is not None and args.model is not None:
        raise SystemExit("--cells names the models (MODEL:DTYPE); drop --model")
    one_cell = f"{args.model}:{setting.dtype}" if args.model else None  # --model [--dtype]: that cell only
    cells = parse_cells(args.cells or one_cell or (QUICK_CELLS if setting.quick else CELLS))
    datasets = "synthetic" if setting.quick else args.datasets
    for model, dtype in cells:
        run_cell(setting, model, dtype, datasets, args.split)
    setting.commands = [p.read_text().strip() for p in sorted((setting.out / "cells").glob("*.command.txt"))]

    table = gather(setting.out)
    view = table.assign(identical=identical_counts(table["identical_to_hf"], table["prompts"]))[
        [
            "model",
            "dtype",
            "dataset",
            "split",
            "method",
            "prompts",
            "new_tokens",
            "compression",
            "tokens_per_s",
            "speedup_vs_hf_total",
            "speedup_vs_plain_total",
            "identical",
            "near_tie",
            "worst_margin",
        ]
    ]
    three = ("compression", "speedup_vs_hf_total", "speedup_vs_plain_total", "worst_margin")
    markdown = markdown_table(view, {c: ".3f" for c in three} | {"tokens_per_s": ".1f"})
    resources = (
        table.groupby(["model", "dtype"], sort=False)
        .agg(
            load_seconds=("load_seconds", "first"),
            rss_after_load_mib=("rss_after_load_mib", "first"),
            peak_rss_mib=("peak_rss_mib", "max"),
        )
        .reset_index()
    )
    markdown += "\n\nLoad time and memory per model and dtype (one process per cell):\n\n" + markdown_table(
        resources, {"load_seconds": ".1f", "rss_after_load_mib": ".0f", "peak_rss_mib": ".0f"}
    )
    machines = sorted(set(table["machine"])) if "machine" in table else ["unknown"]
    notes = [
        f"Machine: {'; '.join(machines)}.",
        "speedup_vs_*_total: the method's total time over all prompts against HF greedy's (or the plain "
        "loop's), measured in the same process with methods alternating per prompt.",
        "identical: outputs token-identical to HF greedy; near_tie: of the others, how many first diverge "
        "where HF greedy's top-1 and top-2 logits differ by at most 0.5 (worst_margin: the largest such "
        "difference at a first divergence; see lade.divergence).",
        "load_seconds includes converting a packaged model the first time (later loads read the cache).",
    ]
    bf16_cells = "bfloat16" in set(table["dtype"])
    if bf16_cells and not any(has_native_bf16(m) for m in machines):
        notes.append(
            "This CPU has no native bfloat16 (no avx512_bf16 / amx_bf16): there a bf16 forward's cost grows "
            "about linearly with the tokens fed (experiments/results/dtype/dtype_latency.md), so bf16 "
            "lookahead steps cannot pay; the bf16 targets need a CPU with native bf16."
        )
    write_outputs(
        setting, table, "Real models: speedup per model, dtype and dataset", markdown, figure_of(table), notes
    )


if __name__ == "__main__":
    main()
