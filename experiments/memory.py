"""Peak memory of a long generation: the library's plain loop vs lookahead (auto by default).

    python experiments/memory.py --new-tokens 2048            # SmolLM2, fp32, CPU
    python experiments/memory.py --model tiny-random-llama --new-tokens 256 --config 7,5,7

Each method runs in its own fresh process (peak RSS is a per-process high-water mark), generating
exactly ``--new-tokens`` tokens (EOS ignored) after the first HumanEval prompt. Printed per method:
peak RSS, RSS after loading the model (so the generation's own growth is visible), tokens/s, and
the peak relative to the plain loop's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from lade.process_memory import peak_rss_mib, rss_mib


def child(model_name: str, method: str, new_tokens: int) -> dict:
    """Run one method in this process; return its figures."""
    import torch

    from lade.bench_methods import config_decoder, plain_decoder
    from lade.data import humaneval_prompts
    from lade.decoding import LookaheadDecoder
    from lade.model import load_model

    model, tokenizer = load_model(model_name)
    if tokenizer is not None:
        ids = tokenizer(humaneval_prompts(1)[0], return_tensors="pt").input_ids
    else:
        ids = torch.arange(1, 40)[None] % model.config.vocab_size
    if method == "plain":
        decoder = plain_decoder(model)
    elif method == "auto":
        decoder = LookaheadDecoder(model)
        decoder.calibrate()  # cached after the first run; not part of the generation's memory
    else:
        window, ngram, guess = (int(x) for x in method.split(","))
        decoder = config_decoder(model, window, ngram, guess)
    loaded = rss_mib()
    started = time.perf_counter()
    result = decoder.generate(ids, max_new_tokens=new_tokens, eos_token_id=[])
    seconds = time.perf_counter() - started
    peak = peak_rss_mib()
    return {
        "method": method,
        "new_tokens": result.metrics.new_tokens,
        "compression": result.metrics.compression_ratio,
        "tokens_per_s": result.metrics.new_tokens / seconds,
        "rss_after_load_mib": loaded,
        "peak_rss_mib": peak,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--new-tokens", type=int, default=2048)
    parser.add_argument("--config", action="append", default=[], help="W,N,G of a fixed configuration")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.model, args.child, args.new_tokens)))
        return []
    rows = []
    for method in ["plain", "auto", *args.config]:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--model",
                args.model,
                "--new-tokens",
                str(args.new_tokens),
                "--child",
                method,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"{method}: done", file=sys.stderr, flush=True)
    plain = rows[0]["peak_rss_mib"]
    print(f"model={args.model} new_tokens={args.new_tokens} (EOS ignored), one process per method")
    print("| method | new tokens | compression | tok/s | RSS after load (MiB) | peak RSS (MiB) | vs plain |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['method']} | {r['new_tokens']} | {r['compression']:.3f} | {r['tokens_per_s']:.1f} "
            f"| {r['rss_after_load_mib']:.0f} | {r['peak_rss_mib']:.0f} | {r['peak_rss_mib'] / plain:.3f}x |"
        )
    return rows


if __name__ == "__main__":
    main()
