"""Execute the ablation notebooks (notebooks/*.py, jupytext percent format) and write each paired
.ipynb with its outputs, reading the committed full-mode results (or, with --quick, rerunning each
experiment's quick mode first; the .ipynb files are then left alone).

    python experiments/run_notebooks.py            # refresh notebooks/*.ipynb after new results
    python experiments/run_notebooks.py --quick    # smoke run, as CI does (tests/test_notebooks.py)
"""

from __future__ import annotations

import argparse

import nbformat

from lade.figures import REPO, execute_notebook, repo_relative


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="rerun the experiments' quick mode; write nothing"
    )
    parser.add_argument("names", nargs="*", help="notebook names (default: all)")
    args = parser.parse_args(argv)
    sources = sorted((REPO / "notebooks").glob("*.py"))
    if args.names:
        sources = [s for s in sources if s.stem in args.names]
    for source in sources:
        print(f"executing {repo_relative(source)} ({'quick' if args.quick else 'full'} mode)", flush=True)
        notebook = execute_notebook(source, quick=args.quick)
        if not args.quick:
            nbformat.write(notebook, source.with_suffix(".ipynb"))
            print(f"wrote {repo_relative(source.with_suffix('.ipynb'))}")


if __name__ == "__main__":
    main()
