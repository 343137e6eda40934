"""The examples of README.md and docs/*.md, as a reader would use them.

**Python blocks.** Every ```` ```python ```` block of a page runs, the page's blocks top to bottom in
one namespace, in a fresh interpreter (the slow test; the blocks are sized to run in seconds each).
A ```` ```text ```` block right after a python block (blank lines between at most) is what that
block prints: the output must match it line by line, the words exactly and every number to 2 %
plus one unit of its last shown digit (integers exactly). A few statements of the prose about
those outputs are checked too (:data:`STATEMENTS`). A block that cannot run in one interpreter here
has the line ``<!-- docs-test: skip (REASON) -->`` right above it; the script of several processes
on docs/scaling.md runs under the launcher its page shows instead.

**Commands.** Every ``cfm-jax ...`` line of a shell block and every ``cfm-jax ...`` code span is
parsed and checked by the command line's own parser and option rules, without running it; a
synopsis (``[--quick]``, ``--a | --b``) has each of its options checked; a code span that is a
lone option (``--resume``) must be an option of some command, or of another tool the pages show
(:data:`OTHER_OPTIONS`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]

#: the longest a block may take (seconds, first run, on a loaded 2-core CPU): a block sized for a
#: reader runs in seconds; one that compiles a whole sweep takes minutes
BLOCK_SECONDS = 60.0


# --- python blocks ------------------------------------------------------------------------------

_BLOCK = re.compile(r"^```python\n(.*?)^```[ \t]*\n", re.S | re.M)
_OUTPUT = re.compile(r"(?:[ \t]*\n)*```text\n(.*?)^```", re.S | re.M)
_SKIP = re.compile(r"<!-- docs-test: skip \((.+)\) -->")


@dataclasses.dataclass(frozen=True)
class Example:
    page: str  # relative to the repository
    line: int  # of the opening fence
    code: str
    shown: str | None  # the text block after it: what it prints
    skip: str | None  # why it does not run in one interpreter here


def examples(page: Path) -> list[Example]:
    """The python blocks of ``page``, in order."""
    text = page.read_text()
    found = []
    for m in _BLOCK.finditer(text):
        out = _OUTPUT.match(text, m.end())
        skip = _SKIP.fullmatch(text[: m.start()].rstrip("\n").rpartition("\n")[2].strip())
        found.append(
            Example(
                page=page.relative_to(ROOT).as_posix(),
                line=text.count("\n", 0, m.start()) + 1,
                code=m.group(1),
                shown=out.group(1) if out else None,
                skip=skip.group(1) if skip else None,
            )
        )
    return found


_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?(?![\w])")


def _tolerance(shown: str) -> float:
    """2 % of the shown number plus one unit of its last digit; 0 for an integer."""
    mantissa, _, exponent = shown.lower().partition("e")
    if "." not in mantissa and not exponent:
        return 0.0
    decimals = len(mantissa.partition(".")[2])
    return 0.02 * abs(float(shown)) + 10.0 ** (int(exponent or 0) - decimals)


def output_mismatches(printed: str, shown: str) -> list[str]:
    """How ``printed`` differs from the ``shown`` output (empty: it matches)."""
    got, want = printed.rstrip().splitlines(), shown.rstrip().splitlines()
    if len(got) != len(want):
        return [f"{len(got)} lines printed, {len(want)} shown:\n{printed}"]
    bad = []
    for g, w in zip(got, want):
        if _NUMBER.sub("#", g.strip()) != _NUMBER.sub("#", w.strip()):
            bad.append(f"printed {g.strip()!r}, shown {w.strip()!r}")
            continue
        for a, b in zip(_NUMBER.findall(g), _NUMBER.findall(w)):
            if abs(float(a) - float(b)) > _tolerance(b):
                bad.append(f"printed {a} where the page shows {b} (± {_tolerance(b):.2g}): {g.strip()!r}")
    return bad


# runs the blocks of a JSON list in one namespace, each block's stdout captured, and writes
# [{"out": ..., "seconds": ...}] to the second argument; a failing block's traceback names
# "page:line" of its fence
_RUNNER = """
import contextlib, io, json, sys, time
blocks = json.load(open(sys.argv[1]))
results = []
namespace = {"__name__": "__main__"}
for b in blocks:
    out, start = io.StringIO(), time.perf_counter()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(b["code"], b["where"], "exec"), namespace)
    finally:
        results.append({"out": out.getvalue(), "seconds": time.perf_counter() - start})
        json.dump(results, open(sys.argv[2], "w"))
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}  # a reader's default: float32
    return dict(env, PYTHONPATH=str(ROOT))


@functools.cache
def run_page(page: str, cwd: str) -> list[dict]:
    """Run the page's blocks (skipped ones left out): [{"example", "out", "seconds"}], one per block."""
    todo = [e for e in examples(ROOT / page) if e.skip is None]
    src, res = Path(cwd) / "blocks.json", Path(cwd) / "results.json"
    src.write_text(json.dumps([{"code": e.code, "where": f"{e.page}:{e.line}"} for e in todo]))
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(src), str(res)],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [dict(r, example=e) for e, r in zip(todo, json.loads(res.read_text()))]


RUNNABLE = [p.relative_to(ROOT).as_posix() for p in PAGES if any(e.skip is None for e in examples(p))]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("examples"))


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE)
def test_examples_run_and_print_what_the_page_shows(page, workdir):
    """Each block runs in seconds (under BLOCK_SECONDS), and prints the text block shown after it."""
    cwd = Path(workdir) / page.replace("/", "_")
    cwd.mkdir(exist_ok=True)
    for r in run_page(page, str(cwd)):
        e = r["example"]
        print(f"{e.page}:{e.line}: {r['seconds']:.1f} s")  # shown with pytest -rP
        assert r["seconds"] < BLOCK_SECONDS, f"{e.page}:{e.line} took {r['seconds']:.0f} s"
        if e.shown is not None:
            assert not output_mismatches(r["out"], e.shown), (
                f"{e.page}:{e.line}",
                output_mismatches(r["out"], e.shown),
            )


def _printed(page: str, workdir: str, contains: str) -> str:
    cwd = Path(workdir) / page.replace("/", "_")
    cwd.mkdir(exist_ok=True)
    (out,) = [r["out"] for r in run_page(page, str(cwd)) if contains in r["example"].code]
    return out


def _w1_bias_within_the_stated_range(text: str, printed: str) -> str | None:
    """docs/chaos.md: the Sinkhorn bias the W1 example prints lies in the range the prose states at
    the default relative_epsilon."""
    lo, hi = re.search(r"−([\d.]+)…−([\d.]+) % at the default\s+`relative_epsilon=0.01`", text).groups()  # pyright: ignore[reportOptionalMemberAccess]
    bias = float(re.search(r"Sinkhorn [\d.]+ \(([-+\d.]+)%\)", printed).group(1))  # pyright: ignore[reportOptionalMemberAccess]
    if not -float(hi) <= bias <= -float(lo):
        return f"the example's Sinkhorn bias {bias} % is outside the stated −{lo}…−{hi} %"
    return None


def _lyapunov_interval_contains_the_closed_form(text: str, printed: str) -> str | None:
    """docs/stochastic.md: the printed Benettin interval contains the printed closed form λ₁."""
    assert "contains the\nclosed form" in text
    exact, mean, half = map(float, re.search(r"λ₁ = (\S+); .* (\S+) ± (\S+)", printed).groups())  # pyright: ignore[reportOptionalMemberAccess]
    if abs(mean - exact) > half:
        return f"{mean} ± {half} does not contain λ₁ = {exact}"
    return None


def _slope_interval_contains_minus_one_half(text: str, printed: str) -> str | None:
    """docs/chaos.md: the fitted token slope's interval contains −1/2 ("a wide interval around −1/2")."""
    assert "a wide interval around $-1/2$" in text
    lo, hi = map(float, re.search(r"token slope \S+ \[(\S+), (\S+)\]", printed).groups())  # pyright: ignore[reportOptionalMemberAccess]
    return None if lo <= -0.5 <= hi else f"[{lo}, {hi}] does not contain -1/2"


#: (page, a string of the block, the check of the page's prose against what that block prints)
STATEMENTS = [
    ("docs/chaos.md", "wasserstein1(mu, nu)", _w1_bias_within_the_stated_range),
    ("docs/chaos.md", "fit_loglog", _slope_interval_contains_minus_one_half),
    ("docs/stochastic.md", "est = estimate_lyapunov(", _lyapunov_interval_contains_the_closed_form),
]


@pytest.mark.slow
@pytest.mark.parametrize("page,contains,check", STATEMENTS, ids=[s[2].__name__.strip("_") for s in STATEMENTS])
def test_the_prose_agrees_with_what_the_examples_print(page, contains, check, workdir):
    text = (ROOT / page).read_text()
    assert check(text, _printed(page, workdir, contains)) is None


def test_statement_checks_fail_on_a_contradicting_page():
    """Each check fails when the prose (or the output) says otherwise."""
    chaos = (DOCS / "chaos.md").read_text()
    w1 = "W1 0.6534; Sinkhorn 0.6367 (-2.6%); at 0.003: 0.6501 (-0.5%)"
    assert _w1_bias_within_the_stated_range(chaos, w1) is None
    assert _w1_bias_within_the_stated_range(chaos.replace("−0.3…−2.8 %", "−0.3…−2.0 %"), w1)
    assert _w1_bias_within_the_stated_range(chaos, w1.replace("-2.6%", "-5.8%"))
    assert _slope_interval_contains_minus_one_half(chaos, "token slope -0.53 [-0.84, -0.22]") is None
    assert _slope_interval_contains_minus_one_half(chaos, "token slope -0.30 [-0.45, -0.15]")
    stochastic = (DOCS / "stochastic.md").read_text()
    assert _lyapunov_interval_contains_the_closed_form(stochastic, "λ₁ = -2.750; B -2.644 ± 0.121") is None
    assert _lyapunov_interval_contains_the_closed_form(stochastic, "λ₁ = -2.750; B -2.572 ± 0.110")


def test_output_comparison_fails_on_a_different_output():
    shown = "W1 0.6534; Sinkhorn 0.6367 (-2.6%)\ntoken slope -0.53 [-0.84, -0.22]\n{'token': (5, 4)}"
    assert output_mismatches(shown + "\n", shown) == []
    assert output_mismatches(shown.replace("0.6367", "0.6401"), shown) == []  # within 2 % + 1e-4
    assert output_mismatches(shown.replace("-2.6%", "-5.8%"), shown)
    assert output_mismatches(shown.replace("-2.6%", "-2.8%"), shown)
    assert output_mismatches(shown.replace("-0.53", "-0.50"), shown)
    assert output_mismatches(shown.replace("(5, 4)", "(5, 5)"), shown)  # integers exactly
    assert output_mismatches(shown.replace("slope", "slopes"), shown)
    assert output_mismatches(shown + "\nmore", shown)
    assert _tolerance("8.6e-10") == pytest.approx(0.02 * 8.6e-10 + 1e-11)


def test_the_examples_are_found_with_their_outputs_and_markers():
    """The parsing the slow test relies on: outputs and skip markers where the pages put them."""
    chaos = examples(DOCS / "chaos.md")
    assert [e.shown is not None for e in chaos] == [True] * len(chaos)
    assert chaos[0].shown.startswith("W1 ")  # pyright: ignore[reportOptionalMemberAccess]
    scaling = examples(DOCS / "scaling.md")
    assert [e.skip is not None for e in scaling] == [False, True, False]
    for page in PAGES:
        assert all(e.skip is None for e in examples(page) if page.name != "scaling.md"), page.name


# --- the script of several processes (docs/scaling.md) -----------------------------------------

_LAUNCH = re.compile(r"^(python -m cfm_jax\.distributed --processes 2 --host-devices 2 .*-- python run\.py)$", re.M)


@pytest.mark.slow
def test_the_multi_process_script_runs_under_the_launcher_the_page_shows(tmp_path):
    """docs/scaling.md's run.py, launched by the page's own CPU command line (2 processes × 2 devices)."""
    (script,) = [e for e in examples(DOCS / "scaling.md") if e.skip is not None]
    (launch,) = _LAUNCH.findall((DOCS / "scaling.md").read_text())
    (tmp_path / "run.py").write_text(script.code)
    argv = shlex.split(launch)
    proc = subprocess.run(
        [sys.executable, *argv[1:-2], sys.executable, "run.py"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert re.search(r"^2 processes, 4 devices: loss \d+\.\d{6}$", proc.stdout + proc.stderr, re.M)


# --- commands -----------------------------------------------------------------------------------

_SHELL = re.compile(r"^```(?:bash|sh|shell|console)?\n(.*?)^```", re.S | re.M)
_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")

#: commands the pages name as what they replaced ("It replaces `cfm-jax constants`")
FORMER = {"constants"}

#: options of other programs shown in the pages' code spans, by program
OTHER_OPTIONS = {
    "python -m cfm_jax.distributed (docs/scaling.md)": {"--processes", "--host-devices", "--timeout"},
    "benchmarks/bench_scaling.py (docs/scaling.md)": {"--log2-n"},
}


def commands(page: Path) -> list[tuple[int, str]]:
    """(line, command) of every ``cfm-jax ...`` of ``page``: shell-block lines (comments removed,
    split at ``&&`` and ``;``) and code spans."""
    text = page.read_text()
    found = []
    for m in _SHELL.finditer(text):
        first = text.count("\n", 0, m.start()) + 2
        for i, line in enumerate(m.group(1).splitlines()):
            line = re.sub(r"(^|\s)#.*", "", line)
            for segment in re.split(r"&&|;", line):
                if segment.strip().startswith("cfm-jax"):
                    found.append((first + i, segment.strip()))
    spans = _SHELL.sub(lambda m: "\n" * m.group(0).count("\n"), text)  # spans outside shell blocks
    for m in _SPAN.finditer(spans):
        if m.group(1).startswith("cfm-jax"):
            found.append((spans.count("\n", 0, m.start()) + 1, m.group(1).strip()))
    return found


def lone_options(page: Path) -> list[tuple[int, str]]:
    """(line, option) of every code span that starts with ``--``."""
    text = _SHELL.sub(lambda m: "\n" * m.group(0).count("\n"), page.read_text())
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(1).split()[0].split("=")[0])
        for m in _SPAN.finditer(text)
        if m.group(1).startswith("--")
    ]


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices[name]


def command_error(command: str) -> str | None:
    """Why ``command`` would be refused (None: the parser and the option rules accept it); nothing
    runs. A synopsis (with ``[`` or ``|``) has each option checked against the command's."""
    from cfm_experiments import cli

    argv = shlex.split(command)[1:]
    if not argv or argv[0].startswith("<") or argv[0] in FORMER:
        return None  # the program's name, `cfm-jax <command>`, or a former command named as such
    if "[" in command or "|" in command:
        words = command.replace("[", " ").replace("]", " ").replace("|", " ").split()[1:]
        parser = cli.build_parser(words)
        name = cli._chosen(words)
        if name is None:
            return f"no command in {command!r}"
        known = _subparser(parser, name)._option_string_actions
        unknown = [w for w in words if w.startswith("--") and w not in known]
        return f"unknown options {unknown}" if unknown else None
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = cli.build_parser(argv).parse_args(argv)
    except SystemExit as e:
        return None if e.code == 0 else err.getvalue().strip()  # 0: --help
    try:
        cli._prepare(args, cli._Run())  # every option value checked, as before a run; nothing runs
    except ValueError as e:
        return str(e)
    return None


@pytest.fixture
def gap_command(tmp_path, monkeypatch):
    """docs/experiments.md's example command `gap`, registered as its page does (its spans name it)."""
    import cfm_experiments
    from cfm_experiments.registry import Command

    text = (DOCS / "experiments.md").read_text()
    (tmp_path / "gap_example.py").write_text(examples(DOCS / "experiments.md")[0].code)
    monkeypatch.syspath_prepend(str(tmp_path))
    (held,) = re.findall(r"`GAP = (Command\(.*?\))`", text.replace("\n", " "))
    monkeypatch.setitem(cfm_experiments.COMMANDS, "gap", eval(held, {"Command": Command}))


def test_every_command_the_pages_show_is_accepted(gap_command):
    """README.md and docs/*.md: every `cfm-jax ...` parses and passes the option rules (not run)."""
    bad = [
        f"{page.name}:{line}: {cmd}: {err}"
        for page in PAGES
        for line, cmd in commands(page)
        if cmd != "cfm-jax gap --ns 8"  # the page's example of a refused command
        if (err := command_error(cmd))
    ]
    assert not bad, "\n".join(bad)
    assert command_error("cfm-jax gap --ns 8").startswith("--ns needs at least 2 value(s)")  # as the page says  # pyright: ignore[reportOptionalMemberAccess]


def test_every_lone_option_the_pages_show_exists(gap_command):
    """A code span ``--x ...`` names an option of some cfm-jax command, or of another program the
    pages show (OTHER_OPTIONS)."""
    from cfm_experiments import COMMANDS, cli

    known = set().union(*OTHER_OPTIONS.values())
    for name in [cli.DEMO[0], *COMMANDS]:
        known |= set(_subparser(cli.build_parser([name]), name)._option_string_actions)
    bad = [f"{page.name}:{line}: {opt}" for page in PAGES for line, opt in lone_options(page) if opt not in known]
    assert not bad, bad


def test_command_checks_refuse_what_the_command_line_refuses():
    """The checks fail on a command the CLI would refuse: an unknown option or part, a bad value,
    an unknown option in a synopsis."""
    assert command_error("cfm-jax rates --quick --out DIR") is None
    assert command_error("cfm-jax claims --parts rho --rho-ns 10 40 160") is None
    assert "unrecognized arguments: --reference sample" in str(command_error("cfm-jax rates --reference sample"))
    assert "invalid choice" in str(command_error("cfm-jax claims --parts nothing"))
    assert command_error("cfm-jax rates --seeds 0")  # an option rule, checked before any work
    assert command_error("cfm-jax nothing")
    assert command_error("cfm-jax sync --parts paper [--quick] [--full-grid | --realisations R]") is None
    assert command_error("cfm-jax sync --parts paper [--quick] [--full | --realisations R]")
    assert commands(ROOT / "README.md")[0] == (42, "cfm-jax rates")
