"""A decoder's fixed choices: W, N, G (or which of them auto chooses), the candidate length, and the
default pool; resolved once from the constructor's arguments, read by every call.

Owns the meaning of ``"auto"`` for each of W, N, G (``AUTO_*``) and the argument checks; it holds no
state that a call changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from lade.autotune import is_auto
from lade.interfaces import NGramPool, Proposer
from lade.priors import DEFAULT_PRIORS, PlannerPriors
from pools.bucket import BucketedNGramPool
from pools.combined import CombinedPool
from pools.eviction import LRUEviction
from pools.frequent_tokens import FrequentTokensPool
from pools.suffix_tree import SuffixTreePool
from pools.token_recycling import TokenRecyclingPool

# What "auto" searches up to: the lookahead branch's W and the pool's n-gram size and candidates.
AUTO_WINDOW = 15
AUTO_WINDOWS = (1, 2, 3, 5, 7, 10, 15)  # branch sizes an auto window chooses among (up to W)
AUTO_NGRAM = 6
AUTO_SPAN = 10  # candidate tokens an auto pool stores from the text (N-1 from the branch)
AUTO_GUESS = 7
DRAFT_SOURCES = ("lookahead", "suffix_tree", "token_recycling")  # the sources of ``combined_pool``


def positive_int(name: str, value, minimum: int) -> int:
    """``value`` when it is an int >= ``minimum`` (not a bool), else a ``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def real_number(name: str, value, low: float, below: float = float("inf")) -> float:
    """``value`` as a float when it is a real number (not a bool) with ``low <= value < below``, else a
    ``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value < below:
        bounds = f">= {low:g}" if below == float("inf") else f"in [{low:g}, {below:g})"
        raise ValueError(f"{name} must be a number {bounds}, got {value!r}")
    return float(value)


def check_priors(priors) -> PlannerPriors:
    """``priors`` when it is a ``PlannerPriors`` of valid values (a branch gain >= 0, a trial >= 1, a
    candidate chance in [0, 1)), else a ``TypeError`` or a ``ValueError`` naming the value."""
    if not isinstance(priors, PlannerPriors):
        raise TypeError(f"planner_priors must be a lade.priors.PlannerPriors, got {priors!r}")
    real_number("planner_priors.branch", priors.branch, 0)
    positive_int("planner_priors.trial", priors.trial, 1)
    real_number("planner_priors.candidate", priors.candidate, 0, 1)
    return priors


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


def combined_pool(
    ngram: int,
    guess: int,
    auto: bool,
    nodes: int | None = None,
    only: str | None = None,
    without: str | None = None,
    merged: bool = True,
    persistent: bool = False,
    span: int | None = None,
    frequent_tokens: bool = False,
) -> CombinedPool:
    """Every draft source behind one pool (``pools.CombinedPool``): the n-gram pool the branch fills
    (``default_pool``), a suffix tree over the call's text and Token Recycling's table of runner-up
    tokens. ``auto``: auto's sources (candidates of up to ``AUTO_SPAN`` text tokens, verified as far as
    they pay); else candidates of at most N-1 tokens, for fixed W, N, G. The default pool of a fully
    auto decoder (``resolve``): on every committed draft-ablation cell it was never significantly slower
    than the n-gram pool alone and faster on 10 of 28 (``experiments/results/draft_ablation``).

    Args:
        ngram, guess: N and G (per-key capacity of the n-gram pool).
        nodes: Token Recycling's likeliest tree of that many nodes instead of its static CPU tree.
        only: just that source (one of ``DRAFT_SOURCES``), planned the same way, so the combination is
            compared with each of its own sources alone.
        without: every source but that one (an ablation of what each adds to the combination).
        merged: the planner may also verify the sources' candidates together (``MergedSources``).
        persistent: Token Recycling's table is kept across ``generate`` calls, as the paper keeps it
            across queries; the decoder then changes with each call (off by default: a call never
            changes a decoder, so calls from two threads do not interfere).
        span: with ``auto``, the text candidates' length instead of ``AUTO_SPAN`` (an ablation).
        frequent_tokens: one more source after those kept, the call's most frequent tokens as
            one-token candidates (``pools.FrequentTokensPool``; opt-in, not shown to pay).
    """
    span = (AUTO_SPAN if span is None else span) if auto else None
    sources = {
        "lookahead": lambda: default_pool(ngram, guess, auto=auto, span=span),
        "suffix_tree": lambda: SuffixTreePool(ngram, span=span),
        "token_recycling": lambda: TokenRecyclingPool(ngram, nodes=nodes, persistent=persistent),
    }
    for named in (only, without):
        if named is not None and named not in sources:
            raise ValueError(f"unknown draft source {named!r}; one of {sorted(sources)}")
    kept = {name: make() for name, make in sources.items() if only in (None, name) and name != without}
    if frequent_tokens:
        kept["frequent_tokens"] = FrequentTokensPool()
    return CombinedPool(kept, merged)


@dataclass(frozen=True)
class DecodingOptions:
    """W, N, G as a decoder uses them (``LookaheadDecoder``'s arguments, resolved by ``resolve``).

    Attributes:
        window, ngram, guess: W (the largest an auto window takes), N, G (the most an auto G verifies).
        candidate_length: tokens a candidate can offer: N-1, or a pool's longer text n-grams
            (``BucketedNGramPool.span``).
        auto_window, auto_ngram, auto_guess: which of them the planner chooses step by step.
        lean_logits: logits only at the rows that are read.
        shared_pool: in a batch, all rows read and fill one pool.
        learn_across_calls: the planner's acceptance records carry over from call to call.
        token_tree: candidates are fed as a token trie (a shared prefix once, ``lade.trie``), not as
            separate chains; the same logits and the same accepted tokens, fewer tokens fed.
        priors: what the auto planner assumes until a call has measured it (``lade.priors.PlannerPriors``).
        follow_policies: among several draft sources, follow the way of choosing that has realized the
            most on the steps run (``lade.policy_tally``) or a text-only source alone once its replay
            beats the call (``lade.solo_replay``); False: always the highest predicted rate.
    """

    window: int
    ngram: int
    guess: int
    candidate_length: int
    auto_window: bool = False
    auto_ngram: bool = False
    auto_guess: bool = False
    lean_logits: bool = True
    shared_pool: bool = False
    learn_across_calls: bool = False
    token_tree: bool = True
    priors: PlannerPriors = DEFAULT_PRIORS
    follow_policies: bool = True

    @property
    def is_auto(self) -> bool:
        """Whether any of W, N, G is chosen step by step."""
        return self.auto_window or self.auto_ngram or self.auto_guess

    @property
    def largest_step(self) -> int:
        """The most tokens one step feeds: the root, W(N-1) branch tokens, G candidates."""
        return 1 + self.window * (self.ngram - 1) + self.guess * self.candidate_length


def resolve(
    window,
    ngram,
    guess,
    proposer: Proposer | None,
    pool: NGramPool | None,
    lean_logits: bool = True,
    shared_pool: bool = False,
    learn_across_calls: bool = False,
    token_tree: bool = True,
    priors: PlannerPriors | None = None,
    guess_ceiling: int | None = None,
    follow_policies: bool = True,
) -> tuple[DecodingOptions, NGramPool]:
    """The options for these constructor arguments (W, N, G: ``"auto"`` or ints, then the flags of
    ``DecodingOptions``), and the pool to use: the given one, or when ``pool`` is None the default:
    every draft source (``combined_pool``) when all of W, N, G are auto, else ``default_pool`` (an
    auto N also stores longer copies from the text, verified as far as they pay). ``guess_ceiling``:
    the most candidates an auto G verifies (default ``AUTO_GUESS``); only with ``guess="auto"``."""
    auto_window, auto_ngram, auto_guess = (is_auto(v) for v in (window, ngram, guess))
    if guess_ceiling is not None and not auto_guess:
        raise ValueError(f"guess_ceiling applies to guess='auto', not guess={guess!r}")
    if auto_window and proposer is not None:
        window = getattr(proposer, "window", AUTO_WINDOW)
    window = AUTO_WINDOW if is_auto(window) else positive_int("window", window, 1)
    if auto_ngram:
        ngram = getattr(proposer, "ngram", None) or getattr(pool, "ngram", None) or AUTO_NGRAM
    ngram = positive_int("ngram", ngram, 2)
    if auto_guess:
        guess = AUTO_GUESS if guess_ceiling is None else positive_int("guess_ceiling", guess_ceiling, 1)
    else:
        guess = positive_int("guess", guess, 0)
    if pool is None and auto_window and auto_ngram and auto_guess:
        pool = combined_pool(ngram, guess, auto=True)
    elif pool is None:
        auto = auto_window or auto_ngram or auto_guess
        pool = default_pool(ngram, guess, auto, AUTO_SPAN if auto_ngram else None)
    for role, component in (("proposer", proposer), ("pool", pool)):
        if component is not None and getattr(component, "ngram", ngram) != ngram:
            raise ValueError(f"{role} has ngram={component.ngram} but the decoder has ngram={ngram}")
    options = DecodingOptions(
        window,
        ngram,
        guess,
        max(ngram - 1, getattr(pool, "span", ngram - 1)),
        auto_window,
        auto_ngram,
        auto_guess,
        lean_logits,
        shared_pool,
        learn_across_calls,
        token_tree,
        DEFAULT_PRIORS if priors is None else check_priors(priors),
        follow_policies,
    )
    return options, pool
