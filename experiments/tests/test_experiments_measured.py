"""cfm_experiments.measured: the times --help quotes, extracted from the compile benchmark's results and
shipped with the package (that the shipped file is the committed benchmark's: tests/test_quoted_times.py)."""

import tomllib
from pathlib import Path

import pytest

from cfm_experiments import cli, measured

ROOT = Path(__file__).resolve().parents[1]


def _run(cold: float, warm: float) -> dict:
    return {"cold": {"wall_s": cold, "returncode": 0}, "warm": {"wall_s": warm, "returncode": 0}, "programs": 3}


BENCH = {
    "machine": {"cpu_count": 16, "backend": "gpu", "python": "3.11"},
    "notes": "",
    "commands": {
        "alpha quick": _run(53.4, 19.6),
        "alpha full": _run(177.75, 247.0),
        "beta quick": {  # no full run: no time quoted
            **_run(1.0, 1.0),
            "cold": {"wall_s": 1.0, "compile": {"programs": 5, "cache_loads": 2}},
        },
        "gamma full": {"cold": {"error": "boom"}, "warm": {}},  # a failed run: left out
    },
}


@pytest.mark.parametrize(
    "seconds, text", [(0.4, "0 s"), (53.4, "53 s"), (119.4, "119 s"), (120.0, "2 min 00 s"), (247.0, "4 min 07 s")]
)
def test_durations_read_as_the_benchmarks_tables_write_them(seconds, text):
    assert measured.duration(seconds) == text


def test_what_is_extracted_and_quoted():
    got = measured.extract(BENCH)
    assert got == {
        "machine": "16-core GPU",
        "commands": {
            "alpha": {"full": {"cold_s": 177.75, "warm_s": 247.0}, "quick": {"cold_s": 53.4, "warm_s": 19.6}},
            "beta": {"quick": {"cold_s": 1.0, "warm_s": 1.0, "programs": 7}},  # compiled or loaded
        },
    }
    assert measured.expected_programs("beta", "quick", got) == 7
    assert measured.expected_programs("alpha", "quick", got) is None  # not counted
    assert (
        measured.expected_programs("beta", "full", got) is None
        and measured.expected_programs("nope", "full", got) is None
    )
    assert measured.help_times("alpha", got) == (
        "16-core GPU, otherwise idle: 53 s with an empty compilation cache, 20 s with it filled; "
        "the default run 2 min 58 s and 4 min 07 s"
    )
    assert measured.help_times("beta", got) == "" and measured.help_times("nope", got) == ""


def test_the_times_ship_with_the_package():
    """measured.json lies beside the module, and the build includes it as package data: an installed
    package's --help finds it."""
    assert (ROOT / "cfm_experiments" / measured.FILE).is_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert measured.FILE in config["tool"]["setuptools"]["package-data"]["cfm_experiments"]
    assert set(measured.load()["commands"]) >= set(cli.COMMANDS)


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_each_commands_help_quotes_its_measured_times(name, capsys):
    with pytest.raises(SystemExit):
        cli.main([name, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    times = measured.help_times(name)
    assert times and f"--quick reduced configuration ({times})" in text
