"""The ablation notebooks run (quick mode: each reruns its experiment on the tiny random model) and
their committed .ipynb stays paired with the .py source that diffs are read in."""

from __future__ import annotations

from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext")
nbclient = pytest.importorskip("nbclient")

from lade.figures import execute_notebook  # noqa: E402

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.py"))


def test_there_are_at_least_three_notebooks():
    assert {p.stem for p in NOTEBOOKS} >= {"wng_sweep", "pool_eviction", "jacobi_gauss_seidel"}


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_in_quick_mode(source):
    notebook = execute_notebook(source, quick=True)
    errors = [o for c in notebook.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    # the quick run produced and loaded results: the first code cell after the parameters printed counts
    printed = "".join(
        o.get("text", "") for c in notebook.cells for o in c.get("outputs", []) if o.get("name") == "stdout"
    )
    assert " jobs, " in printed


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebook_is_paired_with_its_source(source):
    committed = source.with_suffix(".ipynb")
    assert committed.exists(), "run: python experiments/run_notebooks.py"
    paired = jupytext.read(committed)
    assert [(c.cell_type, c.source) for c in paired.cells] == [
        (c.cell_type, c.source) for c in jupytext.read(source).cells
    ], f"{committed.name} differs from {source.name}: python experiments/run_notebooks.py"
    assert any(c.get("outputs") for c in paired.cells), f"{committed.name} was committed without outputs"
