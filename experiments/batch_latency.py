"""Forward latency of batched steps (B rows of S tokens) against one row of B*S tokens.

    python experiments/batch_latency.py --rows 16

Measures (or loads from the calibration cache) the one-row curve and the batch curves the auto
planner uses (``LookaheadDecoder.batch_latency``), then prints, after 256 cached tokens per row, the
milliseconds of a step of S tokens per row for each batch size next to the one-row curve at B*S
tokens (the approximation a batch would otherwise get).
"""

from __future__ import annotations

import argparse
import time

from lade import LookaheadDecoder, load_model


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--rows", type=int, default=16, help="largest batch size")
    parser.add_argument("--sizes", default="1,2,3,4,8,16", help="tokens per row")
    parser.add_argument("--context", type=int, default=256, help="cached tokens per row")
    args = parser.parse_args()
    model, _ = load_model(args.model)
    decoder = LookaheadDecoder(model)
    started = time.perf_counter()
    batch = decoder.batch_latency(args.rows)
    print(f"calibrated (or loaded) in {time.perf_counter() - started:.1f} s")
    sizes = [int(s) for s in args.sizes.split(",")]
    print("| B | " + " | ".join(f"S={s}: batch / one row of B*S (ms)" for s in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for rows in sorted(batch.curves):
        cells = [
            f"{batch(rows, s, args.context) * 1e3:.1f} / {decoder.latency(rows * s, args.context) * 1e3:.1f}"
            for s in sizes
        ]
        print(f"| {rows} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
