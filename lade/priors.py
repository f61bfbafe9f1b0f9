"""What the auto planner assumes before a call has measured it: ``PlannerPriors``, their tuned defaults,
and the candidates' predicted acceptance under the prior (``prior_acceptance``).

The planner (``lade.autotune.Planner``) uses them until its own records replace them; the decoder takes
them as ``LookaheadDecoder(planner_priors=)`` and ``lade.options.check_priors`` checks them. The
defaults are tuned on dev-split prompts with ``experiments/planner_priors.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

BRANCH_PRIOR = 0.25  # the lookahead branch's assumed gain per step at W = 1 (PlannerPriors.branch)
# Branch steps before its measured gain replaces the prior. Tuned on dev-split prompts
# (experiments/planner_priors.py): at 32, chat answers of 20-40 tokens ran their whole length on the prior.
BRANCH_TRIAL = 8
# The chance assumed, until a row's offers have been scored (``min_records``), that each next token of
# the first candidate holds. At 0 the first ~18 steps of every call were plain (no records yet), which
# short answers and long copies (summarization, RAG) could not afford. Tuned on dev-split prompts
# (experiments/planner_priors.py, Qwen2.5-Coder-1.5B bf16): geometric mean 1.10x HF greedy at 0, 1.22x at
# 0.3, 1.27x at 0.6; 0.6 against 0.8 in a second run: 1.26x against 1.24x.
CANDIDATE_PRIOR = 0.6


@dataclass(frozen=True)
class PlannerPriors:
    """What the auto planner assumes until a call has measured it (the defaults are tuned on dev-split
    prompts, ``experiments/planner_priors.py``; ``lade.options.check_priors`` checks them).

    Attributes:
        branch: extra accepted tokens per step credited to the lookahead branch at W = 1,
            ``branch * log2(1 + W)`` at W (the paper's compression grows about logarithmically in W),
            until it has run ``trial`` steps. A prior that cannot pay for the branch's tokens keeps it off.
        trial: branch steps before its measured gain replaces ``branch``.
        candidate: the chance that each next token of the first candidate holds, until a row's offers
            have been scored: ``prior_acceptance`` is the accepted tokens predicted for any g >= 1
            (0: plain steps until then).
    """

    branch: float = BRANCH_PRIOR
    trial: int = BRANCH_TRIAL
    candidate: float = CANDIDATE_PRIOR


DEFAULT_PRIORS = PlannerPriors()  # the tuned defaults (immutable, so one instance serves every default)


def prior_acceptance(chance: float, length: int) -> float:
    """Accepted tokens expected of a candidate cut to ``length`` when each next token holds with
    ``chance``: chance + chance^2 + ... + chance^length (``PlannerPriors.candidate``)."""
    return sum(chance**k for k in range(1, length + 1))
