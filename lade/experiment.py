"""One experiment job: a configured lookahead decoder against the model's own greedy decoding.

Both run on the same prompts in the same process, alternating which goes first from prompt to
prompt, so the speedup is a ratio measured side by side. ``run_job`` is independent of Hydra's
runtime (``lade.sweep`` wraps it), so notebooks and tests can call it on a composed config.
"""

from __future__ import annotations

import statistics
import time

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from tqdm.auto import tqdm

from lade.config import Components
from lade.data import encode
from lade.decoding import LookaheadDecoder
from lade.types import STEP_STAGES

WARMUP_TOKENS = 8


class HFBaseline:
    """``model.generate``: greedy (the reference for identical outputs) or, given sampling
    controls, plain sampling with the same controls as the lookahead job."""

    def __init__(self, model, eos_token_id: list[int], sampling: dict | None = None):
        self.model = model
        self.eos = eos_token_id
        self.sampling = sampling

    def __call__(self, input_ids: torch.Tensor, max_new_tokens: int) -> list[int]:
        controls = (
            {"do_sample": True, **self.sampling}
            if self.sampling is not None
            else {"do_sample": False, "top_k": None, "top_p": None, "temperature": None}
        )
        out = self.model.generate(
            input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=max_new_tokens,
            eos_token_id=self.eos,
            pad_token_id=self.eos[0] if self.eos else 0,
            **controls,
        )
        return out[0, input_ids.shape[1] :].tolist()


def sampling_controls(cfg: DictConfig) -> dict | None:
    """The HF ``generate`` sampling keywords of a ``verifier=sampling`` job, None for greedy."""
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
        "seed": cfg.seed,
        **{name: value for name, value in (sampling_controls(cfg) or {}).items()},
    }


def run_job(cfg: DictConfig, components: Components, progress: bool = True, desc: str = "prompts"):
    """Run the job; return ``(metrics, prompt_rows, step_rows)``.

    ``metrics`` sums over prompts: compression (new tokens / steps), tokens/s of lookahead and of
    the baseline, speedup as their ratio (over all prompts, and the median of per-prompt ratios),
    identical-output count, the step time split and the acceptance histogram.
    """
    model, tokenizer = instantiate(cfg.model)
    window, ngram, guess = cfg.lookahead.window, cfg.lookahead.ngram, cfg.lookahead.guess
    decoder = LookaheadDecoder(
        model, window, ngram, guess, components.proposer, components.pool, components.verifier, cfg.seed
    )
    eos = eos_ids(model)
    sampling = sampling_controls(cfg)
    baseline = HFBaseline(model, eos, sampling)
    encoded = [encode(prompt, tokenizer, components.chat_template) for prompt in components.prompts]

    # Warm-up: the first calls pay for lazy initialisation and allocator growth.
    baseline(encoded[0], WARMUP_TOKENS)
    decoder.generate(encoded[0], WARMUP_TOKENS, eos_token_id=eos)

    prompt_rows, step_rows = [], []
    histogram: dict[int, int] = {}
    time_split = dict.fromkeys(STEP_STAGES, 0.0)
    for index, (prompt, ids) in enumerate(
        tqdm(
            list(zip(components.prompts, encoded, strict=True)),
            desc=desc,
            disable=not progress,
            position=1,
            leave=False,
        )
    ):
        runs = {}
        for method in ("baseline", "lookahead") if index % 2 == 0 else ("lookahead", "baseline"):
            started = time.perf_counter()
            if method == "baseline":
                runs[method] = baseline(ids, cfg.max_new_tokens)
            else:
                result = decoder.generate(ids, cfg.max_new_tokens, eos_token_id=eos)
                runs[method] = result.sequences[0, ids.shape[1] :].tolist()
            runs[method + "_s"] = time.perf_counter() - started
        m = result.metrics
        prompt_rows.append(
            {
                "prompt": index,
                "prompt_id": prompt.id,
                "category": prompt.category,
                "prompt_tokens": ids.shape[1],
                "new_tokens": m.new_tokens,
                "steps": m.steps,
                "compression": m.compression_ratio,
                "seconds": runs["lookahead_s"],
                "baseline_seconds": runs["baseline_s"],
                "tokens_per_s": m.new_tokens / runs["lookahead_s"],
                "baseline_new_tokens": len(runs["baseline"]),
                "baseline_tokens_per_s": len(runs["baseline"]) / runs["baseline_s"],
                # throughput ratio: the time ratio when both produced the same tokens
                "speedup": (m.new_tokens / runs["lookahead_s"])
                / (len(runs["baseline"]) / runs["baseline_s"]),
                # sampled outputs differ by design; their check is the distribution test in tests/
                "identical": runs["lookahead"] == runs["baseline"] if sampling is None else None,
                "overhead_fraction": m.overhead_fraction,
                "step_tokens_mean": sum(m.step_sizes) / max(m.steps, 1),
                "branch_fraction": m.branch_steps / max(m.steps, 1),
            }
        )
        step_rows += [
            {"prompt": index, "step": step, "tokens": tokens, "seconds": seconds}
            for step, (tokens, seconds) in enumerate(zip(m.tokens_per_step, m.step_times_s, strict=True))
        ]
        for accepted, count in m.accepted_histogram.items():
            histogram[accepted] = histogram.get(accepted, 0) + count
        for stage, seconds in m.time_s.items():
            time_split[stage] += seconds

    def total(key):
        return sum(row[key] for row in prompt_rows)

    metrics = {
        "prompts": len(prompt_rows),
        "new_tokens": total("new_tokens"),
        "steps": total("steps"),
        "compression": total("new_tokens") / max(total("steps"), 1),
        "tokens_per_s": total("new_tokens") / total("seconds"),
        "baseline_tokens_per_s": total("baseline_new_tokens") / total("baseline_seconds"),
        "speedup": (total("new_tokens") / total("seconds"))
        / (total("baseline_new_tokens") / total("baseline_seconds")),
        "speedup_median": statistics.median(row["speedup"] for row in prompt_rows),
        "identical": int(total("identical")) if sampling is None else None,
        "overhead_fraction": 1 - time_split["forward"] / max(sum(time_split.values()), 1e-12),
        # tokens fed per step and the share of steps that ran the lookahead branch (both vary with auto)
        "step_tokens_mean": sum(r["step_tokens_mean"] * r["steps"] for r in prompt_rows)
        / max(total("steps"), 1),
        "branch_fraction": sum(r["branch_fraction"] * r["steps"] for r in prompt_rows)
        / max(total("steps"), 1),
        **{f"time_{stage}_s": seconds for stage, seconds in time_split.items()},
        "accepted_histogram": {str(k): v for k, v in sorted(histogram.items())},
    }
    return metrics, prompt_rows, step_rows
