"""What-if of the rules by which a call stops combining draft sources and follows the suffix tree alone
(issue 17; ``lade.source_choice``'s replay), computed from committed step rows, without decoding.

A run of ``experiments/step_costs.py`` with ``auto`` (from before the replay existed) and
``auto_only_suffix_tree`` gives, per prompt, two priced traces of the same text: the combination's
steps and the suffix tree's alone (tokens committed, priced seconds). A switch rule reads both traces
up to a position, as the replay does (the suffix tree alone's trace stands for the replay's), and
names the position at which the call would follow the suffix tree alone, or none. The call's priced
cost is then the combination's up to that position plus the suffix tree's from there on:

    cost(rule) = auto(s) + alone(end) - alone(s)        (auto(p): priced seconds to reach position p)

an approximation: after a switch the call's steps start from where the combination's left off, not
where the suffix tree's did, and the suffix tree alone may run the lookahead branch (a one-source
planner has one) where the replay has none, so ``--after`` (a run with the replay) checks it: the
simulated current rule against the one that ran. Rules: ``none``; ``alone`` (from the first step);
``oracle`` (the best switch position, knowing the whole call: the headroom of any switch rule);
``cumulative`` (the replay's rule: after ``tokens`` tokens, switch once the suffix tree alone reached
the position for ``margin`` times fewer priced seconds; ``stop``: give up once the call led by as
much) and ``window`` (the same over the last ``window`` tokens only).

    python experiments/switch_rules.py --before BEFORE --after AFTER --out OUT   # step_costs folders

(the committed runs are in experiments/README.md).

Writes ``switch_rules.csv`` (one row per run, rule and dataset: the priced rate over the suffix
tree alone's, ``ratio``; ``dataset = geomean`` the geometric mean over the datasets) and
``switch_rules.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from lade.figures import markdown_table
from lade.solo_replay import CostTrace

ALONE = "auto_only_suffix_tree"


def priced_trace(committed, planned_s) -> CostTrace:
    """One call's steps (tokens committed, priced seconds, in step order) as a ``CostTrace`` from 0."""
    trace = CostTrace(0)
    for tokens, seconds in zip(committed, planned_s, strict=True):
        trace.step(trace.end + int(tokens), float(seconds))
    return trace


SwitchRule = Callable[[CostTrace, CostTrace], "int | None"]  # (call, alone) -> switch position


def cumulative(tokens: int, margin: float, stop: bool, window: int | None = None) -> SwitchRule:
    """The replay's rule: at each of the suffix tree alone's step ends at least ``tokens`` past the
    first token, switch when it reached there in ``margin`` times fewer priced seconds than the call
    (over the last ``window`` tokens only, when given); with ``stop``, never switch once the call did."""

    def rule(call: CostTrace, alone: CostTrace) -> int | None:
        for position in alone.positions[1:]:
            if position > call.end:
                break
            if position - 1 < tokens:
                continue
            start = 1 if window is None else max(1, position - window)
            replayed = alone.cost_at(position) - alone.cost_at(start)
            run = call.cost_at(position) - call.cost_at(start)
            if replayed * margin < run:
                return position
            if stop and run * margin < replayed:
                return None
        return None

    return rule


def oracle(call: CostTrace, alone: CostTrace) -> int | None:
    """The switch position of least cost, knowing the whole call (none when no switch gains)."""
    best = min(alone.positions, key=lambda p: switched_cost(call, alone, p))
    return best if switched_cost(call, alone, best) < call.total else None


def switched_cost(call: CostTrace, alone: CostTrace, position: int | None) -> float:
    """The call's priced seconds when it follows the suffix tree alone from ``position`` (None: never)."""
    if position is None:
        return call.total
    return call.cost_at(min(position, call.end)) + alone.total - alone.cost_at(position)


RULES: dict[str, SwitchRule] = {
    "none": lambda call, alone: None,
    "alone": lambda call, alone: 0,
    "oracle": oracle,
    "cumulative t24 m1.05 stop (the replay's)": cumulative(24, 1.05, stop=True),
    **{
        f"cumulative t{t} m{m} {'stop' if s else 'no stop'}": cumulative(t, m, s)
        for t in (16, 24, 48)
        for m in (1.0, 1.02, 1.05, 1.1)
        for s in (True, False)
        if (t, m, s) != (24, 1.05, True)
    },
    **{f"window{w} t16 m{m}": cumulative(16, m, False, w) for w in (32, 64) for m in (1.02, 1.05)},
}


def traces(steps: pd.DataFrame) -> dict[tuple[str, str, int], CostTrace]:
    """(method, dataset, prompt) -> the call's priced trace, from ``steps.csv`` rows in step order."""
    steps = steps.sort_values(["method", "dataset", "prompt", "step"])
    return {
        key: priced_trace(group["committed"], group["planned_s"])
        for key, group in steps.groupby(["method", "dataset", "prompt"])
    }


def ratios(calls: dict, rule: SwitchRule) -> dict[str, float]:
    """Per dataset, the suffix tree alone's summed priced seconds over the call's under ``rule``."""
    summed: dict[str, list[float]] = {}
    for (method, dataset, prompt), call in calls.items():
        if method != "auto":
            continue
        alone = calls[(ALONE, dataset, prompt)]
        sums = summed.setdefault(dataset, [0.0, 0.0])
        sums[0] += switched_cost(call, alone, rule(call, alone))
        sums[1] += alone.total
    return {dataset: seconds_alone / seconds for dataset, (seconds, seconds_alone) in summed.items()}


def read_steps(folders: str) -> pd.DataFrame:
    return pd.concat([pd.read_csv(Path(folder) / "steps.csv") for folder in folders.split(",")])


def table(runs: dict[str, pd.DataFrame], after: pd.DataFrame | None) -> pd.DataFrame:
    """One row per run, rule and dataset (plus each rule's geometric mean over the datasets)."""
    rows = []
    for run, steps in runs.items():
        calls = traces(steps)
        for name, rule in RULES.items():
            rows += result_rows(run, name, ratios(calls, rule))
    if after is not None:  # what ran: no switch to simulate
        rows += result_rows("after", "the replay as it ran", ratios(traces(after), RULES["none"]))
    return pd.DataFrame(rows)


def result_rows(run: str, rule: str, by_dataset: dict[str, float]) -> list[dict]:
    geomean = math.exp(sum(math.log(v) for v in by_dataset.values()) / len(by_dataset))
    return [
        {"run": run, "rule": rule, "dataset": dataset, "ratio": ratio}
        for dataset, ratio in [*sorted(by_dataset.items()), ("geomean", geomean)]
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="step_costs folders (comma list), no replay")
    parser.add_argument("--after", help="step_costs folders of the same prompts with the replay, to check")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    after = read_steps(args.after) if args.after else None
    results = table({"before": read_steps(args.before)}, after)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results.to_csv(out / "switch_rules.csv", index=False)
    wide = results.pivot_table(index=["run", "rule"], columns="dataset", values="ratio", sort=False)
    wide = wide.reset_index().sort_values("geomean", ascending=False)
    command = "python experiments/switch_rules.py " + " ".join(sys.argv[1:] if argv is None else argv)
    (out / "switch_rules.md").write_text(
        "# Switch rules, simulated from priced steps\n\n"
        f"    {command}\n\n"
        "Priced rate of the call over the suffix tree alone's (above 1: the call is faster), per dataset;"
        " `after` is the run with the replay as it ran, to set beside the simulated replay rule.\n\n"
        + markdown_table(wide, {column: ".4f" for column in wide.columns[2:]})
        + "\n"
    )
    print((out / "switch_rules.md").read_text())


if __name__ == "__main__":
    main()
