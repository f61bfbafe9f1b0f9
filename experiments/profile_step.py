"""Where a decoding step's time goes: pool lookup and plan, branch/layout, mask and positions, the
model forward (LM head included), verification, proposer/pool update, cache commit.

    python experiments/profile_step.py --limit 5                       # SmolLM2, HumanEval, fp32
    python experiments/profile_step.py --config 7,5,7 --config 15,5,15

Sums ``DecodingMetrics.time_s`` over the prompts (after one warm-up generation per decoder) and prints
each stage's share of the step time, with the mean tokens fed per step and the time outside the
forward. The methods alternate per prompt, so machine noise hits them alike.
"""

from __future__ import annotations

import argparse

import torch

from lade.data import humaneval_prompts
from lade.decoding import LookaheadDecoder
from lade.model import load_model
from lade.types import STEP_STAGES
from strategies.plain import AutoregressiveProposer


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--config", action="append", default=[], help="W,N,G (repeatable)")
    args = parser.parse_args(argv)

    model, tokenizer = load_model(args.model)
    prompts = [tokenizer(text, return_tensors="pt").input_ids for text in humaneval_prompts(args.limit)]
    decoders = {
        "plain loop": LookaheadDecoder(model, 1, 2, 0, proposer=AutoregressiveProposer()),
        "auto": LookaheadDecoder(model),
    }
    for text in args.config or ["7,5,7"]:
        window, ngram, guess = (int(x) for x in text.split(","))
        decoders[f"W={window} N={ngram} G={guess}"] = LookaheadDecoder(model, window, ngram, guess)
    eos = model.generation_config.eos_token_id
    totals = {name: dict.fromkeys(STEP_STAGES, 0.0) for name in decoders}
    steps = dict.fromkeys(decoders, 0)
    fed = dict.fromkeys(decoders, 0)
    for decoder in decoders.values():
        decoder.generate(prompts[0], max_new_tokens=16, eos_token_id=eos)  # warm-up (and calibration)
    names = list(decoders)
    with torch.inference_mode():
        for i, ids in enumerate(prompts):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                m = decoders[name].generate(ids, max_new_tokens=args.max_new_tokens, eos_token_id=eos).metrics
                for stage, seconds in m.time_s.items():
                    totals[name][stage] += seconds
                steps[name] += m.steps
                fed[name] += sum(m.step_sizes)

    print(f"model={args.model} prompts={len(prompts)} (HumanEval) max_new_tokens={args.max_new_tokens}")
    print("| method | tokens fed/step | ms/step | " + " | ".join(STEP_STAGES) + " | outside forward |")
    print("|---|---|---|" + "---|" * len(STEP_STAGES) + "---|")
    for name, split in totals.items():
        total = sum(split.values())
        shares = " | ".join(f"{split[stage] / total:.1%}" for stage in STEP_STAGES)
        print(
            f"| {name} | {fed[name] / steps[name]:.1f} | {1000 * total / steps[name]:.1f} | {shares} "
            f"| {1 - split['forward'] / total:.1%} |"
        )
    return totals


if __name__ == "__main__":
    main()
