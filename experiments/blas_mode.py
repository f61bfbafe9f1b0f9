"""Forward latency under MKL's default dispatch and under ``MKL_CBWR=AUTO``: what a multi-token step
costs relative to a one-token step in each (``lade.machine``).

    python experiments/blas_mode.py                    # SmolLM2 float32, 3 rounds per mode
    python experiments/blas_mode.py --models smollm2,qwen2.5-coder-0.5b --dtypes float32,bfloat16
    python experiments/blas_mode.py --quick --out /tmp/blas   # tiny random model, one round (CI)

MKL reads ``MKL_CBWR`` once, when it loads, so every (round, mode) is a fresh Python process with the
variable set or removed; modes alternate round by round, so slow spells of the shared machine hit
both. Each process times one forward over S new tokens after a 256-token cache
(``lade.dtype_choice.forward_seconds``: medians of 3 repeats after a warm-up, sizes interleaved).
Writes ``blas_mode.csv`` (one row per mode, round, model, dtype and S) and ``blas_mode.md`` (the
median over rounds of each S's cost relative to S = 1, and S = 1's milliseconds) under ``--out``,
with the CPU, torch and the commit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import torch

from lade.figures import git_commit
from lade.machine import MKL_MODE_VARIABLE, cpu_description

REPO = Path(__file__).resolve().parents[1]
SIZES = (1, 2, 3, 4, 8, 16, 32, 64)
CONTEXT = 256
DEFAULT = "default"  # the mode name for MKL_CBWR removed from the environment


def measure(models: list[str], dtypes: list[str], sizes: tuple[int, ...]) -> list[dict]:
    """In this process: seconds per forward for every model, dtype and size (``forward_seconds``)."""
    from lade.dtype_choice import forward_seconds
    from lade.model import load_model

    rows = []
    for name in models:
        for dtype in dtypes:
            model, _ = load_model(name, dtype=dtype)
            seconds = forward_seconds(model, sizes, CONTEXT, repeats=3)
            rows += [{"model": name, "dtype": dtype, "size": s, "seconds": v} for s, v in seconds.items()]
    return rows


def in_mode(mode: str, models: list[str], dtypes: list[str], sizes: tuple[int, ...]) -> list[dict]:
    """``measure`` in a fresh process whose environment has ``MKL_CBWR=mode`` (``DEFAULT``: unset)."""
    env = {k: v for k, v in os.environ.items() if k != MKL_MODE_VARIABLE}
    if mode != DEFAULT:
        env[MKL_MODE_VARIABLE] = mode
    command = [sys.executable, __file__, "--worker", "--models", ",".join(models)]
    command += ["--dtypes", ",".join(dtypes), "--sizes", ",".join(map(str, sizes))]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the {mode} worker failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(frame: pd.DataFrame, command: str) -> str:
    """The markdown table: per model, dtype and mode, S = 1's milliseconds and each S's median cost
    relative to S = 1 (each round's ratio, then the median over rounds)."""
    keys = ["mode", "round", "model", "dtype"]
    one = frame[frame["size"] == 1][[*keys, "seconds"]].rename(columns={"seconds": "one"})
    frame = frame.merge(one, on=keys).assign(relative=lambda f: f["seconds"] / f["one"])
    sizes = sorted(frame["size"].unique())
    rounds = frame["round"].nunique()
    lines = [
        "# Forward latency by MKL mode",
        "",
        f"Regenerate: `{command}` (commit {git_commit()}, torch {torch.__version__}). One forward "
        f"over S new tokens after a {CONTEXT}-token cache; per mode, {rounds} fresh processes alternating "
        f"with the other mode's; medians over them. CPU: {cpu_description()} "
        f"(without `{MKL_MODE_VARIABLE}`).",
        "",
        "| model | dtype | mode | S=1 | " + " | ".join(f"S={s}" for s in sizes[1:]) + " |",
        "|---|---|---|---|" + "---|" * (len(sizes) - 1),
    ]
    for (model, dtype, mode), part in frame.groupby(["model", "dtype", "mode"], sort=False):
        medians = part.groupby("size")[["seconds", "relative"]].median()
        cells = [f"{medians.seconds[1] * 1000:.1f} ms"]
        cells += [f"{medians.relative[s]:.2f}x" for s in sizes[1:]]
        lines.append(f"| {model} | {dtype} | {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="smollm2")
    parser.add_argument("--dtypes", default="float32")
    parser.add_argument("--modes", default=f"{DEFAULT},AUTO", help=f"'{DEFAULT}' (unset) or MKL_CBWR values")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--out", type=Path, default=REPO / "experiments" / "results" / "blas_mode")
    parser.add_argument("--quick", action="store_true", help="tiny random model, one round, S = 1, 2")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    models, dtypes = args.models.split(","), args.dtypes.split(",")
    sizes = tuple(int(s) for s in args.sizes.split(","))
    if args.quick:
        models, rounds, sizes = ["tiny-random-llama"], 1, (1, 2)
    else:
        rounds = args.rounds
    if 1 not in sizes:
        parser.error("--sizes must include 1 (costs are relative to a one-token step)")
    if args.worker:
        print(json.dumps(measure(models, dtypes, sizes)))
        return
    rows = []
    for round_ in range(rounds):
        for mode in args.modes.split(","):
            measured = in_mode(mode, models, dtypes, sizes)
            rows += [{"mode": mode, "round": round_, **row} for row in measured]
            print(
                f"round {round_} {mode}: "
                + ", ".join(f"{r['size']}:{r['seconds'] * 1000:.1f}ms" for r in measured),
                flush=True,
            )
    frame = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out / "blas_mode.csv", index=False)
    text = report(frame, " ".join(["python experiments/blas_mode.py", *argv]))
    (args.out / "blas_mode.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
