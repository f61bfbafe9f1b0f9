"""Every speedup written in README.md and experiments/README.md stands in a committed results file.

What counts as a speedup (issue 18, item 5):

* a decimal number written immediately before an ``x`` (``1.63x``, ``0.929x``, ``**1.626x**``), not
  part of a word or a version (``Qwen2.5`` and ``5.24.0`` are not speedups);
* the lower end of a range whose upper end is one (``1.23`` in ``1.23-1.38x``, ``1.23 to 1.38x``);
* every decimal number in a Markdown table column whose header contains "speedup" or the word "vs"
  (``vs HF``, ``vs HF greedy (sum)``, ``vs plain loop (sum)``, ``vs chains``), case-insensitive.

Ratios of costs written the same way (``1.65x the time``) count too: they are measured numbers as
well.

A number written with d decimals is backed when some number in a result file rounds to it at d
decimals, half-even or half-up (a value written with d decimals rounds to itself). Result files are
the files under experiments/results/ tracked by git (``git ls-files``; .csv, .md, .json, .txt; every
number the text holds, which for a CSV includes every cell), except the per-step and per-prompt
records of a run (``steps.csv``, ``prompts.csv``, ``records.csv``, ``*_per_prompt.csv``): their
thousands of raw seconds and per-prompt ratios match almost any three-decimal number by chance (an
unbacked 0.238x matched a step's 0.2383 s). Tables are held to more, since two-decimal numbers are
otherwise backed by chance: a table row that links a result file or folder must be backed by that
folder (a linked file's folder), and the other speedups of one table must all be backed by one and
the same result file (a table copies one result). Numbers the READMEs attribute to the paper or its
authors are exempt, one entry of ``QUOTED`` each, matched by their line.
"""

from __future__ import annotations

import posixpath
import re
import subprocess
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[1]
READMES = ("README.md", "experiments/README.md")
RESULTS = "experiments/results"
RESULT_SUFFIXES = (".csv", ".md", ".json", ".txt")
RECORDS = re.compile(r"(^|/)(steps|prompts|records)\.csv$|_per_prompt\.csv$")  # one row per step or prompt

# (number as written, text on its line, where the number comes from): quoted, not measured here.
QUOTED = (  # experiments/README.md's "paper (headline)" column and the note quoting its sources
    ("1.5", "1.5x-2.3x across datasets", "the authors' headline: 1.5x to 2.3x on one GPU"),
    ("2.3", "1.5x-2.3x across datasets", "the authors' headline: 1.5x to 2.3x on one GPU"),
    ("1.8", "up to 1.8x on MT-Bench", "the paper's abstract: up to 1.8x on MT-Bench"),
    ("1.5", '"1.5x to 2.3x on different', "the authors' README (hao-ai-lab/LookaheadDecoding), quoted"),
    ("2.3", '"1.5x to 2.3x on different', "the authors' README (hao-ai-lab/LookaheadDecoding), quoted"),
)

SPEEDUP = re.compile(r"(?<![\w.])(\d+\.\d+)x\b")
RANGE_LOW = re.compile(r"(?<![\w.])(\d+\.\d+)(?:-|–| to )(?=\d+\.\d+x\b)")
CELL_NUMBER = re.compile(r"(?<![\w.])(\d+\.\d+)(?:x\b|(?![\w.]))")
COLUMN = re.compile(r"speedup|\bvs\b", re.IGNORECASE)
SEPARATOR = re.compile(r"^\s*\|(\s*:?-+:?\s*\|)+\s*$")
LINK = re.compile(r"\]\(([^)#\s]+)")
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?")


class Claim(NamedTuple):
    path: str
    line: int
    column: int
    number: str  # as written, without the x

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.number}x"


def cells(line: str) -> list[tuple[int, str]]:
    """A Markdown table row's cells with the offset of each in the line."""
    out, start = [], line.index("|") + 1
    for part in line[start:].split("|"):
        out.append((start, part))
        start += len(part) + 1
    if out and not out[-1][1].strip():
        out.pop()  # after the closing pipe
    return out


def claims(text: str, path: str) -> list[Claim]:
    """Every speedup in a Markdown text, in order (see the module docstring)."""
    lines = text.splitlines()
    found: dict[tuple[int, int], Claim] = {}

    def add(index: int, column: int, number: str) -> None:
        found.setdefault((index, column), Claim(path, index + 1, column + 1, number))

    for index, line in enumerate(lines):
        for pattern in (SPEEDUP, RANGE_LOW):
            for match in pattern.finditer(line):
                add(index, match.start(1), match.group(1))
    index = 0
    while index < len(lines) - 1:
        if lines[index].lstrip().startswith("|") and SEPARATOR.match(lines[index + 1]):
            header = cells(lines[index])
            wanted = [i for i, (_, name) in enumerate(header) if COLUMN.search(name)]
            index += 2
            while index < len(lines) and lines[index].lstrip().startswith("|"):
                row = cells(lines[index])
                for i in wanted:
                    if i < len(row):
                        offset, cell = row[i]
                        for match in CELL_NUMBER.finditer(cell):
                            add(index, offset + match.start(1), match.group(1))
                index += 1
        else:
            index += 1
    return [found[key] for key in sorted(found)]


def tables(text: str) -> list[range]:
    """The line numbers (1-based) of each Markdown table's rows, header and separator included."""
    lines, spans, index = text.splitlines(), [], 0
    while index < len(lines) - 1:
        if lines[index].lstrip().startswith("|") and SEPARATOR.match(lines[index + 1]):
            end = index + 2
            while end < len(lines) and lines[end].lstrip().startswith("|"):
                end += 1
            spans.append(range(index + 1, end + 1))
            index = end
        else:
            index += 1
    return spans


def numbers(text: str) -> set[str]:
    """Every number written in a text (CSV cells included), as written."""
    return set(NUMBER.findall(text))


def rounded(values: set[str], decimals: int) -> set[Decimal]:
    """The values rounded half-even and half-up at this many decimals."""
    quantum = Decimal(1).scaleb(-decimals)
    out = set()
    for value in values:
        try:
            exact = Decimal(value)
            if exact >= 10**6:
                continue
            out.add(exact.quantize(quantum, rounding=ROUND_HALF_EVEN))
            out.add(exact.quantize(quantum, rounding=ROUND_HALF_UP))
        except InvalidOperation:
            continue
    return out


def unbacked(found: list[Claim], values: set[str]) -> list[Claim]:
    """The claims no value rounds to at the claim's own precision."""
    by_decimals: dict[int, set[Decimal]] = {}
    missing = []
    for claim in found:
        decimals = len(claim.number.split(".")[1])
        if decimals not in by_decimals:
            by_decimals[decimals] = rounded(values, decimals)
        if Decimal(claim.number) not in by_decimals[decimals]:
            missing.append(claim)
    return missing


def quoted(claim: Claim, line: str) -> bool:
    return any(claim.number == number and context in line for number, context, _ in QUOTED)


def linked_folders(line: str, readme: str) -> list[str]:
    """The result folders a line links: a linked folder, or a linked file's folder."""
    out = []
    for href in LINK.findall(line):
        target = posixpath.normpath(posixpath.join(posixpath.dirname(readme), href))
        if target.startswith(RESULTS + "/"):
            out.append(posixpath.dirname(target) if posixpath.splitext(target)[1] else target)
    return out


def table_mismatches(found: list[Claim], text: str, values: dict[str, set[str]]) -> list[str]:
    """Tables (rows) whose speedups the linked result folder, or a single result file, does not back."""
    lines, out = text.splitlines(), []
    for span in tables(text):
        unlinked = []
        for number in span:
            row = [c for c in found if c.line == number]
            folders = linked_folders(lines[number - 1], row[0].path) if row else []
            if not folders:
                unlinked += row
                continue
            held = set().union(*(v for n, v in values.items() if any(n.startswith(f + "/") for f in folders)))
            if lacking := unbacked(row, held):
                shown = ", ".join(f"{c.number}x" for c in lacking)
                out.append(f"{row[0].path}:{number}: row not backed by its linked {folders}: {shown}")
        if not unlinked:
            continue
        lacking = {name: unbacked(unlinked, held) for name, held in values.items()}
        best = min(lacking, key=lambda name: len(lacking[name]), default=None)
        if best is None or lacking[best]:
            shown = ", ".join(f"{c.number}x (line {c.line})" for c in lacking.get(best, unlinked))
            out.append(
                f"{unlinked[0].path}:{span[0]}: table of {len(unlinked)} speedups no single result file "
                f"backs; the closest, {best}, lacks {shown}"
            )
    return out


def committed_results() -> dict[str, set[str]]:
    """Every result file's numbers, by path."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: which result files are committed is unknown")
    listed = subprocess.run(
        ["git", "ls-files", "-z", RESULTS], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    names = [n for n in listed.split("\0") if n.endswith(RESULT_SUFFIXES) and not RECORDS.search(n)]
    return {name: numbers((REPO / name).read_text(errors="replace")) for name in names}


def readme_claims() -> tuple[list[Claim], dict[str, str], set[tuple[str, str]]]:
    """The READMEs' speedups less the quoted ones, each README's text, the QUOTED entries used."""
    found, texts, used = [], {}, set()
    for readme in READMES:
        text = texts[readme] = (REPO / readme).read_text()
        lines = text.splitlines()
        for claim in claims(text, readme):
            line = lines[claim.line - 1]
            if quoted(claim, line):
                used |= {(n, c) for n, c, _ in QUOTED if n == claim.number and c in line}
            else:
                found.append(claim)
    return found, texts, used


def test_matcher_reports_unbacked_numbers():
    text = (
        "auto 1.63x and 9.876x; a range 1.23-1.38x; Qwen2.5-Coder-0.5B, transformers 5.24.0\n"
        "\n"
        "| method | tok/s | vs HF | speedup |\n"
        "|---|---|---|---|\n"
        "| auto | 41.0 | **1.810x** | 2.75 |\n"
    )
    found = claims(text, "X.md")
    assert [(c.line, c.number) for c in found] == [
        (1, "1.63"),
        (1, "9.876"),
        (1, "1.23"),
        (1, "1.38"),
        (5, "1.810"),
        (5, "2.75"),
    ]
    values = numbers("ratio,other\n1.6261,1.2250\n1.375,2.7549\n1.81\n")
    # 1.2250 -> 1.22 half-even, 1.23 half-up: both accepted; 1.81 is 1.810 written with fewer decimals
    assert [str(c) for c in unbacked(found, values)] == ["X.md:1: 9.876x"]
    assert tables(text) == [range(3, 6)]
    one_file = {"a.md": numbers("1.81 2.75"), "b.md": numbers("1.63")}
    assert table_mismatches(found, text, one_file) == []
    split = {"a.md": numbers("1.81"), "b.md": numbers("2.75")}
    assert table_mismatches(found, text, split) == [
        "X.md:3: table of 2 speedups no single result file backs; the closest, a.md, lacks 2.75x (line 5)"
    ]
    linked = text.replace("| auto |", f"| [auto]({RESULTS}/b/b.md) |")
    results = {f"{RESULTS}/a/a.md": numbers("1.81 2.75"), f"{RESULTS}/b/b.csv": numbers("1.81")}
    assert table_mismatches(claims(linked, "X.md"), linked, results) == [
        f"X.md:5: row not backed by its linked ['{RESULTS}/b']: 2.75x"
    ]
    assert RECORDS.search("experiments/results/x/sweep/3/steps.csv")
    assert RECORDS.search("m/modeled_auto_per_prompt.csv") and not RECORDS.search("x/summary.csv")


def test_every_readme_speedup_is_in_a_committed_result():
    values = committed_results()
    found, texts, used = readme_claims()
    assert len(found) > 100  # the extraction still finds the READMEs' speedups
    missing = unbacked(found, set().union(*values.values()))
    assert not missing, (
        f"{len(missing)} of {len(found)} speedups in the READMEs stand in no committed file under "
        f"{RESULTS}/ at the precision written:\n" + "\n".join(map(str, missing))
    )
    mixed = [m for readme in READMES for m in table_mismatches(found, texts[readme], values)]
    assert not mixed, "tables backed piecemeal, by numbers of several results:\n" + "\n".join(mixed)
    assert used == {(n, c) for n, c, _ in QUOTED}, "QUOTED has entries no README line needs"
