"""The benchmark (issue 18): HF greedy, HF prompt lookup (K = 10 and K tuned on dev prompts), the
library's plain loop and auto, greedy, plus HF sampling against the library's sampling under auto at
T = 0.7 and 1.0, on HumanEval and the six Spec-Bench categories, test-split prompts, paired per prompt.

    MKL_CBWR=AUTO python experiments/benchmark.py                     # SmolLM2 fp32, 20 prompts each
    python experiments/benchmark.py --dtype bfloat16
    python experiments/benchmark.py --model qwen2.5-coder-1.5b --dtype bfloat16 --limit 10 --max-new-tokens 64
    python experiments/benchmark.py --render                           # only re-render from the records
    MKL_CBWR=AUTO python experiments/benchmark.py --phases sampling --temperatures 1.0

Float32 on an AMD CPU wants ``MKL_CBWR=AUTO`` set before Python starts (``lade.machine``: without it
MKL makes every multi-token step dear, for auto and HF prompt lookup alike); each run's ``machine`` in
``runs.jsonl`` says whether it was set.

A run measures one model, dtype and token budget, a *setting*, into ``records/{model}-{dtype}-{tokens}/``:
``dev.csv`` (HF prompt lookup at K = 2, 3, 5, 10 on ``--dev-limit`` dev-split prompts, from which each
dataset's K is tuned; ``--tuned-lookup SUMMARY`` takes the K from an earlier dev summary, or dev
records, instead),
``greedy.csv`` and ``sampling.csv`` (one row per prompt and method, ``lade.suite``), and ``runs.jsonl``
(each invocation's command, commit, machine and the latency curve auto planned with: each step size's
cost relative to a one-token step, as auto's plans depend on it; ``--recalibrate`` measures it afresh
first, on a machine left idle, where a cached curve might have been measured beside other work).
Prompts run index-major, so a run stopped early holds about as many prompts of every dataset, and a
rerun resumes where it stopped. Every run (and
``--render``) re-renders, from all the settings' records: ``benchmark.csv`` (one row per model, dtype,
dataset, method, tuned and temperature, with 95% bootstrap intervals over prompts, ``lade.suite_report``),
``benchmark.md``, ``benchmark.png`` and the table between the ``benchmark`` markers in README.md.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from lade.bench_methods import auto_decoder, greedy_options, plain_decoder
from lade.bench_setup import (
    SPEC_BENCH,
    SUITE_DATASETS,
    add_model_flags,
    eos_ids,
    load_bench_model,
    load_prompts,
    split_list,
    warmup_ids,
)
from lade.benchmark_table import render_all
from lade.figures import git_commit
from lade.machine import cpu_description
from lade.suite import decoder_call, hf_call, run_suite
from lade.suite_report import dev_summary, summarize, tuned_lookup_ks

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "benchmark"
LOOKUP_KS = (2, 3, 5, 10)
TEMPERATURES = (0.7, 1.0)
PHASES = ("greedy", "sampling")


def sampling_options(greedy: dict, temperature: float) -> dict:
    """``greedy``'s ``generate`` settings with sampling at ``temperature``; top-k and top-p are the
    model's generation config's, for HF and the library alike."""
    options = {k: v for k, v in greedy.items() if k not in ("temperature", "top_k", "top_p")}
    return {**options, "do_sample": True, "temperature": temperature}


def dev_methods(model, options: dict) -> dict:
    """HF greedy and HF prompt lookup at each of ``LOOKUP_KS``, named as ``tuned_lookup_ks`` reads them."""
    methods = {"hf_greedy": hf_call(model, options, keep_logits=True)}
    for k in LOOKUP_KS:
        name = "hf_prompt_lookup" if k == 10 else f"hf_prompt_lookup_k{k}"
        methods[name] = hf_call(model, options, prompt_lookup_num_tokens=k)
    return methods


def greedy_methods(model, options: dict, ks: dict[str, int], datasets: list[str], auto) -> dict:
    """Per dataset: HF greedy, HF prompt lookup at K = 10 and at the dataset's tuned K
    (``hf_prompt_lookup_tuned_k{K}``), the plain loop and ``auto`` (an auto decoder). One decoder each
    serves every dataset (a call never changes a decoder)."""
    shared = {
        "hf_greedy": hf_call(model, options, keep_logits=True),
        "hf_prompt_lookup": hf_call(model, options, prompt_lookup_num_tokens=10),
        "plain_loop": decoder_call(plain_decoder(model), options),
        "auto": decoder_call(auto, options),
    }
    lookups = {k: hf_call(model, options, prompt_lookup_num_tokens=k) for k in set(ks.values())}
    methods = {}
    for dataset in datasets:
        k = ks[dataset]
        tuned = {f"hf_prompt_lookup_tuned_k{k}": lookups[k]}
        methods[dataset] = {**dict(list(shared.items())[:2]), **tuned, **dict(list(shared.items())[2:])}
    return methods


def sampling_methods(model, options: dict, auto, temperatures=TEMPERATURES) -> dict:
    """HF sampling and the library's sampling under ``auto`` (an auto decoder), per temperature
    (``hf_sampling_t{T}``, ``auto_t{T}``: the suffix pairs a method with its baseline)."""
    methods = {}
    for t in temperatures:
        sampled = sampling_options(options, t)
        methods[f"hf_sampling_t{t}"] = hf_call(model, sampled)
        methods[f"auto_t{t}"] = decoder_call(auto, sampled)
    return methods


def curve_record(curve) -> dict:
    """The latency curve auto plans with, for ``runs.jsonl``: one-token step seconds, and each measured
    step size's cost relative to it (at the curve's context)."""
    return {
        "context": curve.context,
        "one_token_s": round(curve.seconds[0], 5),
        "relative": {
            size: round(seconds / curve.seconds[0], 3)
            for size, seconds in zip(curve.sizes, curve.seconds, strict=True)
        },
    }


def setting_dir(out: Path, model: str, dtype: str, max_new_tokens: int) -> Path:
    """``out/records/{model}-{dtype}-{tokens}``: one model, dtype and token budget's records."""
    return out / "records" / f"{Path(model).name}-{dtype}-{max_new_tokens}"


def tune(args, model, tokenizer, options: dict, folder: Path, labels: dict, warmup) -> dict[str, int]:
    """Each dataset's HF prompt lookup K: from ``--tuned-lookup``'s dev summary or dev records (this
    model and dtype's rows, ``lade.suite_report.dev_summary``), else from dev-split runs recorded in
    ``folder/dev.csv`` (run now where missing)."""
    datasets = args.datasets.split(",")
    if args.tuned_lookup is not None:
        summary = dev_summary(args.tuned_lookup, labels["model"], labels["dtype"])
    else:
        prompts = {
            d: load_prompts(d, tokenizer, args.dev_limit, args.spec_bench, split="dev") for d in datasets
        }
        methods = dict.fromkeys(datasets, dev_methods(model, options))
        run_suite(methods, prompts, folder / "dev.csv", {**labels, "split": "dev"}, warmup)
        summary = summarize(pd.read_csv(folder / "dev.csv"))
    ks = tuned_lookup_ks(summary) if not summary.empty else {}
    missing = sorted(set(datasets) - set(ks))
    if missing:
        setting = f"{labels['model']} {labels['dtype']}"
        raise ValueError(f"no HF prompt lookup rows to tune K on for {missing} ({setting})")
    return ks


def check_tuned(records: Path, ks: dict[str, int]) -> None:
    """Refuse to resume records whose tuned HF prompt lookup ran at another K than ``ks`` says now (a
    table of prompts measured at two K would report neither)."""
    if not records.exists() or records.stat().st_size == 0:
        return
    recorded = pd.read_csv(records)
    tuned = recorded[recorded.method.str.startswith("hf_prompt_lookup_tuned_k")]
    for dataset, method in tuned.groupby("dataset").method.first().items():
        if dataset in ks and method != f"hf_prompt_lookup_tuned_k{ks[dataset]}":
            raise ValueError(
                f"{records} holds {method} for {dataset}, but K is tuned to {ks[dataset]} now; "
                "tune on the same dev records, or measure into another --out"
            )


def check_attention(runs: Path, attention: str) -> None:
    """``ValueError`` when the runs logged in ``runs`` (``runs.jsonl``) measured their records with
    another attention implementation than ``attention``: one folder's prompts must not mix them. Runs
    logged before the attention was recorded used ``sdpa`` (the default then)."""
    if not runs.exists():
        return
    used = {json.loads(line).get("attn", "sdpa") for line in runs.read_text().splitlines() if line.strip()}
    if used - {attention}:
        raise ValueError(
            f"the records beside {runs} were measured with attn {sorted(used)}; pass --attn "
            f"{sorted(used)[0]} to extend them, or measure into another --out"
        )


def measure(args, argv: list[str]) -> None:
    """Run the phases of ``args`` for its setting (see the module docstring)."""
    model, tokenizer = load_bench_model(args)
    dtype = str(model.dtype).removeprefix("torch.")
    name = Path(args.model).name  # a built-in name as load_model takes it; a path or hub id: its last part
    folder = setting_dir(args.out, name, dtype, args.max_new_tokens)
    folder.mkdir(parents=True, exist_ok=True)
    check_attention(folder / "runs.jsonl", args.attn)
    device = torch.device(args.device)
    auto = auto_decoder(model, calibration_dir=args.calibration_dir)
    run = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": "python experiments/benchmark.py " + shlex.join(argv),
        "commit": git_commit(),
        "machine": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_description(),
        "torch": torch.__version__,
        "attn": args.attn,
        "latency": curve_record(auto.calibrate(refresh=args.recalibrate)),
    }
    with (folder / "runs.jsonl").open("a") as handle:
        handle.write(json.dumps(run) + "\n")
    labels = {"model": name, "dtype": dtype, "split": "test"}
    options = greedy_options(model, args.max_new_tokens, eos_ids(model))
    warmup = warmup_ids()
    datasets = args.datasets.split(",")
    prompts = {d: load_prompts(d, tokenizer, args.limit, args.spec_bench, split="test") for d in datasets}
    phases = args.phases.split(",")
    if "greedy" in phases:
        ks = tune(args, model, tokenizer, options, folder, labels, warmup)
        print(f"HF prompt lookup's tuned K: {ks}", file=sys.stderr)
        check_tuned(folder / "greedy.csv", ks)
        methods = greedy_methods(model, options, ks, datasets, auto)
        run_suite(methods, prompts, folder / "greedy.csv", labels, warmup)
    if "sampling" in phases:
        methods = dict.fromkeys(datasets, sampling_methods(model, options, auto, args.temperatures))
        run_suite(methods, prompts, folder / "sampling.csv", labels, warmup, reference=None)


def temperature_list(text: str) -> list[float]:
    """``--temperatures``: a comma list of temperatures, each > 0 (argparse reports the error)."""
    try:
        temperatures = [float(t) for t in split_list(text)]
    except ValueError:
        temperatures = []
    if not temperatures or any(t <= 0 for t in temperatures):
        raise argparse.ArgumentTypeError(f"a comma list of temperatures > 0; got {text!r}")
    return temperatures


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_model_flags(parser)
    parser.add_argument("--datasets", default=SUITE_DATASETS)
    parser.add_argument("--phases", default="greedy,sampling", help="comma list of greedy, sampling")
    parser.add_argument("--limit", type=int, default=20, help="test-split prompts per dataset")
    parser.add_argument("--dev-limit", type=int, default=3, help="dev-split prompts per dataset to tune K on")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument(
        "--tuned-lookup", type=Path, default=None, help="a dev summary.csv (or dev records) to take K from"
    )
    parser.add_argument("--spec-bench", default=str(ROOT / SPEC_BENCH))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--calibration-dir", default=None, help="auto's latency cache (default ~/.cache)")
    parser.add_argument("--recalibrate", action="store_true", help="measure auto's latency curve afresh")
    parser.add_argument(
        "--temperatures",
        type=temperature_list,
        default=list(TEMPERATURES),
        help="the sampling phase's temperatures (comma list, each > 0)",
    )
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md", help="its table is rewritten")
    parser.add_argument("--render", action="store_true", help="only re-render from the committed records")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    unknown = set(args.phases.split(",")) - set(PHASES)
    if unknown:
        parser.error(f"--phases takes {', '.join(PHASES)}; got {sorted(unknown)}")
    if not args.render:
        measure(args, argv)
    return render_all(args.out, args.readme)


if __name__ == "__main__":
    main()
