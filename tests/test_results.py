"""`lade.results`: which parameters a sweep table shows."""

import math

import pandas as pd

from lade.results import summary_table, varying_columns


def test_varying_columns_counts_a_missing_value_as_a_value():
    frame = pd.DataFrame(
        {
            "temperature": [math.nan, 1.0],  # a greedy job beside a sampling one
            "top_k": [50, 50],
            "seed": [math.nan, math.nan],
            "guesses": [[1, 2], [1, 3]],  # lists are compared by their text
        }
    )
    assert varying_columns(frame, ["temperature", "top_k", "seed", "guesses", "absent"]) == [
        "temperature",
        "guesses",
    ]


def test_varying_columns_keeps_the_candidates_order_without_duplicates():
    frame = pd.DataFrame({"a": [1, 2], "b": [3, 4]})
    assert varying_columns(frame, ["b", "a", "b"]) == ["b", "a"]


def test_summary_table_shows_a_temperature_that_only_sampling_jobs_have():
    frame = pd.DataFrame(
        {"window": [5, 5], "compression": [1.5, 1.2], "temperature": [math.nan, 0.7], "top_k": [0, 0]}
    )
    header = summary_table(frame).splitlines()[0]
    assert "temperature" in header
    assert "top_k" not in header
