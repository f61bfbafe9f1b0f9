"""Beyond the paper: compression and speedup vs prompt length, up to 4K tokens. Longer contexts make
every forward slower (attention reads the whole cache), so the extra tokens lookahead feeds per step
cost relatively less; and a longer prompt holds more n-grams for the pool to verify.

    python experiments/prompt_length.py            # SmolLM2, prompts of 256 ... 4096 tokens
    python experiments/prompt_length.py --quick    # tiny random model, synthetic prompts

Prompts: consecutive Spec-Bench summarization articles (CNN/DailyMail) concatenated and cut to the
target length, then "Summarize the articles above." in the chat template. HF greedy, the library's
plain loop, HF prompt lookup and auto lookahead run on every prompt, alternating
(``lade.bench.run``). Speedups are reported over the whole call and over decoding alone (the call
minus one prefill, measured on the same prompt in the same rotation).
"""

from __future__ import annotations

import pandas as pd
import torch

from lade.bench import build_methods, run
from lade.data import Prompt, encode, load_spec_bench, load_synthetic
from lade.experiment import eos_ids
from lade.figures import REPO, figure_setting, identical_counts, line_panels, markdown_table, write_outputs
from lade.model import load_model

LENGTHS = "256,512,1024,2048,4096"
QUICK_LENGTHS = "16,64"
SPEC_BENCH = REPO.parent / "shared" / "data" / "spec_bench" / "question.jsonl"  # wherever this runs from
INSTRUCTION = "\n\nSummarize the articles above in a few sentences."


def long_prompts(tokenizer, length: int, count: int) -> list[torch.Tensor]:
    """``count`` prompts of about ``length`` tokens [1, ~length] (chat template included)."""
    articles = [p.text for p in load_spec_bench(SPEC_BENCH, "summarization", None)]
    overhead = encode_text(INSTRUCTION, tokenizer).shape[1]
    prompts = []
    for index in range(count):
        ids: list[int] = []
        start = index * 3  # different articles lead each prompt
        for article in articles[start:] + articles[:start]:
            ids += tokenizer(article + "\n\n").input_ids
            if len(ids) >= length - overhead:
                break
        text = tokenizer.decode(ids[: length - overhead])
        prompts.append(encode_text(text + INSTRUCTION, tokenizer))
    return prompts


def encode_text(text: str, tokenizer) -> torch.Tensor:
    """Token ids [1, T] of ``text`` as one user turn (chat template when the tokenizer has one)."""
    return encode(Prompt("long", "summarization", text=text), tokenizer, "auto")


def prefill_method(model):
    """A timed 'method' that only runs the prompt's forward (the prefill every method pays)."""

    def call(ids):
        with torch.inference_mode():
            model(ids.to(model.device), use_cache=True)
        return [], 1, float("nan"), None

    return call


def measure(model, prompts: list[torch.Tensor], max_new_tokens: int, label: str) -> list[dict]:
    """HF greedy, the plain loop, HF prompt lookup, auto and a bare prefill on ``prompts`` [1, T],
    rotating per prompt (``lade.bench.run``); one summary row per method."""
    eos = eos_ids(model)
    methods = build_methods(model, ["hf_prompt_lookup", "auto"], [], eos, max_new_tokens)
    methods["prefill"] = prefill_method(model)
    stats = run(methods, prompts, label)
    prefill = stats.pop("prefill").seconds
    reference = stats["hf_greedy"]
    rows = []
    for name, s in stats.items():
        decode = [t - p for t, p in zip(s.seconds, prefill, strict=True)]
        hf_decode = [t - p for t, p in zip(reference.seconds, prefill, strict=True)]
        rows.append(
            {
                "method": name,
                "prompts": len(prompts),
                "prompt_tokens": sum(p.shape[1] for p in prompts) / len(prompts),
                "new_tokens": sum(s.new_tokens),
                "compression": sum(s.new_tokens) / sum(s.steps),
                "tokens_per_s": sum(s.new_tokens) / sum(s.seconds),
                "speedup_vs_hf_total": sum(reference.seconds) / sum(s.seconds),
                "speedup_vs_hf_decode": sum(hf_decode) / sum(decode),
                "prefill_s": sum(prefill) / len(prefill),
                "identical": sum(o == r for o, r in zip(s.outputs, reference.outputs, strict=True)),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    setting, args = figure_setting(
        "prompt_length",
        __doc__,
        limit=3,
        max_new_tokens=64,
        quick_limit=2,
        argv=argv,
        extra=lambda p: p.add_argument(
            "--lengths", default=None, help=f"comma list of tokens (full: {LENGTHS})"
        ),
    )
    lengths = [int(n) for n in (args.lengths or (QUICK_LENGTHS if setting.quick else LENGTHS)).split(",")]
    if setting.render:
        table = pd.read_csv(setting.out / f"{setting.name}.csv")
    else:
        table = measure_lengths(setting, lengths)
    report(setting, table)


def measure_lengths(setting, lengths: list[int]) -> pd.DataFrame:
    """Every method on ``setting.limit`` prompts of each of ``lengths`` tokens: one row per length and
    method (kept in ``NAME.partial.csv`` while it runs, so a run that dies keeps what it measured)."""
    model, tokenizer = load_model(setting.model, dtype=setting.dtype)
    context = getattr(model.config, "max_position_embeddings", None)
    if context is not None and max(lengths) + setting.max_new_tokens > context:
        raise ValueError(f"--lengths up to {max(lengths)} + new tokens exceed the model's context {context}")
    setting.commands.append(
        f"(in this process) lade.bench.run: hf_greedy, plain_loop, hf_prompt_lookup, auto and a prefill "
        f"on {setting.limit} prompts of each length {lengths}, {setting.max_new_tokens} new tokens, "
        f"{setting.model}"
    )
    print(setting.commands[-1], flush=True)
    rows = []
    for length in lengths:
        if setting.quick:
            prompts = [
                encode(p, None) for p in load_synthetic(setting.limit, length=length, kind="repetitive")
            ]
        else:
            prompts = long_prompts(tokenizer, length, setting.limit)
        rows += [
            {"length": length, **row}
            for row in measure(model, prompts, setting.max_new_tokens, f"L={length}")
        ]
        table = pd.DataFrame(rows)
        table.to_csv(setting.out / f"{setting.name}.partial.csv", index=False)  # kept if the run dies
    (setting.out / f"{setting.name}.partial.csv").unlink()
    return table


def report(setting, table: pd.DataFrame) -> None:
    """The Markdown table, the figure and the notes of the measured ``table``."""
    view = table.assign(identical=identical_counts(table["identical"], table["prompts"]))
    view = view.drop(columns=["prompts", "new_tokens"])
    markdown = markdown_table(
        view,
        {
            "prompt_tokens": ".0f",
            "compression": ".3f",
            "tokens_per_s": ".1f",
            "speedup_vs_hf_total": ".3f",
            "speedup_vs_hf_decode": ".3f",
            "prefill_s": ".2f",
        },
    )
    figure = line_panels(
        table,
        "prompt_tokens",
        [
            ("compression", "compression (tokens / step)"),
            ("speedup_vs_hf_total", "speedup over HF greedy, whole call (end to end)"),
        ],
        by="method",
        xlabel="prompt length (tokens)",
        title=setting.title(f"Prompt length, {setting.max_new_tokens} new tokens"),
        skip=("hf_greedy",),
    )
    notes = [
        "speedup_vs_hf_total (the figure): ratio of whole-call times, end to end; speedup_vs_hf_decode: "
        "the same minus one prefill per prompt (prefill_s, its mean), i.e. the decoding phase alone. The "
        "subtracted prefill is an HF forward that computes logits at every prompt position, more than "
        "either method's own prefill does, so the decoding-alone ratio is biased in the library's favour.",
    ]
    write_outputs(setting, table, "Compression and speedup vs prompt length", markdown, figure, notes)


if __name__ == "__main__":
    main()
