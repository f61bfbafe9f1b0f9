"""A/B: the LM head on every step token vs only on the rows that are read (``lean_logits``).

    python experiments/ab_lean_logits.py

SmolLM2, the first 8 HumanEval prompts, 128 new tokens, W=7 N=5 G=7, the two decoders alternating
per prompt in one process; prints whether outputs agree, the median per-prompt time ratio and the
median forward time per step of each.
"""

import statistics
import time

import lade
from lade.data import humaneval_prompts


def main() -> None:
    model, tok = lade.load_model("smollm2")
    eos = model.generation_config.eos_token_id
    decoders = {lean: lade.LookaheadDecoder(model, 7, 5, 7, lean_logits=lean) for lean in (True, False)}
    prompts = [tok(text, return_tensors="pt").input_ids for text in humaneval_prompts(8)]
    for decoder in decoders.values():  # warm-up
        decoder.generate(prompts[0], 8, eos_token_id=eos)
    seconds = {lean: [] for lean in decoders}
    forward = {lean: [] for lean in decoders}
    outputs = {lean: [] for lean in decoders}
    for i, ids in enumerate(prompts):
        for lean in (True, False) if i % 2 == 0 else (False, True):
            started = time.perf_counter()
            result = decoders[lean].generate(ids, 128, eos_token_id=eos)
            seconds[lean].append(time.perf_counter() - started)
            forward[lean].append(result.metrics.time_s["forward"] / result.metrics.steps)
            outputs[lean].append(result.sequences.tolist())
    ratio = statistics.median(full / lean for full, lean in zip(seconds[False], seconds[True], strict=True))
    print(f"identical outputs: {outputs[True] == outputs[False]}")
    print(f"median per-prompt time, all rows / rows read: {ratio:.3f}")
    print(
        f"median forward s/step: rows read {statistics.median(forward[True]):.4f}, "
        f"all rows {statistics.median(forward[False]):.4f}"
    )


if __name__ == "__main__":
    main()
