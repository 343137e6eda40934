"""The console entry point: help and defaults, global options anywhere, one-line errors, JSON, demo output."""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _tiny_rates import TINY_RATES

from cfm_experiments import cli

EXPERIMENTS = ("rates", "ogd", "gradcheck", "sync", "claims")


def _run(*args, timeout=900):
    return subprocess.run(
        [sys.executable, "-m", "cfm_experiments", *args], capture_output=True, text=True, timeout=timeout
    )


def _one_line_error(proc):
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def _sub(name):
    parser = cli.build_parser([name])
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_every_option_shows_its_default(name):
    """Every option with a value has its default in --help (computed defaults say so in words)."""
    sub = _sub(name)
    text = sub.format_help()
    for action in sub._actions:
        if not action.option_strings or action.nargs == 0 or action.dest == "help":
            continue
        if action.default is None and name in ("sync", "gradcheck"):
            continue  # sync and gradcheck word their computed defaults themselves
        assert "default" in (sub.formatter_class(name)._get_help_string(action) or ""), (name, action.dest)
    assert "--float64" in text and "--cache-dir" in text  # global options are accepted here too


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_shared_experiment_options(name):
    dests = {a.dest for a in _sub(name)._actions}
    assert {"quick", "out", "resume", "seed", "no_progress"} <= dests


def test_global_options_before_or_after_the_subcommand():
    parse = lambda argv: cli.build_parser(argv).parse_args(argv)  # noqa: E731
    assert parse(["demo", "--float64"]).float64 and parse(["--float64", "demo"]).float64
    assert not parse(["demo"]).float64
    assert str(parse(["rates", "--cache-dir", "/tmp/c"]).cache_dir) == "/tmp/c"
    assert str(parse(["--cache-dir", "/tmp/c", "rates"]).cache_dir) == "/tmp/c"
    assert parse(["ogd", "--no-cache"]).no_cache


#: a driver run in a fresh interpreter: the `experiments` extra (matplotlib, tqdm) is made absent, then
#: `cfm-jax ARGS` runs; the modules imported are printed last, as JSON.
WITHOUT_EXTRA = """
import json, os, sys

BLOCKED = os.environ.get("CFM_TEST_BLOCKED", "matplotlib tqdm").split()

class NoExtra:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoExtra())
from cfm_experiments.cli import main

try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

#: what help must not import: it is text built from declarations.
HEAVY = ("jax", "jaxlib", "equinox", "diffrax", "optax", "numpy", "scipy", "matplotlib", "tqdm", "cfm_jax")
#: the modules of the package help may import: the command line, the registry, the declarations, the
#: measured times it quotes (and the protocol's standard-library-only vocabulary of verdicts).
LIGHT = (
    "cfm_experiments.cli",
    "cfm_experiments.measured",
    "cfm_experiments.options",
    "cfm_experiments.registry",
    "cfm_experiments.signals",
    "cfm_experiments.protocol",
    "cfm_experiments.verdicts",
    "cfm_experiments.declarations",
)


def _without_extra(*args, blocked="matplotlib tqdm"):
    env = {**os.environ, "CFM_TEST_BLOCKED": blocked}
    proc = subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRA, *args], capture_output=True, text=True, timeout=900, env=env
    )
    return proc, json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("argv", [[], ["demo"], *([n] for n in cli.COMMANDS)], ids=lambda a: a[0] if a else "cfm-jax")
def test_help_is_text_from_declarations(argv):
    """Every --help shows without matplotlib and tqdm and imports neither JAX, nor numpy, nor an
    experiment: only the command line, the registry and the declarations."""
    proc, out = _without_extra(*argv, "--help")
    assert out["code"] == 0 and proc.stdout.startswith("usage: cfm-jax"), proc.stdout + proc.stderr
    heavy = [m for m in out["modules"] if m.split(".")[0] in HEAVY]
    assert not heavy, heavy
    ours = [m for m in out["modules"] if m.startswith("cfm_experiments.") and not m.startswith(LIGHT)]
    assert not ours, ours
    if not argv:
        assert all(c in proc.stdout for c in cli.COMMANDS)


def test_a_run_without_the_extra_is_one_line_naming_it(tmp_path):
    """Without matplotlib and tqdm an experiment ends before any work: one line naming them,
    exit 2 (how to use this installation), no results folder."""
    proc, out = _without_extra("gradcheck", "--quick", "--no-progress", "--out", str(tmp_path / "never"))
    assert out["code"] == 2 and proc.stderr.strip() == cli.NEEDS_EXTRA, proc.stderr
    assert not (tmp_path / "never").exists()


def test_a_module_the_extra_needs_missing_is_the_extra_missing(tmp_path):
    """matplotlib importing but pyplot not (its kiwisolver missing): the same one-line install hint, naming
    what is missing, exit 2, no results folder (not a ModuleNotFoundError once the parts are imported)."""
    proc, out = _without_extra("gradcheck", "--quick", "--out", str(tmp_path / "never"), blocked="kiwisolver")
    (line,) = proc.stderr.strip().splitlines()
    assert out["code"] == 2 and line.startswith(cli.NEEDS_EXTRA) and "kiwisolver" in line, proc.stderr
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["rates", "--seeds", "0"], "--seeds"),
        (["rates", "--out", "/proc/nope"], "--out /proc/nope"),
        (["ogd", "--parts", "curvature", "--curvature-seeds", "1"], "--curvature-seeds"),
        (["sync", "--out", "FILE"], "--out"),
    ],
)
def test_a_bad_option_is_refused_before_the_heavy_imports(tmp_path, argv, flag):
    """Options are checked from their declarations: one line naming the option, exit 2, no folder, and
    neither JAX nor the extra imported (the check comes before both: with the extra absent the option
    is still what the line names)."""
    if "/proc/nope" in argv and not Path("/proc").is_dir():
        pytest.skip("no /proc")
    file = tmp_path / "a_file"
    file.write_text("")
    argv = [str(file) if a == "FILE" else a for a in argv]
    proc, out = _without_extra(*argv)
    (line,) = proc.stderr.strip().splitlines()
    assert out["code"] == 2 and flag in line and line.startswith(f"cfm-jax {argv[0]}: error: "), proc.stderr
    heavy = [m for m in out["modules"] if m.split(".")[0] in HEAVY]
    assert not heavy, heavy
    assert not Path("/proc/nope").exists() and file.is_file()


def test_check_out_refuses_what_cannot_hold_results(tmp_path):
    from cfm_experiments.options import check_out

    assert check_out(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists() and list(tmp_path.iterdir()) == []  # the probe leaves nothing
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="--out .*: exists and is not a folder"):
        check_out(tmp_path / "f")
    with pytest.raises(ValueError, match="--out .*f is not a folder"):
        check_out(tmp_path / "f" / "sub")


def test_the_extra_is_what_pyproject_installs():
    """``EXTRA`` is what the experiments' distribution depends on beside the library."""
    import re
    import tomllib

    needs = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["dependencies"]
    assert {re.split(r"[<>=!~;\[ ]", r)[0] for r in needs} - {"cfm_jax"} == cli.EXTRA


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_help_offers_parts_only_to_commands_that_have_several(name):
    from cfm_experiments.driver import default_out

    cmd = cli.COMMANDS[name]
    text = " ".join(_sub(name).format_help().split())
    several = len(cmd.parts()) > 1
    assert ("--parts" in text) == several, name
    assert f"(default: {default_out(cmd, cmd.default_parts())}" in text  # the driver's own default


@pytest.mark.slow  # one interpreter per refused command line
def test_errors_are_one_line_without_traceback(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    line = _one_line_error(_run(*TINY_RATES, "--out", str(blocker / "sub")))
    assert "--out" in line
    line = _one_line_error(_run("rates", "--ns", "8", "--out", str(tmp_path / "o")))
    assert "--ns" in line
    line = _one_line_error(_run("demo", "--context", "0"))
    assert "context" in line
    _one_line_error(_run("nope"))


@pytest.mark.slow  # a whole tiny sweep through main()
def test_rates_writes_valid_json_and_names_every_file(tmp_path, capsys):
    out = tmp_path / "rates"
    assert cli.main([*TINY_RATES, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for name in ("rows.jsonl", "table.txt", "summary.json", "rates.png"):
        assert name in text.splitlines()[-1] and (out / name).exists(), name
    strict = lambda s: json.loads(s, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))  # noqa: E731
    summary = strict((out / "summary.json").read_text())
    assert {f["quantity"] for f in summary["results"]["exact"]["fits"]} >= {"token", "w1"}
    assert all(strict(line) for line in (out / "rows.jsonl").read_text().splitlines())


@pytest.mark.slow  # several tiny sweeps, each in its own interpreter
def test_results_cannot_be_mixed_or_destroyed(tmp_path):
    """Real subprocesses on one output folder: a rerun without --resume, a --resume with another seed
    and a --resume of another experiment all refuse with one line naming both runs, before any work
    and leaving the rows as they were; a crash mid-line is repaired by --resume; --overwrite replaces
    the results."""
    out = tmp_path / "o"
    first = _run(*TINY_RATES, "--out", str(out))
    assert first.returncode == 0, first.stderr
    rows = (out / "rows.jsonl").read_text()
    run = json.loads((out / "run.json").read_text())
    assert run["experiment"] == "rates" and run["config"]["seed"] == 0 and run["config"]["ns"] == [4, 8]
    assert {"rows.jsonl", "summary.json", "rates.png", "table.txt"} <= set(run["files"])

    line = _one_line_error(_run(*TINY_RATES, "--out", str(out)))
    assert "already holds results of `rates`" in line and "--resume" in line and "--overwrite" in line
    line = _one_line_error(_run(*TINY_RATES, "--out", str(out), "--seed", "1", "--resume"))
    assert "`rates` with seed=0, not of this run, `rates` with seed=1" in line and "--overwrite" in line
    line = _one_line_error(_run("ogd", "--quick", "--no-progress", "--out", str(out), "--resume"))
    assert "holds results of `rates`, not of this run, `ogd`" in line
    assert (out / "rows.jsonl").read_text() == rows

    (out / "rows.jsonl").write_text(rows + rows.splitlines()[0][:40])  # a crash mid-line
    resumed = _run(*TINY_RATES, "--out", str(out), "--resume")
    assert resumed.returncode == 0 and "torn last line" in resumed.stderr, resumed.stderr
    assert (out / "rows.jsonl").read_text() == rows  # nothing rerun, nothing lost

    over = _run(*TINY_RATES, "--out", str(out), "--seed", "1", "--overwrite")
    assert over.returncode == 0, over.stderr
    new_rows = [json.loads(ln) for ln in (out / "rows.jsonl").read_text().splitlines()]
    assert len(new_rows) == len(rows.splitlines()) and {r["config"]["seed"] for r in new_rows} == {1}
    assert json.loads((out / "run.json").read_text())["config"]["seed"] == 1

    (out / "rows.jsonl").write_text("x\n" + rows)
    line = _one_line_error(_run(*TINY_RATES, "--out", str(out), "--seed", "1", "--resume"))
    assert str(out / "rows.jsonl") in line and "line 1 is corrupt" in line


@pytest.mark.slow  # one interpreter per refused command line
def test_options_are_checked_before_any_work(tmp_path):
    """Bad values of any subcommand's options end in one line naming the option, before JAX runs
    anything (no folder is made)."""
    for argv, flag in (
        (["sync", "--realisations", "-1"], "--realisations"),
        (["ogd", "--eta", "nan"], "--eta"),
        (["gradcheck", "--repeats", "0"], "--repeats"),
        (["rates", "--seed", "-3"], "--seed"),
        (["--cpu-devices", "0", "demo"], "--cpu-devices"),
    ):
        line = _one_line_error(
            _run(*argv, "--out", str(tmp_path / "never")) if argv[0] != "--cpu-devices" else _run(*argv)
        )
        assert flag in line, (argv, line)
    assert _run("sync", "--realisations", "1").returncode == 2  # a usage error, as argparse's own
    assert not (tmp_path / "never").exists()
    assert "--resume" in _one_line_error(_run("rates", "--resume", "--overwrite"))


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["claims", "--parts", "rho", "--rho-ns", "10", "10", "40"], "--rho-ns"),
        (["claims", "--parts", "tail_exponent", "--tail-ns", "16", "16"], "--tail-ns"),
        (["rates", "--dims", "2", "2"], "--dims"),
        (["ogd", "--parts", "bounds", "--ogd-dims", "2", "4", "2"], "--ogd-dims"),
    ],
)
def test_repeated_values_are_a_usage_error_before_any_work(argv, flag, tmp_path, capsys):
    """A list option's values are configurations: a repeat is refused by the option's rule (exit 2,
    one line naming it), before the results folder is made."""
    assert cli.main([*argv, "--no-progress", "--out", str(tmp_path / "never")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"{flag} must list distinct values" in lines[0], lines
    assert not (tmp_path / "never").exists()


@pytest.fixture
def planted(monkeypatch):
    import _planted

    import cfm_experiments

    monkeypatch.setitem(cfm_experiments.COMMANDS, "planted", _planted.COMMAND)
    return _planted


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--cpu-devices", "0"], "--cpu-devices must be an integer >= 1"),
        (["--cache-dir", "FILE"], "--cache-dir FILE: exists and is not a folder"),
        (["--cache-dir", "FILE/sub"], "--cache-dir FILE/sub: FILE is not a folder"),
        (["--no-cache", "--cache-dir", "NEW"], "--no-cache, --cache-dir NEW"),
    ],
)
@pytest.mark.parametrize("before", [True, False], ids=["before", "after"])
def test_a_bad_global_option_is_a_usage_error_before_any_work(tmp_path, capsys, planted, argv, flag, before):
    """The global options, before or after the command, are checked with the command's own: a bad one
    (or --no-cache with a --cache-dir it would ignore) is one line naming it, exit 2, and neither the
    results folder nor the cache folder is made."""
    (tmp_path / "FILE").write_text("")
    argv = [str(tmp_path / a) if a.split("/")[0] in ("FILE", "NEW") else a for a in argv]
    flag = flag.replace("FILE", str(tmp_path / "FILE")).replace("NEW", str(tmp_path / "NEW"))
    run = ["planted", "--sizes", "2", "3", "--no-progress", "--out", str(tmp_path / "never")]
    assert cli.main([*argv, *run] if before else [*run, *argv]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("cfm-jax planted: error: ") and flag in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE"]


@pytest.mark.parametrize(
    "argv", [["planted", "--out", ""], ["--cache-dir", "", "planted"], ["planted", "--cache-dir", " "]]
)
def test_an_empty_path_is_refused_not_taken_for_this_folder(tmp_path, capsys, planted, monkeypatch, argv):
    """``--out ''`` (or ``--cache-dir ''``) is not the current folder: argparse's one line, exit 2, nothing written."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        cli.main([*argv, "--no-progress"])
    assert exit_.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "an empty path is not a folder" in line and ("--out" in line or "--cache-dir" in line), line
    assert list(tmp_path.iterdir()) == []


#: ``cfm-jax ARGS`` in a fresh interpreter: its exit code and whether JAX was imported, as JSON.
IMPORTS_JAX = """
import json, sys
from cfm_experiments.cli import main

try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "jax": "jax" in sys.modules, "cfm_jax": "cfm_jax" in sys.modules}))
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["gradcheck", "--quick", "--cpu-devices", "0"],
        ["--cache-dir", "FILE", "gradcheck", "--quick"],
        ["gradcheck", "--quick", "--no-cache", "--cache-dir", "cache"],
        ["gradcheck", "--quick", "--out", ""],
    ],
    ids=["cpu-devices", "cache-dir-file", "no-cache-and-cache-dir", "empty-out"],
)
def test_a_bad_global_option_ends_before_jax_is_imported_and_writes_nothing(tmp_path, argv):
    """In a fresh interpreter run from an empty folder: exit 2 and one line on stderr, before JAX (or
    cfm_jax) is imported, and nothing is made there (no results, no cache, no ``cfm_out``)."""
    (tmp_path / "FILE").write_text("")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), *sys.path])}
    proc = subprocess.run(
        [sys.executable, "-c", IMPORTS_JAX, *argv], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env
    )
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out == {"code": 2, "jax": False, "cfm_jax": False}, (out, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE"]


@pytest.mark.parametrize("after", [0, 1, 2])
def test_an_interrupt_says_what_it_leaves(tmp_path, capsys, planted, monkeypatch, after):
    """Ctrl-C (here a KeyboardInterrupt from the part) after ``after`` finished rows: exit 130 and a line
    that tells the truth: the finished rows and --resume, or, with none, that a rerun needs no --resume
    (and there is no rows.jsonl)."""
    real = planted.Planted.run
    calls = []

    def run(self, config):
        calls.append(config)
        if len(calls) > after:
            raise KeyboardInterrupt
        return real(self, config)

    monkeypatch.setattr(planted.Planted, "run", run)
    out = tmp_path / "o"
    assert cli.main(["planted", "--sizes", "2", "3", "4", "--no-progress", "--out", str(out)]) == 130
    err = capsys.readouterr().err.strip()
    rows = out / "rows.jsonl"
    if after:
        assert err == "interrupted: " + cli.INTERRUPTED.format(n=after, folder=out)
        assert f"{after} finished row(s)" in err and "with --resume to continue" in err
        assert len(rows.read_text().splitlines()) == after
    else:
        assert err == "interrupted: " + cli.NOTHING_FINISHED and not rows.exists()
        assert "no row was finished" in err and "no --resume needed" in err


def test_an_interrupted_overwrite_has_no_row_of_its_own(tmp_path, capsys, planted, monkeypatch):
    """Interrupted before its first row, an --overwrite has finished nothing: the rows on disk are the
    earlier run's (untouched), not this one's to resume."""
    out = tmp_path / "o"
    argv = ["planted", "--sizes", "2", "3", "--no-progress", "--out", str(out)]
    assert cli.main(argv) == 0
    before = (out / "rows.jsonl").read_text()
    capsys.readouterr()

    def run(self, config):
        raise KeyboardInterrupt

    monkeypatch.setattr(planted.Planted, "run", run)
    assert cli.main([*argv, "--seed", "1", "--overwrite"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted: " + cli.NOTHING_FINISHED
    assert (out / "rows.jsonl").read_text() == before


@pytest.mark.slow  # a command in its own interpreter, signalled
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_ctrl_c_before_the_first_row_says_no_row_was_finished(tmp_path):
    """SIGINT while the first row runs (the signal watcher's path, not a KeyboardInterrupt): exit 130,
    the line says no row was finished and a rerun needs no --resume; no rows.jsonl."""
    import signal
    import time

    from test_experiments_signals import _handles_signals

    out = tmp_path / "o"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), str(Path(__file__).parents[1])])}
    args = ["--out", str(out), "--sizes", "2", "3", "--pause", "60", "--no-progress", "--no-cache"]
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).parent / "_planted.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    t0 = time.monotonic()
    while not (_handles_signals(proc.pid) and (out / "run.json").exists()):  # the folder is open: a row runs
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < 300
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and err.strip() == "SIGINT: " + cli.NOTHING_FINISHED, (proc.returncode, err)
    assert not (out / "rows.jsonl").exists()


@pytest.mark.parametrize("before", [None, "0"])
def test_no_progress_holds_for_the_call_only(tmp_path, planted, monkeypatch, before):
    """``--no-progress`` silences the bars an experiment builds itself (``TQDM_DISABLE`` while it
    runs) and leaves the caller's environment as it was: ``main`` may be called from Python."""
    if before is None:
        monkeypatch.delenv("TQDM_DISABLE", raising=False)
    else:
        monkeypatch.setenv("TQDM_DISABLE", before)
    seen = []
    run = planted.Planted.run
    monkeypatch.setattr(
        planted.Planted, "run", lambda self, c: (seen.append(os.environ.get("TQDM_DISABLE")), run(self, c))[1]
    )
    assert cli.main(["planted", "--sizes", "2", "3", "--no-progress", "--out", str(tmp_path / "o")]) == 0
    assert seen == ["1", "1"]
    assert os.environ.get("TQDM_DISABLE") == before
    seen.clear()
    assert cli.main(["planted", "--sizes", "2", "3", "--out", str(tmp_path / "p")]) == 0
    assert seen == [before, before]
