"""A/B: the prompt's forward (prefill) with the model's own causal masking (``_prefill``, the
decoder's way since 5998525) vs an explicit additive [T, T] mask from the chain layout (the way
before it) vs HF's plain forward, on SmolLM2 at 1,024 and 4,096 random tokens.

    python experiments/ab_prefill.py [--lengths 1024,4096] [--repeats 3]

The three run alternately, ``--repeats`` times each per length; prints median seconds and the ratios.
"""

import argparse
import statistics
import time

import torch

import lade
from lade.cache import new_cache
from lade.executor import StepExecutor
from lade.slots import KeySlots


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lengths", default="1024,4096")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model, _ = lade.load_model("smollm2")
    executor = StepExecutor(model)
    generator = torch.Generator().manual_seed(0)
    ways = {
        "model's causal masking": lambda ids: executor.prefill(ids[None], KeySlots(len(ids)), new_cache()),
        "explicit [T, T] mask": lambda ids: executor.step(
            ids[None], executor.chain(len(ids)), KeySlots(0), new_cache(), None
        ),
        "HF forward": lambda ids: model(ids[None], use_cache=True),
    }
    for length in (int(n) for n in args.lengths.split(",")):
        ids = torch.randint(100, model.config.vocab_size, (length,), generator=generator)
        seconds = {name: [] for name in ways}
        with torch.inference_mode():
            for _ in range(args.repeats):
                for name, way in ways.items():
                    started = time.perf_counter()
                    way(ids)
                    seconds[name].append(time.perf_counter() - started)
        medians = {name: statistics.median(s) for name, s in seconds.items()}
        hf = medians["HF forward"]
        print(
            f"{length} tokens: " + ", ".join(f"{n} {m:.2f} s ({m / hf:.2f}x HF)" for n, m in medians.items())
        )


if __name__ == "__main__":
    main()
