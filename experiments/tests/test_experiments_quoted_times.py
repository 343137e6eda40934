"""The times that ``--help``, the README and the docs quote are the compile benchmark's.

``experiments/results/compile.json`` (``experiments/benchmarks/bench_compile.py``) times every command cold and
warm, default and ``--quick``; each quoted figure is formatted from it as the benchmark's own table
formats it, so a re-measured benchmark with stale texts (or texts edited by hand) fails here.
``--help`` reads its times from the package's ``cfm_experiments/measured.json``, which the
benchmark writes beside compile.json: the two must agree.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cfm_experiments import measured
from cfm_experiments.registry import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
BENCH = json.loads((ROOT / "experiments" / "results" / "compile.json").read_text())
fmt = measured.duration  # the benchmark's tables use it too


def figures(bench: dict, command: str) -> dict:
    """The quoted figures of ``command``: cold and warm walls of both configurations; programs,
    compile, largest compile and tracing seconds of the default one (``q…``: of ``--quick``)."""
    q, f = bench["commands"][f"{command} quick"], bench["commands"][f"{command} full"]
    return dict(
        qc=fmt(q["cold"]["wall_s"]),
        qw=fmt(q["warm"]["wall_s"]),
        fc=fmt(f["cold"]["wall_s"]),
        fw=fmt(f["warm"]["wall_s"]),
        programs=f["programs"],
        compile=f"{f['compile_s']:.0f} s",
        largest=f"{f['largest_s']:.1f} s",
        trace=f"{f['trace_s']:.0f} s",
        qprograms=q["programs"],
        qcompile=f"{q['compile_s']:.0f} s",
        qlargest=f"{q['largest_s']:.1f} s",
    )


def help_text(v: dict) -> str:
    return (
        f"2-core CPU, otherwise idle: {v['qc']} with an empty compilation cache, {v['qw']} with it filled; "
        f"the default run {v['fc']} and {v['fw']}"
    )


#: (file, command, phrases) that must appear in the file, formatted with :func:`figures`
QUOTES = [
    (
        "README.md",
        "rates",
        [
            "it takes {fc} with an empty compilation cache\n({programs} programs compiled in {compile})",
            "and {fw} once the cache is filled; `cfm-jax rates --quick`, a\nreduced configuration, {qc} and {qw}",
        ],
    ),
    *[("README.md", c, ["{fc} cold, {fw} warm", "`--quick`: {qc} cold, {qw} warm"]) for c in COMMANDS],
    (
        "docs/chaos.md",
        "rates",
        [
            "takes {fc} cold (fresh compilation cache: {programs} programs, {compile} of XLA compiling,\n"
            "the largest {largest}, and {trace} of tracing) and {fw} warm",
            "`cfm-jax rates --quick` ({qc} with an empty compilation\ncache, {qw} with it filled), "
            "and no options at all the default sweep ({fc} and {fw})",
        ],
    ),
    ("README.md", "sync", ["default: {fc} cold, {fw} warm ({programs} programs compiled in {compile})"]),
    (
        "docs/claims.md",
        "claims",
        [
            "the default run takes {fc} with an empty\ncompilation cache and {fw} with it filled "
            "(`--quick`: {qc} and {qw};"
        ],
    ),
    (
        "docs/stochastic.md",
        "sync",
        [
            "(float64; {fc} cold, {fw} warm on the otherwise idle 2-core CPU)",
            "`cfm-jax sync --quick` takes {qc} with an empty\ncompilation cache ({qprograms} programs compiled in "
            "{qcompile}, the largest {qlargest}) and {qw} with it filled",
        ],
    ),
]


def stale(bench: dict, texts: dict[str, str]) -> list[str]:
    """Every quoted figure that is not the benchmark's: the package's measured.json, each command's
    ``--help`` times, then the phrases of :data:`QUOTES` (``texts``: file -> its text)."""
    out = []
    shipped = measured.load()
    if shipped != measured.extract(bench):
        out.append(f"cfm_experiments/{measured.FILE} is not experiments/results/compile.json's")
    for name in COMMANDS:
        want, got = help_text(figures(bench, name)), measured.help_times(name, shipped)
        if got != want:
            out.append(f"cfm-jax {name} --help: {got!r} is not {want!r}")
    for path, name, phrases in QUOTES:
        for phrase in phrases:
            want = phrase.format(**figures(bench, name))
            if want not in texts[path]:
                out.append(f"{path}, {name}: {want!r} is missing")
    return out


def _texts() -> dict[str, str]:
    return {p: (ROOT / p).read_text() for p in {q[0] for q in QUOTES}}


def test_every_command_is_benchmarked_in_both_configurations():
    missing = [f"{c} {k}" for c in COMMANDS for k in ("quick", "full") if f"{c} {k}" not in BENCH["commands"]]
    assert not missing


def test_quoted_times_are_the_benchmarks():
    assert stale(BENCH, _texts()) == []


@pytest.mark.parametrize("field", ["cold", "warm"])
def test_a_re_measured_benchmark_makes_the_quotes_stale(field):
    """The check itself: one run re-timed by a few seconds makes every quote of it stale."""
    bench = json.loads(json.dumps(BENCH))
    bench["commands"]["rates full"][field]["wall_s"] += 7.0
    found = stale(bench, _texts())
    assert any(s.startswith(f"cfm_experiments/{measured.FILE}") for s in found)
    assert any(s.startswith("cfm-jax rates --help") for s in found)
    assert any(s.startswith("README.md, rates") for s in found)
    if field == "cold":
        assert any(s.startswith("docs/chaos.md") for s in found)


def suite_phrase(bench: dict) -> str:
    """The README's sentence on the default test suite's times, from the benchmark's ``--tests`` run."""
    t = bench["tests"]
    return (
        f"the tests take {fmt(t['warm_s'])} with the compilation cache filled (`experiments/results/compile.md`) "
        f"and {fmt(t['cold_s'])} with it empty"
    )


def test_the_readme_quotes_the_test_suites_measured_times():
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert suite_phrase(BENCH) in readme
    bench = json.loads(json.dumps(BENCH))
    bench["tests"]["cold_s"] += 7.0
    assert suite_phrase(bench) not in readme
