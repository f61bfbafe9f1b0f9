"""The lookahead decoding loop. The loop is not a strategy: proposers, pools and verifiers plug in.

One step = one forward pass of the unmodified model over ``[last token | lookahead branch |
verification branch]`` (``lade.layout``), with explicit ``position_ids`` and a 4D mask, against a
cache holding the committed prefix. The verifier commits at least one token; the proposer advances
its window and harvests n-grams into the pool; the cache keeps the accepted tokens' keys/values.
"""

from __future__ import annotations

import copy
import inspect
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

from lade.attention import MaskPlan, context_length
from lade.autotune import AUTO, Planner, StepPlan, is_auto
from lade.batch import batch_forward, batch_masks, decode_batch
from lade.cache import commit, new_cache
from lade.calibration import (
    DEFAULT_SIZES,
    BatchLatency,
    LatencyModel,
    batch_sizes_to_measure,
    calibration_key,
    default_calibration_dir,
    load_cached,
    measure,
    sizes_worth_measuring,
    store,
)
from lade.compatibility import check_static, self_check
from lade.flex import block_masks, uses_flex
from lade.generation import CallSettings, resolve
from lade.interfaces import NGramPool, Proposer, Verifier
from lade.layout import StepLayout, additive_mask, chain_layout, step_layout, visibility
from lade.outputs import assemble
from lade.sequence import SequenceState, new_row
from lade.types import Candidates, DecodingMetrics, GenerationResult, LookaheadBranch, pad_candidate
from pools.bucket import BucketedNGramPool
from pools.eviction import LRUEviction
from strategies.greedy import GreedyVerifier
from strategies.jacobi import JacobiProposer
from strategies.sampling import SamplingVerifier

Streamer = Callable[[list[int]], None]

# What "auto" searches up to: the lookahead branch's W and the pool's n-gram size and candidates.
AUTO_WINDOW = 15
AUTO_WINDOWS = (1, 2, 3, 5, 7, 10, 15)  # branch sizes an auto window chooses among (up to W)
AUTO_NGRAM = 6
AUTO_SPAN = 10  # candidate tokens an auto pool stores from the text (N-1 from the branch)
AUTO_GUESS = 7

_MASK_HEADROOM = 256  # prefix growth a step mask buffer absorbs before it is re-made
_MASK_LAYOUTS = 32  # step layouts whose mask buffers are kept


def default_pool(ngram: int, capacity: int, auto: bool, span: int | None = None) -> BucketedNGramPool:
    """The decoder's pool: the reference (first-token keys, LRU, per-key ``capacity``) plus prompt
    seeding, the strategy ablation's one clear gain; for auto settings also output seeding and keys of
    up to 3 tokens (more candidates, and a confidence class, the matched key length, that tells the
    planner when long candidates hold). ``span``: continuation tokens of the n-grams seeded from the
    text (default N-1; ``BucketedNGramPool``)."""
    return BucketedNGramPool(
        ngram,
        capacity=capacity,
        eviction=LRUEviction(),
        key_length=3 if auto else 1,
        seed_prompt=True,
        seed_output=auto,
        span=span,
    )


def default_pad_id(model, eos: list[int]) -> int:
    """The id that pads finished rows of a batch, as ``generate`` picks it: the model's
    ``generation_config.pad_token_id``, else the first EOS id, else 0."""
    pad = getattr(getattr(model, "generation_config", None), "pad_token_id", None)
    if isinstance(pad, (list, tuple)):
        pad = pad[0] if pad else None
    return pad if pad is not None else eos[0] if eos else 0


def _positive_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


@dataclass
class _Timer:
    """Accumulates wall time per stage into a metrics dict."""

    totals: dict[str, float]
    _start: float = field(default_factory=time.perf_counter)

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.totals[stage] += now - self._start
        self._start = now

    def now(self) -> float:
        """The time of the latest lap."""
        return self._start


log = logging.getLogger(__name__)


class LookaheadDecoder:
    """Lossless lookahead decoding of a Hugging Face causal LM.

    Args:
        model: any decoder-only transformers model that accepts a 4D ``attention_mask``,
            ``position_ids`` and a ``DynamicCache`` (Llama, Qwen2, Mistral, GPT-2, Gemma 3, ...).
        window: W, guesses per lookahead level (>= 1), or ``"auto"``: the branch runs only on the
            steps where it is predicted to pay, at the size (1 to 15 columns, or up to the given
            proposer's window) predicted to pay best.
        ngram: N, n-gram size: N-1 lookahead levels, candidates of N-1 tokens, up to N tokens a step;
            or ``"auto"``: the branch harvests n-grams of 6 tokens, the default pool also stores
            continuations of 10 tokens from the prompt and output (``AUTO_SPAN``), and each step
            verifies the candidates cut to the length predicted to pay best.
        guess: G, candidates verified per step (>= 0; 0 disables verification), or ``"auto"``: up to
            7, as many as predicted to pay, none (a plain step) when nothing is predicted to win.
        proposer, pool, verifier: strategies; default Jacobi, a first-token pool with per-key
            capacity G, LRU eviction and the prompt's n-grams seeded (and, when any of W, N, G is
            auto, the output's too), and greedy verification.
        seed: seeds the default proposer's window initialisation.
        lean_logits: compute logits only at the rows that are read (the last token, the levels the
            proposer reads, the candidates) instead of at every step token.
        latency: forward latency vs tokens per step (``lade.calibration.LatencyModel``) for the auto
            choices; default: measured on first use and cached per model, dtype and device.
        calibration_dir: where measured latencies are cached (default ``~/.cache/lade/calibration``).
        shared_pool: in a batch, all rows read and fill one pool (``pool``) instead of a copy each
            (n-grams found for one prompt serve the others; pools that follow one sequence, such as
            prompt lookup, cannot be shared).

    The auto choices are made step by step by ``lade.autotune.Planner`` from the latency curve and the
    pool's counterfactual acceptance; they never change the output, only its speed.
    The pool starts each ``generate`` call empty unless it is persistent (``BucketedNGramPool``).
    A batch (``input_ids`` [B, T], B > 1) is decoded by ``lade.batch.decode_batch``: each row gets a
    copy of the proposer and of the pool (or shares the pool), one forward pass per step.
    """

    def __init__(
        self,
        model,
        window: int | str = AUTO,
        ngram: int | str = AUTO,
        guess: int | str = AUTO,
        proposer: Proposer | None = None,
        pool: NGramPool | None = None,
        verifier: Verifier | None = None,
        seed: int = 0,
        lean_logits: bool = True,
        latency: LatencyModel | None = None,
        calibration_dir: str | None = None,
        shared_pool: bool = False,
    ):
        self.auto_window, self.auto_ngram, self.auto_guess = (is_auto(v) for v in (window, ngram, guess))
        if self.auto_window and proposer is not None:
            window = getattr(proposer, "window", AUTO_WINDOW)
        self.window = AUTO_WINDOW if is_auto(window) else _positive_int("window", window, 1)
        if is_auto(ngram):
            ngram = getattr(proposer, "ngram", None) or getattr(pool, "ngram", None) or AUTO_NGRAM
        self.ngram = _positive_int("ngram", ngram, 2)
        self.guess = AUTO_GUESS if is_auto(guess) else _positive_int("guess", guess, 0)
        window, ngram, guess = self.window, self.ngram, self.guess
        self.model = model
        # `is None`, not `or`: an empty pool has len() 0 and would read as false
        self.proposer = JacobiProposer(window, ngram, seed=seed) if proposer is None else proposer
        if pool is None:  # an auto N also stores longer copies from the text, verified as far as they pay
            pool = default_pool(ngram, guess, self.is_auto, AUTO_SPAN if self.auto_ngram else None)
        self.pool = pool
        # tokens a candidate can offer: N-1, or a pool's longer text n-grams (``BucketedNGramPool.span``)
        self.candidate_length = max(ngram - 1, getattr(pool, "span", ngram - 1))
        self.verifier = GreedyVerifier() if verifier is None else verifier
        self._verifier_given = verifier is not None  # a given verifier's mode and controls are defaults
        self.seed = seed
        for role, component in (("proposer", self.proposer), ("pool", self.pool)):
            if getattr(component, "ngram", ngram) != ngram:
                raise ValueError(f"{role} has ngram={component.ngram} but the decoder has ngram={ngram}")
        check_static(model)  # a ValueError naming why a model cannot be decoded exactly
        self._checked = False  # the first call runs compatibility.self_check
        self.mask_plan = MaskPlan.from_config(model.config)
        self.flex = uses_flex(model)  # masks go to the model as flex attention BlockMasks
        self.context_length = context_length(model.config)
        self.vocab_size = model.config.get_text_config(decoder=True).vocab_size
        self._layouts: dict[tuple, StepLayout] = {}
        self._rows: dict[tuple, torch.Tensor] = {}
        self._mask_buffers: dict[tuple, torch.Tensor] = {}
        self.lean_logits = lean_logits
        self._keeps_logits = "logits_to_keep" in inspect.signature(model.forward).parameters
        self.latency = latency
        # a latency given by the caller is used as is: batches then approximate B rows of S tokens by
        # one row of B*S; measured latencies (the default) are measured per batch size too
        self._measure_batches = latency is None
        self._batch_curves: dict[int, LatencyModel] = {}
        self.calibration_dir = calibration_dir
        self._planner_state: Planner | None = None
        self.shared_pool = shared_pool

    @property
    def is_auto(self) -> bool:
        """Whether any of W, N, G is chosen step by step."""
        return self.auto_window or self.auto_ngram or self.auto_guess

    def calibrate(
        self, sizes=DEFAULT_SIZES, repeats: int = 5, refresh: bool = False, rows: int = 1
    ) -> LatencyModel:
        """Measure (or load from the cache) forward latency vs tokens per step; set ``self.latency``
        (``rows`` > 1: the curve of a batch of that many rows, S tokens each, used by auto batches).

        ``sizes`` beyond what a step of this decoder can feed or beyond the context length are skipped
        (for a batch, also those beyond 128 tokens in all, but 1-4 always: larger batch steps are
        extrapolated, and rarely pay).
        ``refresh`` re-measures even when a cached curve exists.
        """
        directory = default_calibration_dir() if self.calibration_dir is None else self.calibration_dir
        key = calibration_key(self.model) + (f"-rows{rows}" if rows > 1 else "")
        path = Path(directory) / f"{key}.json"
        cached = None if refresh else load_cached(path)
        if cached is None:
            log.warning(
                "lookahead auto: measuring forward latency vs tokens per step%s, once for this model and "
                "machine (cached in %s; pass latency= to skip)",
                f" for batches of {rows}" if rows > 1 else "",
                path,
            )
            cached = self._measure_latency(sizes, repeats, rows=rows)
            store(path, cached, key)
        if rows == 1:
            self.latency = cached
        else:
            self._batch_curves[rows] = cached
        return cached

    def batch_latency(self, rows: int) -> BatchLatency | None:
        """The latency of batched steps for batches of up to ``rows`` rows. When the decoder measures
        its own latency (no ``latency=`` given), the curves it lacks are measured first (batch sizes
        2, 4, 8, ... up to ``rows``; cached like the one-row curve); with a given latency only the
        curves of explicit ``calibrate(rows=...)`` calls are used. None without any batch curve
        (batches then count B rows of S tokens as one row of B*S tokens)."""
        if rows < 2:
            return None
        if self._measure_batches:
            if self.latency is None:
                self.calibrate()
            for size in batch_sizes_to_measure(rows):
                if size not in self._batch_curves:
                    self.calibrate(rows=size, repeats=3)
        if not self._batch_curves:
            return None
        return BatchLatency({1: self.latency, **self._batch_curves})

    # ------------------------------------------------------------------ public API

    def generate(
        self,
        input_ids: torch.Tensor | None = None,
        max_new_tokens: int | None = None,
        eos_token_id: int | Iterable[int] | None = None,
        streamer: Streamer | None = None,
        generator: torch.Generator | None = None,
        *,
        generation_config: GenerationConfig | None = None,
        logits_processor: LogitsProcessorList | None = None,
        stopping_criteria: StoppingCriteriaList | None = None,
        prefix_allowed_tokens_fn=None,
        **kwargs,
    ) -> GenerationResult:
        """Decode after ``input_ids`` exactly as ``model.generate(input_ids, ...)`` would.

        The settings are resolved as ``generate`` resolves them (``lade.generation``): keyword
        arguments over ``generation_config`` over this decoder's verifier's defaults (when one was
        given) over the model's ``generation_config`` over transformers' global defaults; the logits
        processors and stopping criteria are transformers' own. So the model's generation config
        (its ``do_sample``, ``temperature``, ``repetition_penalty``, ``max_new_tokens``, EOS ids, ...)
        applies here as it does in ``generate``.

        Args:
            input_ids: LongTensor [B, T] (or [T]), T >= 1: B prompts, left-padded as for
                ``model.generate`` (pass ``attention_mask``; without one it is inferred from pad tokens,
                as ``generate`` does). B > 1 decodes the rows together, one forward pass per step for
                the batch (``lade.batch``), each row exactly as it would be decoded alone.
            max_new_tokens: new tokens per row at most (0 returns the prompts); None: the generation
                config's (``generate``'s default: 20).
            eos_token_id: id or ids that end a row (the first one generated is kept, nothing after it);
                None: the model's; ``[]``: none.
            streamer: called with the tokens committed by each step, in order; an object with
                ``put``/``end`` methods (a transformers ``BaseStreamer``) is driven like ``generate`` does.
                Batches (B > 1) cannot be streamed.
            generator: drives every random choice of this call (window initialisation, sampling);
                without one, sampling draws from torch's global RNG, as ``generate`` does.
            generation_config, logits_processor, stopping_criteria, prefix_allowed_tokens_fn, **kwargs:
                as in ``model.generate``: any ``GenerationConfig`` field (``do_sample``, ``temperature``,
                ``top_k``, ``top_p``, ``repetition_penalty``, ``min_new_tokens``, ``stop_strings`` with
                ``tokenizer=``, ``max_time``, ``num_return_sequences``, ``output_scores``,
                ``output_logits``, ``return_dict_in_generate``, ``pad_token_id``, ...) and
                ``attention_mask`` [B, T]. What lookahead decoding cannot reproduce exactly (beam
                search, assisted decoding, classifier-free guidance, watermarking, ...) raises a
                ``ValueError`` naming it.

        Returns:
            ``GenerationResult``, ``generate``'s ``GenerateDecoderOnlyOutput`` with ``sequences``
            [B, T + new] (rows that finished early padded as ``generate`` pads them), ``scores`` /
            ``logits`` when asked for, ``metrics`` (the whole call) and ``row_metrics`` (each row's).
        """
        started = time.perf_counter()
        if max_new_tokens is not None:
            # generate refuses 0; here it returns the prompts (settings resolved as for one token)
            kwargs["max_new_tokens"] = max(1, _positive_int("max_new_tokens", max_new_tokens, 0))
        if eos_token_id is not None:
            kwargs["eos_token_id"] = eos_token_id
        settings = resolve(
            self.model,
            input_ids,
            generation_config,
            logits_processor,
            stopping_criteria,
            prefix_allowed_tokens_fn,
            streamer,
            defaults=self.call_defaults,
            **kwargs,
        )
        if max_new_tokens == 0:
            settings.stop.max_new_tokens = 0
        return self.run(settings, generator, started)

    def run(
        self, settings: CallSettings, generator: torch.Generator | None = None, started: float | None = None
    ) -> GenerationResult:
        """Decode a call whose settings are resolved (``lade.generation.resolve`` or ``prepared``).

        The loop runs in ``torch.inference_mode`` (5-10% faster than ``no_grad`` here: less per-op
        bookkeeping); the result is assembled outside it, so its tensors are ordinary ones that autograd
        accepts (e.g. ``model(result.sequences)`` with gradients, as after ``generate``).
        """
        started = time.perf_counter() if started is None else started
        ids, valid = settings.input_ids, settings.valid
        for token in sorted(settings.stop.eos):
            if not 0 <= token < self.vocab_size:
                raise ValueError(f"eos_token_id {token!r} is outside the vocabulary [0, {self.vocab_size})")
        if self.context_length is not None:
            longest = int(valid.sum(dim=1).max())
            if longest + settings.max_new_tokens > self.context_length:
                raise ValueError(
                    f"prompt length {longest} + max_new_tokens {settings.max_new_tokens} exceeds the "
                    f"model's context length {self.context_length}"
                )
        if not 0 <= settings.pad < self.vocab_size:
            raise ValueError(
                f"pad_token_id must be an id in the vocabulary [0, {self.vocab_size}), got {settings.pad}"
            )
        if not self._checked:
            with torch.inference_mode():
                self_check(self)
            self._checked = True
        verifier = self._verifier_for(settings, generator)
        metrics = DecodingMetrics()
        with torch.inference_mode():
            if settings.max_new_tokens == 0:
                rows = [
                    new_row(settings, b, self.proposer, self.pool, self.ngram) for b in range(ids.shape[0])
                ]
            elif ids.shape[0] == 1:
                rows = [self._decode(settings, generator, verifier, metrics)]
            else:
                rows = decode_batch(self, settings, generator, verifier, metrics, self.shared_pool)
        if hasattr(settings.streamer, "end"):
            settings.streamer.end()
        return assemble(settings, rows, metrics, started)

    @property
    def call_defaults(self) -> dict:
        """``generate`` keyword arguments this decoder stands for: those of a verifier it was given
        (e.g. a ``SamplingVerifier``'s ``do_sample=True`` and ``temperature``), under a call's own."""
        return self.verifier.generation_defaults() if self._verifier_given else {}

    # ------------------------------------------------------------------ the loop

    def _verifier_for(self, settings: CallSettings, generator: torch.Generator | None) -> Verifier:
        """The decoder's verifier when it implements the call's mode (``do_sample``), else the
        library's verifier of that mode; a call's generator replaces the verifier's."""
        verifier = self.verifier
        if verifier.samples != settings.do_sample:
            verifier = SamplingVerifier() if settings.do_sample else GreedyVerifier()
        if generator is not None and hasattr(verifier, "generator"):
            verifier = copy.copy(verifier)  # this call's randomness, the decoder's settings
            verifier.generator = generator
        return verifier

    def _decode(self, settings: CallSettings, generator, verifier, metrics) -> SequenceState:
        sequence = new_row(settings, 0, self.proposer, self.pool, self.ngram, metrics)
        committed = sequence.committed
        prompt = settings.input_ids[0, settings.valid[0]]
        cache = new_cache()
        prefill_start = time.perf_counter()
        if prompt.shape[0] > 1:  # the last prompt token is fed by the first step
            self._prefill(prompt[:-1], cache)
        metrics.prefill_s = time.perf_counter() - prefill_start
        self.pool.start(committed)
        self.proposer.start(prompt, generator)
        key_length = getattr(self.pool, "key_length", 1)
        planner = self._planner() if self.is_auto else None
        no_branch = LookaheadBranch(prompt.new_empty(0, self.window))
        stop, streamer = settings.stop, settings.streamer
        record = settings.record_scores or settings.record_logits

        prefix_len = len(committed) - 1  # positions in the cache = position of the last token
        timer = _Timer(metrics.time_s)
        while not sequence.finished:
            step_started = timer.now()
            context = committed[-key_length:]
            continuations = self.pool.candidates(context, self.guess)
            plan = self._plan(planner, context, continuations, len(committed))
            verified_ones = [pad_candidate(c, plan.length) for c in continuations[: plan.guesses]]
            candidates = Candidates(
                torch.tensor(verified_ones, dtype=torch.long, device=prompt.device).view(-1, plan.length)
            )
            timer.lap("pool")

            branch = self.proposer.lookahead_branch() if plan.branch else no_branch
            if self.auto_window and plan.branch and self.proposer.resizable and branch.window != plan.window:
                self.proposer.resize(plan.window)  # an auto window changed size
                branch = self.proposer.lookahead_branch()
            layout = self._layout(branch.num_levels, branch.window, candidates.count, plan.length)
            tokens = torch.cat(
                [prompt.new_tensor(context[-1:]), branch.levels.flatten(), candidates.tokens.flatten()]
            )
            read = self.proposer.levels_read(branch.num_levels) if self.lean_logits else branch.num_levels
            rows = self._rows_read(layout, read)
            timer.lap("propose")

            logits = self._forward(tokens, layout, prefix_len, cache, rows, timer)  # [1 + G'l + read*W, V]
            timer.lap("forward")

            verified = 1 + candidates.count * plan.length  # rows come root, candidates, levels
            verification = verifier.verify(logits[:verified], candidates, sequence.scoring())
            timer.lap("verify")

            levels = logits[verified:].view(read, branch.window, -1) if read else None
            new, keep = sequence.settle(
                verification,
                plan.branch,
                levels,
                context,
                continuations,
                layout,
                stop,
                logits[:verified] if record else None,
            )
            if planner is not None:
                planner.resolve(committed)
            if streamer is not None:
                streamer.put(torch.tensor([new])) if hasattr(streamer, "put") else streamer(new)
            timer.lap("update")
            if not sequence.finished:
                commit(cache, prefix_len, layout.size, keep)
                prefix_len += len(new)
            timer.lap("commit")
            metrics.step_times_s.append(timer.now() - step_started)
        return sequence

    def _measure_latency(self, sizes, repeats: int, contexts=(256, 1280), rows: int = 1) -> LatencyModel:
        """Time steps of S tokens (logits at every row: an upper bound for the LM head) after each
        of ``contexts`` cached random tokens (as far as the context length allows), through the same
        forward path as decoding (``rows`` > 1: a batch of that many rows, each S tokens after its own
        context); the curves form one context-dependent ``LatencyModel``."""
        largest_step = 1 + self.window * (self.ngram - 1) + self.guess * self.candidate_length
        if rows > 1:  # a batch's steps stay small: do not time thousands of tokens per forward
            largest_step = min(largest_step, max(4, 128 // rows))
        room = self.context_length if self.context_length is not None else 1 << 30
        above = [s for s in sizes if s >= largest_step]
        wanted = sorted({s for s in sizes if s < largest_step} | set(above[:1]) | {1})
        wanted = [s for s in wanted if s < room]
        lengths = sorted({max(1, min(c, room - wanted[-1])) for c in contexts})
        generator = torch.Generator().manual_seed(self.seed)
        device = self._input_device()
        text = torch.randint(self.vocab_size, (lengths[-1] + wanted[-1],), generator=generator).to(device)
        curves = []
        with torch.inference_mode():
            for context in lengths:
                cache = new_cache()
                self._prefill(text[:context], cache)
                if rows > 1:  # one row's prefill, repeated: the same text in every row, the same cost
                    cache.batch_repeat_interleave(rows)
                run_step = self._timed_step(text, context, cache, rows, wanted)
                if context == lengths[0]:  # a step committing at most N tokens per row cannot pay beyond
                    wanted = sizes_worth_measuring(run_step, wanted, 1 + self.candidate_length)
                curves.append(measure(run_step, wanted, repeats, context))
        latency = None
        for curve in reversed(curves):  # the shortest context outermost, each holding the next longer
            latency = replace(curve, longer=latency)
        return latency

    def _timed_step(self, text, context: int, cache, rows: int, sizes) -> Callable[[int], None]:
        """A step of S tokens of ``text`` after ``context`` cached ones, through the forward path a
        decode of ``rows`` rows takes, its tokens then dropped from the cache."""
        device = text.device
        read = {s: torch.arange(s, device=device) for s in sizes}
        chains = {s: self._layout_chain(s) for s in sizes}
        if rows > 1:
            positions = torch.arange(text.shape[0], device=device)[None].expand(rows, -1)
            valid = torch.ones(rows, context, dtype=torch.bool, device=device)

        def run_step(size: int) -> None:
            if rows == 1:
                self._forward(text[context : context + size], chains[size], context, cache, read[size])
            else:
                step = positions[:, context : context + size]
                masks = batch_masks(self, chains[size].tree_mask, valid, positions[:, :context], step)
                tokens = text[context : context + size][None].expand(rows, -1)
                batch_forward(self, tokens, step, masks, cache, read[size])
            cache.crop(-size)
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        return run_step

    def _planner(self, proposer: Proposer | None = None, rows: int = 1) -> Planner:
        """The decoder's planner, made on first use (``proposer``: a started one like the decoder's,
        default the decoder's own), started for ``rows`` sequences; its acceptance records carry over
        from call to call (a sliding window: a new text replaces them within ``history`` steps)."""
        if self._planner_state is not None:
            self._planner_state.start(rows)
            return self._planner_state
        if self.latency is None:
            self.calibrate()
        proposer = self.proposer if proposer is None else proposer
        window = self.window if proposer.lookahead_branch().num_levels else 0
        sizes = AUTO_WINDOWS if self.auto_window and self.proposer.resizable else (window,)
        self._planner_state = Planner(
            self.latency,
            window=window,
            branch_levels=self.ngram - 1,
            max_guess=self.guess,
            max_length=self.candidate_length,
            auto_window=self.auto_window,
            auto_guess=self.auto_guess,
            auto_length=self.auto_ngram,
            windows=sizes,  # the planner keeps those up to `window`
        )
        self._planner_state.start(rows)
        return self._planner_state

    def _plan(self, planner: Planner | None, context, continuations, position: int) -> StepPlan:
        """This step's plan: the planner's when any of W, N, G is auto, else everything offered."""
        if planner is None:
            return StepPlan(True, len(continuations), self.candidate_length, 0.0, 0.0, self.window)
        confidence = self.pool.confidence(context, continuations)
        planner.offer(position, continuations, self.pool.harvested(context, continuations), confidence)
        return planner.plan(len(continuations), confidence, position)

    def _prefill(self, tokens: torch.Tensor, cache) -> None:
        """Run the model over a prompt's tokens [T] into an empty cache, with the model's own causal
        (and sliding-window) masking: a plain causal chain needs no tree mask, and attention kernels
        run it faster than an explicit [T, T] mask (``python experiments/ab_prefill.py``). Flex attention
        gets the chain's mask from us, as every step's (see ``lade.flex``)."""
        if self.flex:
            self._forward(tokens, self._layout_chain(tokens.shape[0]), 0, cache)
            return
        extra = {"logits_to_keep": 1} if self._keeps_logits else {}
        positions = torch.arange(tokens.shape[0], device=tokens.device)
        self.model(input_ids=tokens[None], position_ids=positions[None], cache=cache, use_cache=True, **extra)

    def _forward(
        self, tokens: torch.Tensor, layout: StepLayout, prefix_len: int, cache, rows=None, timer=None
    ):
        """Run the model over one step's tokens [S]; return the logits [len(rows), V] of ``rows``
        (LongTensor of step rows, or None for no logits at all: the prefill)."""
        positions = prefix_len + layout.depths
        if self.context_length is not None:
            # Only guesses past the end of the budget can reach here; their outputs are never committed.
            positions = positions.clamp(max=self.context_length - 1)
        masks = {
            kind: self._mask(layout, prefix_len, positions, window, reuse=rows is not None)
            for kind, window in self.mask_plan.windows.items()
        }
        attention_mask = masks if self.mask_plan.by_layer_type else next(iter(masks.values()))
        if self.flex:
            attention_mask = block_masks(attention_mask)
        extra = {}
        if self._keeps_logits:  # the LM head runs only on the rows that are read
            extra["logits_to_keep"] = 1 if rows is None else rows
        if timer is not None:
            timer.lap("mask")
        out = self.model(
            input_ids=tokens[None],
            position_ids=positions[None],
            attention_mask=attention_mask,
            cache=cache,
            use_cache=True,
            **extra,
        )
        if rows is None:
            return None
        return out.logits[0] if self._keeps_logits else out.logits[0, rows]

    def _mask(self, layout: StepLayout, prefix_len: int, positions: torch.Tensor, window, reuse: bool):
        """Additive mask [1, 1, S, P + S] of a step.

        Without a sliding window a step's mask is zeros over the prefix followed by the tree block,
        so it is a view into a buffer per step layout, ``[zeros | tree]``, re-made only every
        ``_MASK_HEADROOM`` tokens of growth; the buffers of the ``_MASK_LAYOUTS`` most recent layouts
        are kept. Sliding-window masks depend on the positions, and the prefill runs once: both are
        built per call (``reuse=False`` for the prefill).
        """
        if window is not None or not reuse:
            return additive_mask(
                visibility(layout.tree_mask, prefix_len, positions, window), self.model.dtype
            )
        size, keys = layout.size, prefix_len + layout.size
        key = (layout.num_levels, layout.window, layout.num_candidates, layout.candidate_len, size)
        buffer = self._mask_buffers.pop(key, None)
        if buffer is None or buffer.shape[-1] < keys:
            width = keys + _MASK_HEADROOM
            buffer = additive_mask(visibility(layout.tree_mask, width - size, positions), self.model.dtype)
        self._mask_buffers[key] = buffer  # most recently used last
        if len(self._mask_buffers) > _MASK_LAYOUTS:
            self._mask_buffers.pop(next(iter(self._mask_buffers)))
        return buffer[..., buffer.shape[-1] - keys :]

    def _rows_read(self, layout: StepLayout, levels_read: int) -> torch.Tensor:
        """Step rows whose logits are read, in the order the loop slices them: the last token, the
        candidates (so row 0 and the candidates are one contiguous block for the verifier, no copy),
        then the newest ``levels_read`` levels (LongTensor [1 + G'(N-1) + levels_read*W], cached)."""
        key = (layout.num_levels, layout.window, layout.num_candidates, layout.candidate_len, levels_read)
        if key not in self._rows:
            first_level = 1 + (layout.num_levels - levels_read) * layout.window
            rows = [0, *range(layout.candidates.start, layout.size), *range(first_level, layout.branch.stop)]
            self._rows[key] = torch.tensor(rows, device=self._input_device())
        return self._rows[key]

    # ------------------------------------------------------------------ helpers

    def _input_device(self) -> torch.device:
        return self.model.get_input_embeddings().weight.device

    def _layout(self, num_levels: int, window: int, num_candidates: int, candidate_len: int) -> StepLayout:
        key = (num_levels, window, num_candidates, candidate_len)
        if key not in self._layouts:
            self._layouts[key] = self._to_device(
                step_layout(num_levels, window, num_candidates, candidate_len)
            )
        return self._layouts[key]

    def _layout_chain(self, length: int) -> StepLayout:
        return self._to_device(chain_layout(length))

    def _to_device(self, layout: StepLayout) -> StepLayout:
        device = self._input_device()
        return StepLayout(
            layout.num_levels,
            layout.window,
            layout.num_candidates,
            layout.candidate_len,
            layout.parents,
            layout.depths.to(device),
            layout.tree_mask.to(device),
        )
