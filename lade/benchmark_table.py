"""The benchmark's committed table (issue 18, item 4): ``benchmark.csv`` from the records of
``experiments/benchmark.py``, and what is rendered from it: ``benchmark.md``, ``benchmark.png`` and the
table in README.md between ``README_START`` and ``README_END``.

The records live in ``records/{model}-{dtype}-{tokens}/`` (one setting each): ``greedy.csv`` and
``sampling.csv`` hold one row per prompt and method (``lade.suite.COLUMNS``) and ``runs.jsonl`` each
invocation's command and machine. A record's method name carries its settings
(``hf_prompt_lookup_tuned_k5``, ``auto_t0.7``); ``describe`` splits it into the table's columns.
Of the greedy rows' agreement with HF greedy, ``identical`` counts the identical outputs and
``near_tie`` the identical ones *and* those first diverging at a near-tie (``lade.divergence``), so
``near_tie >= identical``; the Markdown cell shows ``identical/prompts (near_tie - identical near-tie)``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from lade.bench_report import markdown_table
from lade.suite_report import MEASURES, measure_cells, speedup_cell, summarize

COLUMNS = [
    "model",
    "dtype",
    "dataset",
    "method",
    "tuned",
    "temperature",
    "setting",
    "baseline",
    "max_new_tokens",
    "prompts",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "median_speedup",
    "compression",
    "compression_ci_low",
    "compression_ci_high",
    "tokens_fed_per_step",
    "tokens_per_s",
    "identical",
    "near_tie",
    "machine",
]
DATASETS = ("humaneval", "mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag")
METHODS = ("hf_greedy", "hf_sampling", "hf_prompt_lookup", "plain_loop", "auto")
README_START = (
    "<!-- benchmark table: rendered by `python experiments/benchmark.py --render` from "
    "experiments/results/benchmark/benchmark.csv -->"
)
README_END = "<!-- end of benchmark table -->"


def describe(name: str) -> dict:
    """A record's method name -> ``method``, ``tuned``, ``temperature``, ``setting`` and ``baseline``
    (the method its speedup is over: HF greedy, or HF sampling at the same temperature)."""
    sampled = re.fullmatch(r"(.+)_t(\d+(?:\.\d+)?)", name)
    if sampled:
        method, temperature = sampled.group(1), float(sampled.group(2))
        return {
            "method": method,
            "tuned": False,
            "temperature": temperature,
            "setting": "",
            "baseline": "hf_sampling",
        }
    row = {"method": name, "tuned": False, "temperature": 0.0, "setting": "", "baseline": "hf_greedy"}
    lookup = re.fullmatch(r"hf_prompt_lookup(_tuned)?(?:_k(\d+))?", name)
    if lookup:
        row.update(
            method="hf_prompt_lookup", tuned=bool(lookup.group(1)), setting=f"K={lookup.group(2) or 10}"
        )
    return row


def setting_dirs(records_dir: Path) -> list[Path]:
    """The settings' records folders under ``records_dir`` (none when it does not exist)."""
    return sorted(p for p in records_dir.iterdir() if p.is_dir()) if records_dir.is_dir() else []


def setting_of(folder: Path) -> tuple[str, str, int]:
    """``(model, dtype, max_new_tokens)`` of a records folder named ``{model}-{dtype}-{tokens}``."""
    model, dtype, tokens = folder.name.rsplit("-", 2)
    return model, dtype, int(tokens)


def machines(folder: Path) -> str:
    """The machines the setting's records were measured on (``runs.jsonl``), ``"; "``-joined."""
    path = folder / "runs.jsonl"
    if not path.exists():
        return ""
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return "; ".join(dict.fromkeys(run["machine"] for run in runs))


def benchmark_table(records_dir: Path) -> pd.DataFrame:
    """``benchmark.csv``'s rows (``COLUMNS``) from every setting under ``records_dir``, sorted by
    model, dtype, dataset (``DATASETS`` order), temperature and method (``METHODS`` order)."""
    rows = []
    for folder in setting_dirs(records_dir):
        _, _, tokens = setting_of(folder)
        for phase in ("greedy", "sampling"):
            path = folder / f"{phase}.csv"
            if not path.exists():
                continue
            records = pd.read_csv(path)
            names = records.method.unique()
            # a sampled method's baseline: HF sampling at the same temperature, the name's own suffix
            baselines = {n: "hf_sampling_" + n.rsplit("_", 1)[1] for n in names if phase == "sampling"}
            for row in summarize(records, baselines).to_dict("records"):
                rows.append(
                    {**row, **describe(row["method"]), "max_new_tokens": tokens, "machine": machines(folder)}
                )
    table = pd.DataFrame(rows, columns=COLUMNS)
    if table.empty:
        return table
    order = {"dataset": DATASETS, "method": METHODS}
    keys = {
        c: table[c].map(lambda v, c=c: order[c].index(v) if v in order[c] else len(order[c])) for c in order
    }
    table = table.assign(_d=keys["dataset"], _m=keys["method"])
    table = table.sort_values(["model", "dtype", "max_new_tokens", "_d", "temperature", "_m", "tuned"])
    return table.drop(columns=["_d", "_m"]).reset_index(drop=True)


def read_table(path: Path) -> pd.DataFrame:
    """``benchmark.csv`` as ``benchmark_table`` made it (``setting`` and ``machine`` as strings)."""
    return pd.read_csv(path, dtype={"setting": str, "machine": str}, keep_default_na=True).fillna(
        {"setting": "", "machine": ""}
    )


def label(row, with_k: bool = False) -> str:
    """A row's method as a heading: ``auto``, ``HF prompt lookup K=10``, ``HF prompt lookup (tuned K)``
    (``with_k``: ``HF prompt lookup K=5 (tuned)``), ``auto T=0.7``."""
    names = {"hf_greedy": "HF greedy", "hf_prompt_lookup": "HF prompt lookup", "plain_loop": "plain loop"}
    names["hf_sampling"] = "HF sampling"
    text = names.get(row.method, row.method)
    if row.method == "hf_prompt_lookup" and row.tuned:
        text += f" {row.setting} (tuned)" if with_k else " (tuned K)"
    elif row.method == "hf_prompt_lookup":
        text += f" {row.setting}"
    return text + (f" T={row.temperature:g}" if row.temperature else "")


def headline(table: pd.DataFrame) -> str:
    """Per setting, a Markdown table: one row per dataset, one column per method other than the
    baselines, each cell its speedup over its baseline with the 95% interval."""
    blocks = []
    for (model, dtype, tokens), setting in table.groupby(["model", "dtype", "max_new_tokens"], sort=False):
        shown = setting[~setting.method.isin(["hf_greedy", "hf_sampling"])]
        columns = list(dict.fromkeys(label(r) for r in shown.itertuples()))
        prompts = (
            f"{setting.prompts.min()}-{setting.prompts.max()}"
            if setting.prompts.nunique() > 1
            else setting.prompts.iloc[0]
        )
        lines = [
            f"{model} {dtype}, {tokens} new tokens, {prompts} test prompts per dataset; measured on "
            f"{setting.machine.iloc[0]}. Speedup over HF greedy (sampling: over HF sampling at the same "
            "temperature) [95% bootstrap interval over prompts]:",
            "",
            "| dataset | " + " | ".join(columns) + " |",
            "|---|" + "---|" * len(columns),
        ]
        for dataset, rows in setting.groupby("dataset", sort=False):
            cells = {
                label(r): speedup_cell(r)
                for r in rows.itertuples()
                if r.method not in ("hf_greedy", "hf_sampling")
            }
            lines.append(f"| {dataset} | " + " | ".join(cells.get(c, "-") for c in columns) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def details(table: pd.DataFrame) -> str:
    """Every row as Markdown: model, dtype, tokens, dataset, method and prompts, then
    ``suite_report.measure_cells`` (speedup [interval], median, compression, tokens fed per step,
    tokens/s and outputs identical to HF greedy's)."""
    head = ("model", "dtype", "tokens", "dataset", "method", "prompts", *MEASURES)
    rows = [
        [r.model, r.dtype, r.max_new_tokens, r.dataset, label(r, with_k=True), r.prompts, *measure_cells(r)]
        for r in table.itertuples()
    ]
    return markdown_table(head, ["| " + " | ".join(map(str, r)) + " |" for r in rows])


def figure(table: pd.DataFrame):
    """One panel per setting: per dataset, each method's speedup over its baseline as a bar with its 95%
    interval, one colour per method in every panel, a line at 1 (as fast as the baseline); None when
    ``table`` holds only baselines."""
    from lade.figures import method_colour, pyplot

    plt = pyplot()
    shown = table[~table.method.isin(["hf_greedy", "hf_sampling"])]
    if shown.empty:
        return None
    labels = list(dict.fromkeys(label(r) for r in shown.itertuples()))
    colours = {name: method_colour(name) for name in labels}  # as in every other figure
    settings = list(shown.groupby(["model", "dtype", "max_new_tokens"], sort=False))
    fig, axes = plt.subplots(len(settings), 1, figsize=(11, 3.6 * len(settings)), squeeze=False)
    for axis, ((model, dtype, tokens), setting) in zip(axes[:, 0], settings, strict=True):
        datasets = list(dict.fromkeys(setting.dataset))
        width = 0.8 / len(labels)
        for i, name in enumerate(labels):
            rows = [r for r in setting.itertuples() if label(r) == name]
            if not rows:  # a method this setting did not run: no empty bar, no legend entry
                continue
            x = [datasets.index(r.dataset) + (i - (len(labels) - 1) / 2) * width for r in rows]
            y = [r.speedup for r in rows]
            err = [
                [max(0.0, r.speedup - r.speedup_ci_low) for r in rows],
                [max(0.0, r.speedup_ci_high - r.speedup) for r in rows],
            ]
            axis.bar(
                x, y, width, color=colours[name], label=name, yerr=err, capsize=2, error_kw={"linewidth": 0.8}
            )
        axis.axhline(1.0, color="black", linewidth=0.8)
        axis.set_xticks(range(len(datasets)), datasets)
        axis.set_ylabel("speedup over HF greedy\n(sampling: over HF sampling)")
        prompts = setting.prompts.min()
        title = (
            f"{model} {dtype}, {tokens} new tokens, >= {prompts} prompts/dataset; {setting.machine.iloc[0]}"
        )
        axis.set_title(title, fontsize=9)
        axis.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    return fig


def render_readme(readme: Path, table: pd.DataFrame) -> bool:
    """Rewrite the README's benchmark block (between ``README_START`` and ``README_END``) with
    ``headline(table)``; returns whether the README has the block."""
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        return False
    before, rest = text.split(README_START, 1)
    _, after = rest.split(README_END, 1)
    readme.write_text(f"{before}{README_START}\n{headline(table)}\n{README_END}{after}")
    return True


def render_all(out: Path, readme: Path | None = None) -> pd.DataFrame:
    """Write ``benchmark.csv``, ``benchmark.md`` and ``benchmark.png`` under ``out`` from the records
    in ``out/records`` and rewrite ``readme``'s block; returns the table."""
    benchmark_table(out / "records").to_csv(out / "benchmark.csv", index=False)
    table = read_table(out / "benchmark.csv")  # everything below is rendered from the file itself
    commands = []
    for folder in setting_dirs(out / "records"):
        runs = folder / "runs.jsonl"
        for line in runs.read_text().splitlines() if runs.exists() else []:
            run = json.loads(line)
            when = f"{run['started']}, commit {run['commit']}, {run['machine']}"
            commands.append(f"    {run['command']}    # {when}")
    text = [
        "# Benchmark: speedup over HF generate, with 95% bootstrap intervals",
        "",
        "Rendered by `python experiments/benchmark.py --render` from the records under `records/`, which",
        "these runs wrote (test-split prompts, methods alternating per prompt):",
        "",
        *commands,
        "",
        headline(table),
        "",
        "## Every row",
        "",
        details(table),
        "",
        "![benchmark](benchmark.png)",
    ]
    (out / "benchmark.md").write_text("\n".join(text) + "\n")
    fig = figure(table) if not table.empty else None
    if fig is not None:
        fig.savefig(out / "benchmark.png", dpi=110, bbox_inches="tight")
    if readme is not None:
        render_readme(readme, table)
    return table
