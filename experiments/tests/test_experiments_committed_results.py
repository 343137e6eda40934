"""Committed results (experiments/results): strict JSON, rows the runner reads, a record of what wrote them.

Not tied to one library module: it checks the files the experiments committed, with the rules the
current code writes them by (NaN and infinities are null, never the strings "nan"/"inf" nor bare
NaN/Infinity constants).
"""

import json
from pathlib import Path

import pytest

from cfm_experiments.registry import COMMANDS
from cfm_experiments.results import MANIFEST, read_rows

RESULTS = Path(__file__).resolve().parents[1] / "results"
SUMMARIES = sorted(RESULTS.rglob("summary.json"))
ROWS = sorted(RESULTS.rglob("*.jsonl"))


def _refuse(constant):
    raise ValueError(f"non-JSON constant {constant}")


def _no_number_strings(x, where):
    """Numbers stored as strings ("nan", "inf") are what an older writer left: the current one writes null."""
    if isinstance(x, dict):
        for k, v in x.items():
            _no_number_strings(v, f"{where}/{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            _no_number_strings(v, f"{where}[{i}]")
    else:
        assert not (isinstance(x, str) and x.strip().lower().lstrip("+-") in ("nan", "inf", "infinity")), where


def test_there_are_committed_results():
    assert len(SUMMARIES) >= 5 and ROWS


@pytest.mark.parametrize("path", SUMMARIES, ids=lambda p: str(p.relative_to(RESULTS)))
def test_summary_is_strict_json(path):
    data = json.loads(path.read_text(), parse_constant=_refuse)
    _no_number_strings(data, path.name)


@pytest.mark.parametrize("path", ROWS, ids=lambda p: str(p.relative_to(RESULTS)))
def test_rows_are_strict_json_rows(path):
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        _no_number_strings(json.loads(line, parse_constant=_refuse), f"{path.name}:{i + 1}")
    assert len(read_rows(path)) == len(lines)  # every line a complete row under its configuration's key


def test_strictness_is_checked():
    """The checks fail on what they must catch (a bare NaN, a number stored as a string)."""
    with pytest.raises(ValueError, match="NaN"):
        json.loads('{"a": NaN}', parse_constant=_refuse)
    with pytest.raises(AssertionError):
        _no_number_strings({"ci": ["nan", 1.0]}, "x")


@pytest.mark.parametrize("path", SUMMARIES, ids=lambda p: str(p.parent.relative_to(RESULTS)))
def test_every_results_folder_records_what_wrote_it(path):
    """run.json beside the summary names the experiment and configuration, and lists every rows file,
    the summary and the figures (what a later --overwrite removes)."""
    folder = path.parent
    run = json.loads((folder / MANIFEST).read_text(), parse_constant=_refuse)
    experiments = (*COMMANDS, "constants")  # "constants": folders the claims command's predecessor wrote
    assert run["experiment"].split()[0] in experiments and isinstance(run["config"], dict)
    written = {
        p.name for p in folder.iterdir() if p.suffix in (".jsonl", ".png", ".txt", ".md") or p.name == "summary.json"
    }
    assert set(run["files"]) == written
