"""One experiment job: a configured lookahead decoder against the model's own greedy decoding.

Both run on the same prompts in the same process, alternating which goes first from prompt to
prompt, so the speedup is a ratio measured side by side. ``run_job`` is independent of Hydra's
runtime (``lade.sweep`` wraps it), so notebooks and tests can call it on a composed config.
"""

from __future__ import annotations

import math
import statistics
import time

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from tqdm.auto import tqdm

from lade.config import Components
from lade.data import encode, left_pad, row_outputs
from lade.decoding import LookaheadDecoder, default_pad_id
from lade.divergence import Divergence, compare, row_logits
from lade.divergence import summarize as summarize_divergences
from lade.model_cache import ModelCache
from lade.tracking import BatchCheckpoint
from lade.types import STEP_STAGES

WARMUP_TOKENS = 8


def call_options(model, eos: list[int], sampling: dict | None) -> dict:
    """The ``generate`` keyword arguments of a job's calls, given alike to ``model.generate`` and to the
    lookahead decoder, so both resolve the same settings from the model's generation config: greedy
    (sampling controls unset: they do nothing then but make transformers warn) or sampling with the
    job's controls."""
    controls = (
        {"do_sample": True, **sampling}
        if sampling is not None
        else {"do_sample": False, "top_k": None, "top_p": None, "temperature": None}
    )
    return {"eos_token_id": eos, "pad_token_id": default_pad_id(model, eos), **controls}


class HFBaseline:
    """``model.generate``: greedy (the reference for identical outputs) or, given sampling
    controls, plain sampling with the same controls as the lookahead job. A greedy call keeps the
    raw logits ``generate`` computed (``logits``: one ``[B, V]`` tensor per new token), the reference
    for `lade.divergence`."""

    def __init__(self, model, eos_token_id: list[int], sampling: dict | None = None):
        self.model = model
        self.eos = eos_token_id
        self.greedy = sampling is None
        self.options = call_options(model, eos_token_id, sampling)
        self.logits: tuple[torch.Tensor, ...] = ()

    def __call__(self, input_ids: torch.Tensor, max_new_tokens: int, attention_mask=None) -> list[list[int]]:
        """New tokens of each row of ``input_ids`` [B, T] (left-padded per ``attention_mask``)."""
        out = self.model.generate(
            input_ids,
            attention_mask=torch.ones_like(input_ids) if attention_mask is None else attention_mask,
            max_new_tokens=max_new_tokens,
            return_dict_in_generate=True,
            output_logits=self.greedy,
            **self.options,
        )
        self.logits = out.logits if self.greedy else ()
        return row_outputs(out.sequences, input_ids.shape[1], self.eos, max_new_tokens)


def near_ties(prompt_rows: list[dict], greedy: bool) -> dict:
    """``near_tie`` (diverging outputs whose first divergence was a near-tie) and ``worst_margin``
    over a job's prompts (None for sampling jobs, whose outputs differ by design)."""
    if not greedy:
        return {"near_tie": None, "worst_margin": None}
    divergences = [
        Divergence(row["divergence_position"], row["divergence_margin"])
        for row in prompt_rows
        if row["divergence_position"] is not None
    ]
    summary = summarize_divergences(divergences)
    return {"near_tie": summary["near_tie"], "worst_margin": summary["worst_margin"]}


def sampling_controls(cfg: DictConfig) -> dict | None:
    """The HF ``generate`` sampling keywords of a ``verifier=sampling`` job, None for greedy. A control
    left null is not passed: ``generate`` and the decoder both take it from the model's generation
    config (``top_k``: 50 where that config has none), so a job's parameters list only those set."""
    if not cfg.verifier["_target_"].endswith("SamplingVerifier"):
        return None
    names = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty")
    return {name: cfg.verifier[name] for name in names if cfg.verifier.get(name) is not None}


def eos_ids(model) -> list[int]:
    """The model's EOS ids from its generation config, as a list."""
    eos = getattr(model.generation_config, "eos_token_id", None)
    return [] if eos is None else [eos] if isinstance(eos, int) else list(eos)


def describe(cfg: DictConfig) -> dict:
    """The job's parameters: one flat dict, the columns a sweep varies."""
    pool_options = ("key_length", "seed_prompt", "seed_output", "selection", "persistent")
    return {
        "tag": cfg.get("tag", ""),
        "model": cfg.model.get("name_or_path"),
        "data": cfg.data["_target_"].rsplit(".", 1)[-1].removeprefix("load_"),
        "category": str(cfg.data.get("category")) if cfg.data.get("category") is not None else None,
        "proposer": cfg.proposer["_target_"].rsplit(".", 1)[-1],
        "guesses": cfg.proposer.get("guesses"),
        "pool": cfg.pool["_target_"].rsplit(".", 1)[-1],
        "eviction": cfg.pool.eviction["_target_"].rsplit(".", 1)[-1] if "eviction" in cfg.pool else None,
        **{option: cfg.pool.get(option) for option in pool_options},
        "verifier": cfg.verifier["_target_"].rsplit(".", 1)[-1],
        "window": cfg.lookahead.window,
        "ngram": cfg.lookahead.ngram,
        "guess": cfg.lookahead.guess,
        "max_new_tokens": cfg.max_new_tokens,
        "batch_size": cfg.get("batch_size", 1),
        "seed": cfg.seed,
        **{name: value for name, value in (sampling_controls(cfg) or {}).items()},
    }


def run_job(
    cfg: DictConfig,
    components: Components,
    progress: bool = True,
    desc: str = "prompts",
    checkpoint: BatchCheckpoint | None = None,
    models: ModelCache | None = None,
):
    """Run the job; return ``(metrics, prompt_rows, step_rows)``. With a ``checkpoint`` each finished
    batch is saved as it ends, and the batches it already holds are not run again (a job that died
    resumes at its next batch). ``models``: where the model comes from when jobs of one process share
    it (``lade.model_cache``); default: loaded for this job.

    ``metrics`` sums over prompts: compression (new tokens / steps), tokens/s of lookahead and of
    the baseline, speedup as their ratio (over all prompts, and the median of per-batch ratios),
    identical-output count, the step time split and the acceptance histogram.
    """
    model, tokenizer = instantiate(cfg.model) if models is None else models.get(cfg.model)
    window, ngram, guess = cfg.lookahead.window, cfg.lookahead.ngram, cfg.lookahead.guess
    decoder = LookaheadDecoder(
        model, window, ngram, guess, components.proposer, components.pool, components.verifier, cfg.seed
    )
    eos = eos_ids(model)
    sampling = sampling_controls(cfg)
    baseline = HFBaseline(model, eos, sampling)
    encoded = [encode(prompt, tokenizer, components.chat_template) for prompt in components.prompts]

    batch_size = cfg.get("batch_size", 1)
    pad = default_pad_id(model, eos)

    def lookahead(ids, mask):
        result = decoder.generate(ids, cfg.max_new_tokens, attention_mask=mask, **baseline.options)
        return row_outputs(result.sequences, ids.shape[1], eos, cfg.max_new_tokens), result

    # Warm-up on the first batch: the first calls pay for lazy initialisation, allocator growth and
    # (auto) the latency curves of this batch size.
    first, first_mask = left_pad(encoded[:batch_size], pad)
    baseline(first, WARMUP_TOKENS, first_mask)
    decoder.generate(first, WARMUP_TOKENS, attention_mask=first_mask, **baseline.options)

    prompt_rows, step_rows = [], []
    histogram: dict[int, int] = {}
    time_split = dict.fromkeys(STEP_STAGES, 0.0)
    # batches of `batch_size` consecutive prompts (left-padded); each prompt is one row of the results
    batches = [list(range(i, min(i + batch_size, len(encoded)))) for i in range(0, len(encoded), batch_size)]

    def measure(index: int, members: list[int]) -> dict:
        """One batch, both methods, their order alternating: its prompt and step rows, acceptance
        histogram and step time split."""
        batch_prompts, batch_steps, batch_histogram = [], [], {}
        ids, mask = left_pad([encoded[i] for i in members], pad)
        runs = {}
        for method in ("baseline", "lookahead") if index % 2 == 0 else ("lookahead", "baseline"):
            started = time.perf_counter()
            if method == "baseline":
                runs[method] = baseline(ids, cfg.max_new_tokens, mask)
            else:
                runs[method], result = lookahead(ids, mask)
            runs[method + "_s"] = time.perf_counter() - started
        divergences = [
            compare(runs["baseline"][row], row_logits(baseline.logits, row), runs["lookahead"][row])
            if sampling is None
            else Divergence()
            for row in range(len(members))
        ]
        # the batch's throughput ratio (the time ratio when both produced the same tokens)
        batch_speedup = (sum(map(len, runs["lookahead"])) / runs["lookahead_s"]) / (
            sum(map(len, runs["baseline"])) / runs["baseline_s"]
        )
        for row, prompt_index in enumerate(members):
            m = result.row_metrics[row]
            share = 1 / len(members)  # each row is charged an equal share of the batch's time
            batch_prompts.append(
                {
                    "prompt": prompt_index,
                    "prompt_id": components.prompts[prompt_index].id,
                    "category": components.prompts[prompt_index].category,
                    "batch": index,
                    "prompt_tokens": encoded[prompt_index].shape[1],
                    "new_tokens": m.new_tokens,
                    "steps": m.steps,
                    "compression": m.compression_ratio,
                    "seconds": runs["lookahead_s"] * share,
                    "baseline_seconds": runs["baseline_s"] * share,
                    "tokens_per_s": m.new_tokens / (runs["lookahead_s"] * share),
                    "baseline_new_tokens": len(runs["baseline"][row]),
                    "baseline_tokens_per_s": len(runs["baseline"][row]) / (runs["baseline_s"] * share),
                    "speedup": batch_speedup,
                    # sampled outputs differ by design; their check is the distribution test in tests/
                    "identical": runs["lookahead"][row] == runs["baseline"][row]
                    if sampling is None
                    else None,
                    # where a greedy output first left HF's, and HF's margin there (lade.divergence)
                    "divergence_position": divergences[row].position,
                    "divergence_margin": divergences[row].margin,
                    "overhead_fraction": result.metrics.overhead_fraction,
                    "step_tokens_mean": sum(m.step_sizes) / max(m.steps, 1),
                    "branch_fraction": m.branch_steps / max(m.steps, 1),
                    "candidates_mean": sum(m.candidate_counts) / max(m.steps, 1),
                }
            )
            planned = (m.planned_tokens, m.planned_s) if m.planned_tokens else ([math.nan] * m.steps,) * 2
            sources = m.step_sources or [""] * m.steps  # auto over several draft sources only
            batch_steps += [
                {
                    "prompt": prompt_index,
                    "step": step,
                    "tokens": tokens,
                    "seconds": seconds,
                    "candidates": n,
                    "fed": fed,  # tokens fed to the model (1: a plain step)
                    "planned_tokens": planned_tokens,  # auto: what the plan expected (batch), else NaN
                    "planned_seconds": planned_seconds,
                    "source": source,  # the draft source the step verified (auto over several), else ""
                }
                for step, (tokens, seconds, n, fed, planned_tokens, planned_seconds, source) in enumerate(
                    zip(
                        m.tokens_per_step,
                        m.step_times_s,
                        m.candidate_counts,
                        m.step_sizes,
                        *planned,
                        sources,
                        strict=True,
                    )
                )
            ]
            for accepted, count in m.accepted_histogram.items():
                batch_histogram[accepted] = batch_histogram.get(accepted, 0) + count
        return {
            "prompt_rows": batch_prompts,
            "step_rows": batch_steps,
            "histogram": batch_histogram,
            "time_s": dict(result.metrics.time_s),
        }

    done = checkpoint.finished() if checkpoint is not None else {}
    for index, members in enumerate(tqdm(batches, desc=desc, disable=not progress, position=1, leave=False)):
        if index in done:  # measured before the job died: its rows as they were written
            entry = done[index]
        else:
            entry = measure(index, members)
            if checkpoint is not None:
                checkpoint.save(index, entry)
        prompt_rows += entry["prompt_rows"]
        step_rows += entry["step_rows"]
        for accepted, count in entry["histogram"].items():
            histogram[int(accepted)] = histogram.get(int(accepted), 0) + count
        for stage, seconds in entry["time_s"].items():
            time_split[stage] += seconds

    def total(key):
        return sum(row[key] for row in prompt_rows)

    metrics = {
        "prompts": len(prompt_rows),
        "batch_size": batch_size,
        "new_tokens": total("new_tokens"),
        "steps": total("steps"),
        "compression": total("new_tokens") / max(total("steps"), 1),
        "tokens_per_s": total("new_tokens") / total("seconds"),
        "baseline_tokens_per_s": total("baseline_new_tokens") / total("baseline_seconds"),
        "speedup": (total("new_tokens") / total("seconds"))
        / (total("baseline_new_tokens") / total("baseline_seconds")),
        "speedup_median": statistics.median({r["batch"]: r["speedup"] for r in prompt_rows}.values()),
        "identical": int(total("identical")) if sampling is None else None,
        **near_ties(prompt_rows, sampling is None),
        "overhead_fraction": 1 - time_split["forward"] / max(sum(time_split.values()), 1e-12),
        # tokens fed per step and the share of steps that ran the lookahead branch (both vary with auto)
        "step_tokens_mean": sum(r["step_tokens_mean"] * r["steps"] for r in prompt_rows)
        / max(total("steps"), 1),
        "branch_fraction": sum(r["branch_fraction"] * r["steps"] for r in prompt_rows)
        / max(total("steps"), 1),
        # candidates verified per step (at most G; fewer while the pool holds fewer for the key)
        "candidates_mean": sum(r.get("candidates_mean", math.nan) * r["steps"] for r in prompt_rows)
        / max(total("steps"), 1),
        **{f"time_{stage}_s": seconds for stage, seconds in time_split.items()},
        "accepted_histogram": {str(k): v for k, v in sorted(histogram.items())},
    }
    return metrics, prompt_rows, step_rows
