"""The planner's expectations against its steps' outcomes (``lade.planner_report``)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lade.planner_report import calibration, main, markdown


def _steps(**extra) -> pd.DataFrame:
    """Two plain steps (priced right) and two drafting steps that commit half the tokens expected and
    take 1.5x the seconds priced, in one job; ``extra``: constant columns."""
    frame = pd.DataFrame(
        {
            "fed": [1, 1, 9, 9],
            "tokens": [1, 1, 1, 2],
            "seconds": [0.1, 0.1, 0.3, 0.3],
            "planned_tokens": [1.0, 1.0, 3.0, 3.0],
            "planned_seconds": [0.1, 0.1, 0.2, 0.2],
        }
    )
    return frame.assign(**extra)


def test_calibration_compares_expectations_with_outcomes_per_step_kind():
    table = calibration(_steps()).set_index("kind")
    assert table.loc["plain", "tokens_ratio"] == pytest.approx(1.0)
    assert table.loc["drafting", "tokens_ratio"] == pytest.approx(0.5)
    assert table.loc["drafting", "seconds_ratio"] == pytest.approx(1.5)
    assert table.loc["drafting", "planned_tokens_per_s"] == pytest.approx(15.0)
    assert table.loc["drafting", "tokens_per_s"] == pytest.approx(5.0)
    assert table["steps"].tolist() == [2, 2]
    assert "| drafting |" in markdown(table.reset_index())


def test_calibration_reads_each_draft_source_on_the_steps_it_verified():
    # auto over several sources: the step's kind is the source chosen (its planner's prediction)
    table = calibration(_steps(source=["plain", "plain", "suffix_tree", math.nan])).set_index("kind")
    assert table["steps"].to_dict() == {"drafting": 1, "plain": 2, "suffix_tree": 1}
    assert table.loc["suffix_tree", "tokens_ratio"] == pytest.approx(1 / 3)
    assert table.loc["drafting", "tokens_ratio"] == pytest.approx(2 / 3)


def test_calibration_groups_by_what_varies_and_skips_unplanned_steps():
    greedy = _steps(temperature=math.nan, window="auto")
    sampled = _steps(temperature=1.0, window="auto")
    fixed = _steps(temperature=math.nan, window=3).assign(planned_tokens=math.nan, planned_seconds=math.nan)
    table = calibration(pd.concat([greedy, sampled, fixed], ignore_index=True))
    # the fixed job has no plans: only temperature varies among the rest; 2 jobs x 2 kinds
    assert list(table.columns[:2]) == ["temperature", "kind"] and len(table) == 4
    assert table["steps"].sum() == 8


def test_calibration_refuses_steps_without_plans():
    with pytest.raises(ValueError, match="columns"):
        calibration(pd.DataFrame({"tokens": [1]}))
    with pytest.raises(ValueError, match="no step has a plan"):
        calibration(_steps().assign(planned_tokens=math.nan))


def test_command_line_refuses_a_missing_folder(tmp_path):
    with pytest.raises(SystemExit):
        main([str(tmp_path / "nowhere")])
