"""A/B: lookahead decoding with FlexAttention (tree masks as ``BlockMask``s, ``lade/flex.py``) next to
sdpa, and HF greedy with each, on SmolLM2 (float32) and the first HumanEval prompts.

    python experiments/ab_flex.py [--limit 5] [--max-new-tokens 64] [--config 5,3,5]

Every method runs every prompt once (after an untimed warm-up each: flex attention compiles on first
use), the order rotating per prompt. Writes ``experiments/results/flex/flex.csv`` (per prompt and
method: seconds, new tokens, steps, identical to HF greedy with sdpa) and ``flex.md`` (tokens/s, the
ratio of summed times to HF greedy with sdpa, the CPU, the commit).
"""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path

import pandas as pd
import torch

import lade
from lade.bench_methods import greedy_options
from lade.bench_setup import parse_config
from lade.data import humaneval_prompts
from lade.machine import cpu_description

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--config", type=parse_config, default=(5, 3, 5))
    parser.add_argument("--out", default=str(REPO / "experiments/results/flex"))
    args = parser.parse_args()
    sdpa, tokenizer = lade.load_model("smollm2", attn_implementation="sdpa")  # transformers' own sdpa
    flex, _ = lade.load_model("smollm2", attn_implementation="flex_attention")
    eos = [sdpa.generation_config.eos_token_id]
    options = greedy_options(sdpa, args.max_new_tokens, eos)
    prompts = [tokenizer(text, return_tensors="pt").input_ids for text in humaneval_prompts(args.limit)]
    decoders = {
        name: lade.LookaheadDecoder(model, *args.config) for name, model in (("sdpa", sdpa), ("flex", flex))
    }

    def hf(model):
        def call(ids):
            return model.generate(ids, attention_mask=torch.ones_like(ids), **options)[0].tolist(), None

        return call

    def lookahead(decoder):
        def call(ids):
            result = decoder.generate(ids, attention_mask=torch.ones_like(ids), **options)
            return result.sequences[0].tolist(), result.metrics.steps

        return call

    methods = {
        "hf_greedy sdpa": hf(sdpa),
        "hf_greedy flex": hf(flex),
        "lookahead sdpa": lookahead(decoders["sdpa"]),
        "lookahead flex": lookahead(decoders["flex"]),
    }
    rows, names = [], list(methods)
    for name, call in methods.items():  # warm-up: flex attention compiles here
        try:
            call(prompts[0])
        except Exception as error:  # torch's compiled CPU kernels can fail: record it, go on
            print(f"warm-up of {name} failed: {type(error).__name__}", flush=True)
    for i, ids in enumerate(prompts):
        outputs = {}
        for name in names[i % len(names) :] + names[: i % len(names)]:
            row = {"prompt": i, "method": name, "error": ""}
            started = time.perf_counter()
            try:
                outputs[name], row["steps"] = methods[name](ids)
                row["seconds"] = time.perf_counter() - started
                row["new_tokens"] = len(outputs[name]) - ids.shape[1]
            except Exception as error:
                row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
            rows.append(row)
            print(f"prompt {i} {name}: {row.get('seconds', float('nan')):.2f} s {row['error']}", flush=True)
        for row in rows[-len(names) :]:
            row["identical"] = row["method"] in outputs and outputs[row["method"]] == outputs.get(
                "hf_greedy sdpa"
            )
    frame = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "flex.csv", index=False)
    # Each method's speed over the prompts it completed, against HF greedy (sdpa) on the same prompts.
    done = frame[frame.error == ""]
    reference_seconds = done[done.method == "hf_greedy sdpa"].set_index("prompt").seconds
    done = done.assign(reference=done.prompt.map(reference_seconds))
    totals = done.groupby("method", sort=False).agg(
        prompts=("prompt", "count"),
        seconds=("seconds", "sum"),
        reference=("reference", "sum"),
        new_tokens=("new_tokens", "sum"),
        steps=("steps", "sum"),
        identical=("identical", "sum"),
    )
    calls = frame.groupby("method", sort=False).agg(
        failures=("error", lambda errors: int((errors != "").sum())),
        first_error=("error", lambda errors: next((e for e in errors if e), "")),
    )
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    window, ngram, guess = args.config
    lines = [
        "# FlexAttention next to sdpa",
        "",
        f"Regenerate: `python experiments/ab_flex.py --limit {args.limit} "
        f"--max-new-tokens {args.max_new_tokens} --config {window},{ngram},{guess}` "
        f"(commit {commit.stdout.strip()}, torch {torch.__version__}, "
        f"transformers {__import__('transformers').__version__}). SmolLM2-135M-Instruct float32, the first "
        f"{args.limit} HumanEval prompts, {args.max_new_tokens} new tokens, lookahead W={window} N={ngram} "
        f"G={guess}; CPU: {cpu_description()}. Methods alternate per prompt after a warm-up each. A "
        "method's speed is over the prompts it completed, its ratio against HF greedy (sdpa) on those.",
        "",
        "| method | tok/s | vs HF greedy (sdpa), ratio of summed times | compression "
        "| identical to HF greedy (sdpa) | failed calls |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        t = totals.loc[name] if name in totals.index else None
        failures = f"{calls.loc[name, 'failures']}/{args.limit}"
        if t is None or not t.seconds:
            lines.append(f"| {name} | - | - | - | - | {failures} |")
            continue
        compression = f"{t.new_tokens / t.steps:.3f}" if t.steps == t.steps and t.steps else "-"
        lines.append(
            f"| {name} | {t.new_tokens / t.seconds:.1f} | {t.reference / t.seconds:.3f}x | {compression} "
            f"| {int(t.identical)}/{int(t.prompts)} | {failures} |"
        )
    errors = calls[calls.failures > 0]
    if len(errors):
        lines += ["", "First failure per method:", ""]
        lines += [f"- {name}: `{row.first_error}`" for name, row in errors.iterrows()]
    (out / "flex.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
