"""The core stays readable (issue 16): no module of ``lade/``, ``strategies/``, ``pools/`` over 400 lines,
no class over 250, and ``LookaheadDecoder`` under 200."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(path for folder in ("lade", "strategies", "pools") for path in (ROOT / folder).glob("*.py"))


def classes(path: Path) -> dict[str, int]:
    """Class name -> lines, for the classes defined at the top of a module."""
    tree = ast.parse(path.read_text())
    return {
        node.name: node.end_lineno - node.lineno + 1 for node in tree.body if isinstance(node, ast.ClassDef)
    }


@pytest.mark.parametrize("path", MODULES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_modules_and_classes_stay_small(path):
    assert len(path.read_text().splitlines()) <= 400
    assert all(lines <= 250 for lines in classes(path).values()), classes(path)


def test_the_decoder_is_thin():
    assert classes(ROOT / "lade" / "decoding.py")["LookaheadDecoder"] < 200


@pytest.mark.parametrize("package", ["pools", "strategies"])
def test_each_package_imports_first_in_a_fresh_interpreter(package):
    # lade builds on pools and strategies, and they on lade's interfaces: a cycle that only one
    # import order used to survive (`import pools` before `import lade` raised ImportError).
    # Any `from pools.x import ...` runs the package's __init__ first, so the package stands for them all.
    done = subprocess.run(
        [sys.executable, "-c", f"import {package}"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
