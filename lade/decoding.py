"""``LookaheadDecoder``: lossless lookahead decoding of a Hugging Face causal LM, ``generate``'s way.

The decoder is thin: it holds what every call shares (the model's ``StepExecutor``, the resolved
W, N, G, the strategies as given, the latency curves of ``Calibrator``) and, per call, resolves the
settings as ``generate`` does (``lade.generation``), opens a ``DecodingSession`` with the call's own
copies of proposer, pool and planner (``lade.session``), runs the one decoding loop (``lade.loop``)
and assembles ``generate``'s output (``lade.outputs``). A call never changes the decoder (a pool
built ``persistent`` and ``learn_across_calls`` are the explicit exceptions), so one decoder can
serve calls one after another, or from several threads, with the same steps as a fresh one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import torch
from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

from lade.autotune import AUTO
from lade.calibration import DEFAULT_SIZES, BatchLatency, LatencyModel
from lade.calibrator import Calibrator
from lade.compatibility import check_static, self_check
from lade.executor import StepExecutor
from lade.generation import CallSettings, check_against_model, resolve
from lade.interfaces import NGramPool, Proposer, Verifier
from lade.loop import decode
from lade.options import AUTO_GUESS, AUTO_NGRAM, AUTO_SPAN, AUTO_WINDOW, default_pool, positive_int
from lade.options import resolve as resolve_options
from lade.outputs import assemble
from lade.priors import PlannerPriors
from lade.session import new_planner, open_session, verifier_for
from lade.source_choice import SourceChooser
from lade.types import GenerationResult
from strategies.greedy import GreedyVerifier
from strategies.jacobi import JacobiProposer

# the decoder's defaults, importable from here (they live in lade.options)
__all__ = [
    "LookaheadDecoder",
    "default_pad_id",
    "default_pool",
    "AUTO_GUESS",
    "AUTO_NGRAM",
    "AUTO_SPAN",
    "AUTO_WINDOW",
]

Streamer = Callable[[list[int]], None]


def default_pad_id(model, eos: list[int]) -> int:
    """The id that pads finished rows of a batch, as ``generate`` picks it: the model's
    ``generation_config.pad_token_id``, else the first EOS id, else 0."""
    pad = getattr(getattr(model, "generation_config", None), "pad_token_id", None)
    if isinstance(pad, (list, tuple)):
        pad = pad[0] if pad else None
    return pad if pad is not None else eos[0] if eos else 0


class LookaheadDecoder:
    """Lossless lookahead decoding of a Hugging Face causal LM.

    Args:
        model: any decoder-only transformers model that accepts a 4D ``attention_mask``,
            ``position_ids`` and a ``DynamicCache`` (Llama, Qwen2, Mistral, GPT-2, Gemma 3, ...).
        window: W, guesses per lookahead level (>= 1), or ``"auto"``: the branch runs only on the steps
            where it is predicted to pay, at the size (1 to 15, or up to a given proposer's W) paying best.
        ngram: N, n-gram size: N-1 lookahead levels, candidates of N-1 tokens, up to N tokens a step;
            or ``"auto"``: the branch harvests n-grams of 6 tokens, the default pool also stores
            continuations of 10 tokens from the prompt and output (``AUTO_SPAN``), and each step
            verifies the candidates cut to the length predicted to pay best.
        guess: G, candidates verified per step (>= 0; 0 disables verification), or ``"auto"``: up to
            ``guess_ceiling``, as many as predicted to pay, none (a plain step) when none would pay.
        proposer, pool, verifier: strategies; default Jacobi, greedy, and every draft source when
            W, N, G are all auto (``lade.options.combined_pool``), else ``default_pool``. Each call
            decodes with copies of the proposer and pool (a pool built ``persistent`` is used itself
            and keeps what it learns).
        seed: seeds the default proposer's window initialisation.
        lean_logits: compute logits only at the rows that are read (the last token, the levels the
            proposer reads, the candidates) instead of at every step token.
        latency: forward latency vs tokens per step (``lade.calibration.LatencyModel``) for the auto
            choices; default: measured on the first auto call (logged), cached per model, dtype, device.
        calibration_dir: where measured latencies are cached (default ``~/.cache/lade/calibration``).
        shared_pool: in a batch, all rows read and fill one pool instead of a copy each (pools that
            follow one sequence, such as prompt lookup, cannot be shared).
        learn_across_calls: the auto planner keeps its acceptance records from call to call (one
            caller at a time); default: every call starts from the planner's priors (below).
        token_tree: feed the candidates as a token trie (shared prefixes once; ``lade.trie``), not as
            chains (the ablation): the same accepted tokens, fewer tokens fed.
        planner_priors: what auto assumes until a call has measured it (``lade.priors.PlannerPriors``:
            the branch's gain and trial, the candidates' acceptance); default: tuned on dev prompts.
        guess_ceiling: the most candidates an auto G verifies (default 7, ``AUTO_GUESS``).
        follow_policies: with several draft sources, follow the way of choosing that realized the most
            on the call's steps (``lade.policy_tally``), or the suffix tree alone once its replay beats
            the call (``lade.solo_replay``); False: always the highest predicted rate (the ablation).

    The auto choices (``lade.autotune.Planner``) never change the output, only its speed.
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
        learn_across_calls: bool = False,
        token_tree: bool = True,
        planner_priors: PlannerPriors | None = None,
        guess_ceiling: int | None = None,
        follow_policies: bool = True,
    ):
        flags = (lean_logits, shared_pool, learn_across_calls, token_tree, planner_priors)
        flags += (guess_ceiling, follow_policies)
        self.options, self.pool = resolve_options(window, ngram, guess, proposer, pool, *flags)
        self.window, self.ngram, self.guess = self.options.window, self.options.ngram, self.options.guess
        self.model = model
        # `is None`, not `or`: an empty pool has len() 0 and would read as false
        self.proposer = JacobiProposer(self.window, self.ngram, seed=seed) if proposer is None else proposer
        self.verifier = GreedyVerifier() if verifier is None else verifier
        self._verifier_given = verifier is not None  # a given verifier's mode and controls are defaults
        check_static(model)  # a ValueError naming why a model cannot be decoded exactly
        self._checked = False  # the first call runs compatibility.self_check
        self.executor = StepExecutor(model)
        largest, accepted = self.options.largest_step, 1 + self.options.candidate_length
        self.calibrator = Calibrator(self.executor, largest, accepted, latency, calibration_dir, seed)
        self._kept_planner: SourceChooser | None = None  # learn_across_calls: the planner of every call

    @property
    def is_auto(self) -> bool:
        """Whether any of W, N, G is chosen step by step."""
        return self.options.is_auto

    @property
    def latency(self) -> LatencyModel | None:
        """The one-row latency curve auto plans with (None until given, measured or loaded)."""
        return self.calibrator.latency

    def calibrate(
        self, sizes=DEFAULT_SIZES, repeats: int = 5, refresh: bool = False, rows: int = 1
    ) -> LatencyModel:
        """Measure (or load from the cache) forward latency vs tokens per step, through the decoder's
        own step path, and keep it for the auto choices (``rows`` > 1: the curve of a batch of that
        many rows, S tokens each, used by auto batches).

        ``sizes`` beyond what a step of this decoder can feed or beyond the context length are skipped
        (for a batch, also those beyond 128 tokens in all, but 1-4 always: larger batch steps are
        extrapolated, and rarely pay). ``refresh`` re-measures even when a cached curve exists."""
        return self.calibrator.calibrate(sizes, repeats, refresh, rows)

    def batch_latency(self, rows: int) -> BatchLatency | None:
        """The latency of batched steps for up to ``rows`` rows (``Calibrator.batch_latency``)."""
        return self.calibrator.batch_latency(rows)

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
        """Decode after ``input_ids`` exactly as ``model.generate(input_ids, ...)`` would, with the
        settings resolved as ``generate`` resolves them (``lade.generation``; a verifier given to the
        decoder adds its defaults under the call's own).

        Args:
            input_ids: LongTensor [B, T] (or [T]), T >= 1: B prompts, left-padded as for
                ``model.generate`` (pass ``attention_mask``; without one it is inferred from pad tokens).
                B > 1 decodes the rows together, one forward pass per step, each row exactly as alone.
            max_new_tokens: new tokens per row at most (0 returns the prompts); None: the generation
                config's (``generate``'s default: 20).
            eos_token_id: id or ids that end a row (the first one generated is kept, nothing after it);
                None: the model's; ``[]``: none.
            streamer: called with the tokens committed by each step, in order (not for B > 1); an
                object with ``put``/``end`` methods (a ``BaseStreamer``) is driven as ``generate`` does.
            generator: drives every random choice of this call (window initialisation, sampling);
                without one, sampling draws from torch's global RNG, as ``generate`` does.
            generation_config, logits_processor, stopping_criteria, prefix_allowed_tokens_fn, **kwargs:
                as in ``model.generate``: any ``GenerationConfig`` field and ``attention_mask`` [B, T].
                What lookahead decoding cannot reproduce exactly (beam search, assisted decoding,
                classifier-free guidance, watermarking, ...) raises a ``ValueError`` naming it.

        Returns:
            ``GenerationResult``, ``generate``'s ``GenerateDecoderOnlyOutput`` with ``sequences``
            [B, T + new] (rows that finished early padded as ``generate`` pads them), ``scores`` /
            ``logits`` when asked for, ``metrics`` (the whole call) and ``row_metrics`` (each row's).
        """
        started = time.perf_counter()
        if max_new_tokens is not None:
            # generate refuses 0; here it returns the prompts (settings resolved as for one token)
            kwargs["max_new_tokens"] = max(1, positive_int("max_new_tokens", max_new_tokens, 0))
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
            # a given verifier's settings (a SamplingVerifier's do_sample=True, temperature) under the call's
            defaults=self.verifier.generation_defaults() if self._verifier_given else {},
            **kwargs,
        )
        if max_new_tokens == 0:
            settings.stop.max_new_tokens = 0
        return self.run(settings, generator, started)

    def run(
        self, settings: CallSettings, generator: torch.Generator | None = None, started: float | None = None
    ) -> GenerationResult:
        """Decode a call whose settings are resolved (``lade.generation.resolve`` or ``prepared``).
        The loop runs in ``torch.inference_mode`` (5-10% faster than ``no_grad`` here); the result is
        assembled outside it, so autograd accepts its tensors (``model(result.sequences)``, as after
        ``generate``)."""
        started = time.perf_counter() if started is None else started
        check_against_model(settings, self.executor.vocab_size, self.executor.context_length)
        if not self._checked:
            with torch.inference_mode():
                self_check(self.executor)
            self._checked = True
        verifier = verifier_for(self.verifier, settings.do_sample, generator)
        planner = self._planner if self.is_auto and settings.max_new_tokens else None
        with torch.inference_mode():
            session = open_session(
                settings, self.options, self.proposer, self.pool, verifier, generator, planner
            )
            if settings.max_new_tokens:
                decode(session, self.executor)
        if hasattr(settings.streamer, "end"):
            settings.streamer.end()
        return assemble(settings, session.rows, session.metrics, started)

    def _planner(self, proposer: Proposer, rows: int) -> SourceChooser:
        """A call's planner (``proposer``: a started row proposer): a new one, or with
        ``learn_across_calls`` the decoder's one (made on first use)."""
        batch_latency = self.calibrator.batch_latency(rows)
        if self._kept_planner is None or not self.options.learn_across_calls:
            planner = new_planner(self.options, self.calibrator.one_row(), proposer, batch_latency, self.pool)
            self._kept_planner = planner if self.options.learn_across_calls else None
            return planner
        self._kept_planner.batch_latency = batch_latency
        return self._kept_planner
