"""Forward latency with ``sdpa_gqa`` (``lade.gqa_attention``) next to transformers' ``sdpa``: what the
copy of grouped key/value heads costs a step, per step size and context length.

    python experiments/gqa_latency.py [--models smollm2] [--dtypes float32,bfloat16] [--rounds 5]

For each model and dtype, the model is loaded twice (``attn_implementation="sdpa"`` and ``"sdpa_gqa"``)
and each times one forward over S new tokens after a cache of C tokens (S = 1, 2, 4, 8, 16; C = 256,
1024, 2048; ``lade.dtype_choice.forward_seconds``, with the model's own causal mask), the two
implementations alternating round by round; medians over the rounds. One new token is transformers'
own path in both (it avoids the copy there itself), so its ratio is the A/A control. Writes
``experiments/results/gqa_attention/latency.{csv,md}`` with the CPU, torch and the commit.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
from pathlib import Path

import pandas as pd
import torch

from lade.dtype_choice import forward_seconds
from lade.figures import markdown_table
from lade.gqa_attention import GQA_SDPA
from lade.machine import cpu_description
from lade.model import load_model

REPO = Path(__file__).resolve().parents[1]
SIZES = (1, 2, 4, 8, 16)
CONTEXTS = (256, 1024, 2048)
IMPLEMENTATIONS = ("sdpa", GQA_SDPA)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="smollm2")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--contexts", default=",".join(map(str, CONTEXTS)), help="cached tokens before a step"
    )
    parser.add_argument("--out", default=str(REPO / "experiments/results/gqa_attention"))
    args = parser.parse_args(argv)
    rows = []
    for name in args.models.split(","):
        for dtype in args.dtypes.split(","):
            models = {i: load_model(name, dtype=dtype, attn_implementation=i)[0] for i in IMPLEMENTATIONS}
            for context in map(int, args.contexts.split(",")):
                times = {(i, s): [] for i in IMPLEMENTATIONS for s in SIZES}
                for round_ in range(args.rounds):
                    order = IMPLEMENTATIONS if round_ % 2 == 0 else IMPLEMENTATIONS[::-1]
                    for implementation in order:
                        seconds = forward_seconds(models[implementation], SIZES, context, repeats=1)
                        for size, value in seconds.items():
                            times[implementation, size].append(value)
                for size in SIZES:
                    copy, in_place = (statistics.median(times[i, size]) for i in IMPLEMENTATIONS)
                    rows.append(
                        {
                            "model": name,
                            "dtype": dtype,
                            "context": context,
                            "size": size,
                            "sdpa_ms": round(1000 * copy, 2),
                            "sdpa_gqa_ms": round(1000 * in_place, 2),
                            "sdpa_over_sdpa_gqa": round(copy / in_place, 3),
                        }
                    )
                print(
                    name, dtype, context, [r["sdpa_over_sdpa_gqa"] for r in rows[-len(SIZES) :]], flush=True
                )
            del models
    frame = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "latency.csv", index=False)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    command = (
        f"python experiments/gqa_latency.py --models {args.models} --dtypes {args.dtypes} "
        f"--rounds {args.rounds} --contexts {args.contexts}"
    )
    header = "\n".join(
        [
            "# Forward latency: sdpa_gqa next to sdpa",
            "",
            f"`{command}` (commit {commit.stdout.strip()}, torch {torch.__version__}); "
            f"CPU: {cpu_description()}.",
            "Milliseconds of one forward over `size` new tokens after `context` cached ones,",
            "medians over the rounds, the implementations alternating; `sdpa_over_sdpa_gqa` > 1:",
            "the copy of grouped key/value heads that sdpa_gqa skips. Size 1 takes transformers'",
            "path in both (the A/A control).",
            "",
            "",
        ]
    )
    (out / "latency.md").write_text(header + markdown_table(frame) + "\n")
    print(header + markdown_table(frame))
    return frame


if __name__ == "__main__":
    main()
