"""The one driver, through a planted part (``experiments/tests/_planted.py``) that has no code of its own for any
of it: it runs, resumes, refuses a foreign folder, overwrites, records its time once, writes its
summary and claims, and stops on Ctrl-C with exit code 130, through the command line and Python alike."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cfm_experiments
from cfm_experiments.cli import main
from cfm_experiments.driver import claims_table, default_out, load_summary
from cfm_experiments.protocol import Declaration, Option, Part, Settings, Summary

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def planted(monkeypatch):
    import _planted

    monkeypatch.setitem(cfm_experiments.COMMANDS, "planted", _planted.COMMAND)
    return _planted


def _rows(out):
    return [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]


def test_a_planted_part_runs_through_the_driver(tmp_path, planted):
    out = tmp_path / "o"
    report = cfm_experiments.run("planted", out=out, sizes=[2, 3, 4])
    rows = _rows(out)
    assert [r["config"] for r in rows] == [{"part": "planted", "n": n, "seed": 0, "pause": 0.0} for n in (2, 3, 4)]
    assert all(r["seconds"] >= 0 for r in rows)  # the driver timed each row, once
    summary = load_summary(out)
    assert summary["command"] == "planted" and summary["parts"] == ["planted"]
    assert summary["settings"] == {"quick": False, "seed": 0, "sizes": [2, 3, 4], "pause": 0.0}
    assert summary["rows_seconds"] == pytest.approx(sum(r["seconds"] for r in rows))
    assert summary["wall_seconds"] >= summary["rows_seconds"]
    assert summary["results"]["planted"]["mean_square"] == pytest.approx(sum(r["sumsq"] for r in rows) / 9)
    assert summary["claims"][0]["command"] == "cfm-jax planted --parts planted"
    assert {"planted.png", "claims.md", "note.txt"} <= set(summary["files"])
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["experiment"] == "planted" and manifest["config"]["parts"] == ["planted"]
    assert set(manifest["files"]) == {"rows.jsonl", "planted.png", "claims.md", "note.txt", "summary.json"}
    assert report.passed and [r["n"] for r in (x["config"] for x in report.rows)] == [2, 3, 4]


def test_resume_runs_only_the_missing_rows_and_refuses_another_run(tmp_path, planted):
    from cfm_experiments.driver import execute, open_folder
    from cfm_experiments.protocol import resolve

    out = tmp_path / "o"
    cmd = planted.COMMAND
    parts = cmd.select(None)
    settings = resolve(parts, sizes=[2, 3, 4])
    execute(cmd, parts, settings, open_folder(cmd, parts, settings, out, "new"), progress=False, stop_after=1)
    first = _rows(out)
    assert len(first) == 1
    with pytest.raises(ValueError, match="already holds results"):
        cfm_experiments.run("planted", out=out, sizes=[2, 3, 4])
    with pytest.raises(ValueError, match=r"--resume: .* holds results of `planted`.*sizes"):
        cfm_experiments.run("planted", out=out, sizes=[2, 3, 5], mode="resume")
    cfm_experiments.run("planted", out=out, sizes=[2, 3, 4], mode="resume")
    rows = _rows(out)
    assert rows[0] == first[0]  # kept bit for bit, not re-run
    assert [r["config"]["n"] for r in rows] == [2, 3, 4]
    fresh = tmp_path / "fresh"
    cfm_experiments.run("planted", out=fresh, sizes=[2, 3, 4])
    strip = lambda rs: [{k: v for k, v in r.items() if k != "seconds"} for r in rs]  # noqa: E731
    assert strip(_rows(fresh)) == strip(rows)  # resumed = uninterrupted


def test_overwrite_and_parts(tmp_path, planted):
    out = tmp_path / "o"
    cfm_experiments.run("planted", out=out, sizes=[2, 3])
    cfm_experiments.run("planted", out=out, sizes=[4, 5], mode="overwrite")
    assert [r["config"]["n"] for r in _rows(out)] == [4, 5]
    assert not (out / "rows.jsonl.tmp").exists()
    report = cfm_experiments.run("planted", out=tmp_path / "p", parts=["other"])
    assert [r["value"] for r in report.rows] == [1]
    with pytest.raises(ValueError, match="--parts: unknown part 'nope'"):
        cfm_experiments.run("planted", out=tmp_path / "q", parts=["nope"])
    with pytest.raises(ValueError, match="--sizes: not an option of the parts run"):
        cfm_experiments.run("planted", out=tmp_path / "q", parts=["other"], sizes=[2, 3])


def test_default_out_names_a_non_default_choice_of_parts(planted):
    cmd = planted.COMMAND
    assert default_out(cmd, cmd.select(None)) == Path("cfm_out/planted")
    assert default_out(cmd, cmd.select(["planted", "other"])) == Path("cfm_out/planted/planted+other")


def test_python_entry_point_applies_the_command_line_rules(tmp_path, planted):
    with pytest.raises(ValueError, match=r"--seed must be an integer in \[0, 2\*\*62\)"):
        cfm_experiments.run("planted", out=tmp_path / "a", seed=-1)
    with pytest.raises(ValueError, match=r"--seed must be an integer"):
        cfm_experiments.run("planted", out=tmp_path / "a", seed=1.5)
    with pytest.raises(ValueError, match="--sizes needs at least 2 value"):
        cfm_experiments.run("planted", out=tmp_path / "a", sizes=[3])
    with pytest.raises(ValueError, match="unknown command 'nope'"):
        cfm_experiments.run("nope")
    with pytest.raises(ValueError, match="--out '': an empty path"):
        cfm_experiments.run("planted", out="")  # not the current folder
    assert not (tmp_path / "a").exists()  # refused before anything was written


def test_claims_table_has_one_row_per_claim():
    from cfm_experiments import Claim

    c = Claim("a | b", "x", "holds", command="cfm-jax t", figure="f.png")
    table = claims_table([c, c]).splitlines()
    assert len(table) == 4 and "a \\| b" in table[2] and "**holds**" in table[2]


def _cli(args, env=None):
    return subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "_planted.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow  # three commands, each in its own interpreter
def test_the_command_line_runs_it_and_errors_are_one_line(tmp_path):
    proc = _cli(["--out", str(tmp_path / "o"), "--sizes", "2", "3", "--no-progress"])
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err
    assert "Claimed vs measured" in out and "wrote" in out.splitlines()[-1]
    proc = _cli(["--out", str(tmp_path / "o"), "--sizes", "2", "3", "--no-progress"])
    _, err = proc.communicate(timeout=900)
    assert proc.returncode == 1 and len(err.strip().splitlines()) == 1 and "--resume" in err
    proc = _cli(["--out", str(tmp_path / "x"), "--sizes", "0", "3"])
    _, err = proc.communicate(timeout=900)
    assert proc.returncode == 2 and err.strip() == "cfm-jax planted: error: --sizes must be an integer >= 1, got 0."


@pytest.mark.slow  # a command in its own interpreter, interrupted and resumed
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_ctrl_c_exits_130_with_finished_rows_on_disk_and_resume_completes(tmp_path):
    out = tmp_path / "o"
    args = ["--out", str(out), "--sizes", "2", "3", "4", "--pause", "2", "--no-progress"]
    proc = _cli(args)
    t0 = time.monotonic()
    while not ((out / "rows.jsonl").exists() and (out / "rows.jsonl").read_text().count("\n") >= 1):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < 900
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "--resume" in err
    done = _rows(out)
    assert 1 <= len(done) < 3
    proc = _cli(args + ["--resume"])
    _, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err
    rows = _rows(out)
    assert rows[: len(done)] == done and [r["config"]["n"] for r in rows] == [2, 3, 4]


def test_the_worked_example_of_the_docs_runs_through_the_driver(tmp_path, monkeypatch):
    """docs/experiments.md's experiment, as written there (its first python block), registered as
    the page's entry point registers it (the ``cfm_experiments.commands`` entry ``gap``)."""
    import re
    import tomllib

    from cfm_experiments.registry import GROUP, Command

    text = (ROOT.parent / "docs" / "experiments.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    (toml,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    assert tomllib.loads(toml)["project"]["entry-points"][GROUP] == {"gap": "gap_command:GAP"}
    # the page's `GAP = Command(...)` of gap_command.py (wrapped across lines in the prose)
    (held,) = re.findall(r"`GAP = (Command\(.*?\))`", text.replace("\n", " "))
    page_command = eval(held, {"Command": Command})
    assert page_command == Command("gap", "gap_example", page_command.help)
    (tmp_path / "gap_example.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cfm_experiments.COMMANDS, "gap", page_command)
    report = cfm_experiments.run("gap", out=tmp_path / "o", quick=True, seeds=3)
    (claim,) = report.claims
    assert claim.command == "cfm-jax gap --quick" and claim.verdict in cfm_experiments.VERDICTS
    assert [r["config"]["n"] for r in report.rows] == [16, 64]
    assert all(len(r["gaps"]) == 3 and min(r["gaps"]) > 0 for r in report.rows)
    assert (tmp_path / "o" / "gap.png").exists()
    with pytest.raises(ValueError, match=r"--ns needs at least 2 value\(s\)"):
        cfm_experiments.run("gap", out=tmp_path / "p", ns=[8])


FAILING = Option("failing", "none", "the part whose check fails", kind="choice", choices=("one", "two", "none"))
PARTS = (Declaration("one", (FAILING,)), Declaration("two", (FAILING,)))


class _Check(Part):
    """A part whose check passes unless ``--failing`` names it (a base: each part its subclass)."""

    title = "a check"

    def configs(self, settings: Settings) -> list[dict]:
        return [{"seed": settings.seed}]

    def run(self, config: dict) -> dict:
        return {"value": 1}

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        return Summary(text=self.name, passed=settings["failing"] != self.name)


class _One(_Check):
    declaration = PARTS[0]


class _Two(_Check):
    declaration = PARTS[1]


@pytest.fixture
def checks(monkeypatch):
    from cfm_experiments.registry import Command

    cmd = Command("checks", __name__, "two checks (tests)")
    monkeypatch.setitem(cfm_experiments.COMMANDS, cmd.name, cmd)
    return cmd


def test_a_command_fails_when_any_part_fails(tmp_path, checks):
    """One failing part beside a passing one, whichever comes first: summary.json records a failure
    and the command line exits with 1; with every part passing, a pass and 0."""
    for failing in ("one", "two", "none"):
        out = tmp_path / failing
        report = cfm_experiments.run("checks", out=out, failing=failing)
        assert report.passed is (failing == "none")
        assert load_summary(out)["passed"] is (failing == "none")
        argv = ["checks", "--out", str(tmp_path / f"cli-{failing}"), "--failing", failing, "--no-progress"]
        assert main(argv) == (0 if failing == "none" else 1)
        assert load_summary(tmp_path / f"cli-{failing}")["passed"] is (failing == "none")


def test_a_subset_of_parts_never_writes_into_the_full_runs_folder(tmp_path, monkeypatch, checks):
    """The full run and a run of some of its parts have different default folders: the subset is not
    refused for the full run's results (no --resume, no --overwrite needed), and its --overwrite removes
    nothing of the full run; the same through the command line."""
    monkeypatch.chdir(tmp_path)
    full = default_out(checks, checks.select(None))
    assert default_out(checks, checks.select(["one"])) != full
    cfm_experiments.run("checks")
    kept = {p.name: p.read_bytes() for p in full.iterdir() if p.is_file()}
    assert {"rows.jsonl", "summary.json", "run.json"} <= set(kept)
    for mode in ("new", "overwrite"):
        subset = cfm_experiments.run("checks", parts=["one"], mode=mode)
        assert subset.folder != full and [r["config"]["part"] for r in subset.rows] == ["one"]
        assert {p.name: p.read_bytes() for p in full.iterdir() if p.is_file()} == kept
    for flag in ((), ("--overwrite",)):
        assert main(["checks", "--parts", "two", "--no-progress", *flag]) == 0
        assert {p.name: p.read_bytes() for p in full.iterdir() if p.is_file()} == kept
    assert load_summary(full)["parts"] == ["one", "two"]
