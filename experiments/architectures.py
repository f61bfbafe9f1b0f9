"""Every causal-LM architecture of the installed transformers, as a tiny random model: is lookahead
decoding token-identical to HF greedy, refused with a ``ValueError`` naming the cause, or not testable
here (no tiny model could be built, or HF's own ``generate`` fails on it)? The check of
``tests/test_architectures.py`` (``tests.tiny_architectures.check``: W=5 N=3 G=5, 24 new tokens), as a table.

    python experiments/architectures.py [--out experiments/results/architectures]

Writes ``architectures.csv`` (one row per architecture: outcome, reason, compression) and
``architectures.md`` (the counts per outcome, the refusals grouped by cause, the commit).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import pandas as pd
import torch
import transformers

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.tiny_architectures import ARCHITECTURES, NEW_TOKENS, check  # noqa: E402


def cause(reason: str) -> str:
    """A refusal's cause, without the class name: what groups refusals in the table."""
    for marker in (
        "layer types",
        "takes no position_ids",
        "takes no KV cache",
        "takes no attention_mask",
        "recurrent state",
        "does not decode causally",
        "failed on a lookahead step",
    ):
        if marker in reason:
            return marker
    return reason[:60]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default=str(REPO / "experiments/results/architectures"))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    rows = []
    for i, model_type in enumerate(ARCHITECTURES):
        rows.append(check(model_type))
        print(
            f"{i + 1}/{len(ARCHITECTURES)} {model_type}: {rows[-1]['outcome']}", file=sys.stderr, flush=True
        )
    frame = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "architectures.csv", index=False)
    counts = Counter(frame["outcome"])
    refused = frame[frame["outcome"] == "refused"]
    causes = Counter(refused["reason"].map(cause))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    lines = [
        "# Lookahead decoding across transformers' causal-LM architectures",
        "",
        f"Regenerate: `python experiments/architectures.py` (commit {commit.stdout.strip()}, "
        f"transformers {transformers.__version__}, torch {torch.__version__}). Every entry of "
        "`MODEL_FOR_CAUSAL_LM_MAPPING_NAMES` as a tiny random model (`tests/tiny_architectures.py`), "
        f"W=5 N=3 G=5, {NEW_TOKENS} new tokens after a 12-token prompt, greedy, the model's default "
        "attention.",
        "",
        "| outcome | architectures |",
        "|---|---|",
        *(f"| {outcome} | {count} |" for outcome, count in counts.most_common()),
        f"| all | {len(frame)} |",
        "",
        "Refusals by cause:",
        "",
        "| cause | architectures |",
        "|---|---|",
        *(f"| {c} | {n} |" for c, n in causes.most_common()),
        "",
        "Per architecture: `architectures.csv` (outcome, reason, compression).",
    ]
    (out / "architectures.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
