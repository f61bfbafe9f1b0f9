"""The ablation notebooks run (quick mode: each reruns its experiment on the tiny random model) and
their committed .ipynb stays paired with the .py source that diffs are read in."""

from __future__ import annotations

from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.py"))


def with_parameters(notebook, source: str):
    """The notebook with its cell tagged ``parameters`` replaced by ``source`` (papermill's convention)."""
    cells = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "a notebook needs exactly one cell tagged 'parameters'"
    cells[0].source = source
    return notebook


def test_there_are_at_least_three_notebooks():
    assert {p.stem for p in NOTEBOOKS} >= {"wng_sweep", "pool_eviction", "jacobi_gauss_seidel"}


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_in_quick_mode(source):
    notebook = with_parameters(jupytext.read(source), "QUICK = True")
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3").execute()
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
    assert committed.exists(), f"run: jupytext --execute --to ipynb {source.name}"
    paired = jupytext.read(committed)
    assert [(c.cell_type, c.source) for c in paired.cells] == [
        (c.cell_type, c.source) for c in jupytext.read(source).cells
    ], f"{committed.name} differs from {source.name}: jupytext --execute --to ipynb {source.name}"
    assert any(c.get("outputs") for c in paired.cells), f"{committed.name} was committed without outputs"
