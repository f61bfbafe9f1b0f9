"""Forward latency in float32 and bfloat16 on this machine, per built-in model: the figures behind
``dtype="auto"`` (`lade.dtype_choice`) and behind whether lookahead can pay in a dtype at all.

    python experiments/dtype_latency.py [--models smollm2,qwen2.5-coder-0.5b,qwen2.5-coder-1.5b]

For each model and dtype: seconds of one forward over S new tokens after a 256-token cache (S = 1, 2,
4, 8, 16, 32; medians of 3 rounds after a warm-up, sizes interleaved), the cost relative to S = 1, and
the dtype ``dtype="auto"`` would choose from them. Models whose packages are missing are skipped
(listed in the table). Writes ``experiments/results/dtype/dtype_latency.{csv,md}`` with the CPU's
vector extensions, the thread count, torch and the commit.
"""

from __future__ import annotations

import argparse
import gc
import subprocess
from pathlib import Path

import pandas as pd
import torch

from lade.dtype_choice import forward_seconds, seconds_per_token
from lade.machine import cpu_description
from lade.model import load_model

REPO = Path(__file__).resolve().parents[1]
SIZES = (1, 2, 4, 8, 16, 32)
CONTEXT = 256


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="smollm2,qwen2.5-coder-0.5b,qwen2.5-coder-1.5b")
    parser.add_argument("--out", default=str(REPO / "experiments/results/dtype"))
    args = parser.parse_args()
    rows, skipped = [], []
    for name in args.models.split(","):
        for dtype in (torch.float32, torch.bfloat16):
            try:
                model, _ = load_model(name, dtype=dtype)
            except ModuleNotFoundError as missing:
                skipped.append(f"{name}: {missing}")
                break
            seconds = forward_seconds(model, SIZES, CONTEXT, repeats=3)
            rows += [
                {
                    "model": name,
                    "dtype": str(dtype).removeprefix("torch."),
                    "size": size,
                    "seconds": value,
                    "relative": value / seconds[1],
                    "seconds_per_token": seconds_per_token({s: seconds[s] for s in (1, 4, 16)}),
                }
                for size, value in seconds.items()
            ]
            print(name, dtype, {s: round(v, 4) for s, v in seconds.items()}, flush=True)
            del model
            gc.collect()
    frame = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "dtype_latency.csv", index=False)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    lines = [
        "# Forward latency in float32 and bfloat16",
        "",
        f"Regenerate: `python experiments/dtype_latency.py --models {args.models}` (commit "
        f"{commit.stdout.strip()}, torch {torch.__version__}). One forward over S new tokens after a "
        f"{CONTEXT}-token cache, median of 3 rounds; CPU: {cpu_description()}. `auto` is the dtype "
        '`dtype="auto"` picks from S = 1, 4, 16 (lower predicted seconds per token, `lade.dtype_choice`).',
        "",
        "| model | dtype | S=1 | " + " | ".join(f"S={s}" for s in SIZES[1:]) + " | auto |",
        "|---|---|---|" + "---|" * (len(SIZES) - 1) + "---|",
    ]
    for model_name, by_model in frame.groupby("model", sort=False):
        best = by_model.groupby("dtype").seconds_per_token.first().idxmin()
        for dtype, part in by_model.groupby("dtype", sort=False):
            part = part.set_index("size")
            cells = [f"{part.seconds[1] * 1000:.0f} ms"] + [f"{part.relative[s]:.2f}x" for s in SIZES[1:]]
            lines.append(
                f"| {model_name} | {dtype} | " + " | ".join(cells) + f" | {'yes' if dtype == best else ''} |"
            )
    if skipped:
        lines += ["", "Skipped (not installed):", "", *[f"- {s}" for s in skipped]]
    (out / "dtype_latency.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
