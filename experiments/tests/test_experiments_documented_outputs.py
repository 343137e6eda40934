"""What the pages say about the command's installation and files is so.

The extras a page names (``the `NAME` extra``, ``.[NAME]``) are the library's (pyproject.toml): the
``cfm-jax`` command is a distribution of its own, not an extra.

Every table of README.md and docs/*.md with a ``writes`` column names, for each ``cfm-jax NAME``
row (the command's default parts), the files that run writes into ``--out``; so does README's
set-up sentence for the main job (``writes `cfm_out/rates/rows.jsonl`, ...``). Files in a
parenthesis about other parts (``(and ... for the other parts)``) are those parts', not checked here.
Each named file must be one the run records in ``run.json``: the committed default runs'
(``experiments/results/NAME/run.json``, the default suite) and a ``--quick`` run's (slow: every
command run).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cfm_experiments import cli

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: a file name in backticks: a name with an extension (a ``{a,b}`` alternative allowed)
_FILE = re.compile(r"`([\w{},.-]+\.[a-z]+)`")
#: a parenthesis about other parts than the default ones: its files are theirs
_OTHER_PARTS = re.compile(r"\([^()]*(?:other parts|--parts)[^()]*\)")
#: a parenthesis about the default run only: its files are not the ``--quick`` run's
_NOT_QUICK = re.compile(r"\([^()]*without `--quick`[^()]*\)")
#: README's set-up sentence: writes `cfm_out/NAME/FILE`, `FILE`, ... and `FILE`) (a part's subfolder,
#: `cfm_out/NAME/PART/FILE`, is not the command's default run)
_SENTENCE = re.compile(r"writes\s+`cfm_out/(\w+)/([^`/]+)`([^)]*)\)")


def _expand(name: str) -> list[str]:
    """``ogd_claims_{n,d,k}.png`` as the three names it stands for."""
    m = re.search(r"\{([^{}]*)\}", name)
    if not m:
        return [name]
    return [n for alt in m.group(1).split(",") for n in _expand(name[: m.start()] + alt + name[m.end() :])]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def documented_outputs(text: str, *, quick: bool = False) -> dict[str, set[str]]:
    """{command: the files ``text`` says ``cfm-jax command`` (its default parts) writes}; ``quick``:
    with ``--quick`` (files in a parenthesis saying "without `--quick`" left out)."""
    found: dict[str, set[str]] = {}
    column = None
    for line in text.splitlines():
        if not line.startswith("|"):
            column = None
            continue
        cells = _cells(line)
        writes = [i for i, c in enumerate(cells) if c.startswith("writes")]
        if writes:  # a table's header
            column = writes[0]
            continue
        m = re.fullmatch(r"`cfm-jax (\w+)`", cells[0])
        if column is None or m is None or len(cells) <= column:
            continue
        cell = _OTHER_PARTS.sub("", cells[column])
        cell = _NOT_QUICK.sub("", cell) if quick else cell
        found.setdefault(m.group(1), set()).update(f for n in _FILE.findall(cell) for f in _expand(n))
    for m in _SENTENCE.finditer(text):
        names = [m.group(2), *_FILE.findall(m.group(3))]
        found.setdefault(m.group(1), set()).update(f for n in names for f in _expand(n))
    return found


def _documented(*, quick: bool = False) -> list[tuple[str, str, str]]:
    """(page, command, file) for every file a page says an experiment writes (``quick``: with ``--quick``)."""
    return sorted(
        (page.name, name, f)
        for page in PAGES
        for name, files in documented_outputs(page.read_text(), quick=quick).items()
        if name in cli.COMMANDS
        for f in files
    )


def _missing(documented, written: dict[str, set[str]]) -> list[tuple[str, str, str]]:
    return [(page, name, f) for page, name, f in documented if name in written and f not in written[name]]


def test_the_parser_reads_tables_and_the_sentence_and_leaves_other_parts_out():
    """A page saying what it should not is caught: a table row's files (other parts' left out, braces
    expanded), the set-up sentence's; a table without a writes column, and a --parts row, say nothing."""
    page = """
| command | what it does | writes (in `--out`) | time |
|---|---|---|---|
| `cfm-jax ogd` | OGD | `pilot.jsonl` (a pilot), `rows.jsonl`, `ogd_{a,b}.png` (and `claims.md` for other parts) | 1 s |
| `cfm-jax sync` | SDE | `rows.jsonl` (and `weak.png` without `--quick`) | 3 s |
| `cfm-jax sync --parts paper` | grid | `paper/`: `paper.png` | 2 s |

| command | files |
|---|---|
| `cfm-jax rates` | `nothing.png` |

the main job (prints, writes
`cfm_out/rates/rows.jsonl`, `table.txt` and `rates.png`). Then
a part writes `cfm_out/sync/figure1/figure1.png` and `summary.json`.
"""
    assert documented_outputs(page) == {
        "ogd": {"pilot.jsonl", "rows.jsonl", "ogd_a.png", "ogd_b.png"},
        "sync": {"rows.jsonl", "weak.png"},
        "rates": {"rows.jsonl", "table.txt", "rates.png"},
    }
    assert documented_outputs(page, quick=True)["sync"] == {"rows.jsonl"}
    written = {"ogd": {"rows.jsonl", "ogd_a.png", "ogd_b.png"}, "rates": {"rows.jsonl", "table.txt", "rates.png"}}
    written["sync"] = {"rows.jsonl", "weak.png"}
    documented = [("p", n, f) for n, fs in documented_outputs(page).items() for f in sorted(fs)]
    assert _missing(documented, written) == [("p", "ogd", "pilot.jsonl")]


def test_the_pages_name_every_experiment_they_list_files_for():
    """The check has something to check: README and getting-started list each experiment's files."""
    for page in ("README.md", "getting-started.md"):
        assert {n for p, n, _ in _documented() if p == page} == set(cli.COMMANDS), page


def test_the_files_the_pages_name_are_the_committed_runs():
    """Each documented file is one the committed default run of that command wrote (its run.json), for
    the commands with a committed run (the main job and ogd among them)."""
    results = ROOT / "experiments" / "results"
    written = {
        name: set(json.loads((results / name / "run.json").read_text())["files"])
        for name in cli.COMMANDS
        if (results / name / "run.json").is_file()
    }
    assert {"rates", "ogd"} <= set(written)
    assert _missing(_documented(), written) == []


def named_extras(text: str) -> set[str]:
    """The extras of this project ``text`` names: ``the `NAME` extra`` (not ``... extra of `jax```), ``.[NAME]``."""
    names = set(re.findall(r"the `(\w+)` extra(?! of `)", text))
    return names | {n for group in re.findall(r"\.\[([\w,]+)\]", text) for n in group.split(",")}


def test_the_extras_the_pages_name_exist():
    """No page names an extra the library does not have (the experiments are ``pip install -e ./experiments``)."""
    import tomllib

    assert named_extras('the `experiments` extra; the `cuda12` extra of `jax`; pip install -e ".[test,docs]"') == {
        "experiments",
        "test",
        "docs",
    }
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    named = {(page.name, n) for page in PAGES for n in named_extras(page.read_text())}
    assert named and {(p, n) for p, n in named if n not in extras} == set()


@pytest.fixture(scope="module")
def quick_outputs(tmp_path_factory):
    """{command: the files its --quick run recorded in run.json}, each run once."""
    import cfm_experiments

    out = {}
    for name in cli.COMMANDS:
        folder = tmp_path_factory.mktemp(name) / "out"
        cfm_experiments.run(name, quick=True, out=folder)
        out[name] = set(json.loads((folder / "run.json").read_text())["files"])
    return out


@pytest.mark.slow  # every command's --quick run (minutes)
def test_the_files_the_pages_name_are_what_a_quick_run_writes(quick_outputs):
    """Each documented file is written by the command's ``--quick`` run (but those the pages say it does not)."""
    assert _missing(_documented(quick=True), quick_outputs) == []
