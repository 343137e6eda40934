"""The experiments' public API, from the user's side: one row per name of ``cfm_experiments.__all__``
(and the CLI's ``main``), as the library's contract has one per library name: a one-option command
of this module's ``PARTS``, run from Python and from the command line."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import cfm_experiments
from cfm_experiments import (
    COMMANDS,
    VERDICTS,
    Claim,
    Command,
    Declaration,
    Option,
    Part,
    Report,
    ResultsFolder,
    Settings,
    Summary,
    Sweep,
    read_rows,
    resolve,
    run as run_command,
)
from cfm_experiments.cli import main as cli_main

#: public name -> its row
ROWS: dict[str, Callable[[], None]] = {}


def row(*names: str):
    """Register the decorated function as the row of every name in ``names``."""

    def register(fn):
        for name in names:
            ROWS[name] = fn
        return fn

    return register


def i64(n: int):
    """A NumPy integer scalar, as a user's array code hands one over."""
    return np.int64(n)


SQUARE = Declaration(
    "square", (Option("ns", (2, 3), "sizes", many=True, low=1), Option("scale", 1.0, "a factor", kind="real", low=0))
)


class _Square(Part):
    """n ↦ n², one row per n (the contract's own command)."""

    declaration = SQUARE
    title = "squares"

    def configs(self, settings: Settings) -> list[dict]:
        return [{"n": int(n)} for n in settings["ns"]]

    def run(self, config: dict) -> dict:
        return {"value": config["n"] ** 2}

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        claim = Claim("squares are squares", "measured", VERDICTS[0])
        return Summary(text="ok", data={"n": len(rows)}, claims=(claim,))


PARTS = (SQUARE,)


def _with_command(fn):
    """Run ``fn()`` with the command ``contract`` (this module's PARTS) registered."""
    COMMANDS["contract"] = Command("contract", __name__, "the contract test's command")
    try:
        return fn()
    finally:
        del COMMANDS["contract"]


@row(
    "cfm_experiments.run",
    "cfm_experiments.COMMANDS",
    "cfm_experiments.Command",
    "cfm_experiments.Declaration",
    "cfm_experiments.Part",
    "cfm_experiments.Option",
    "cfm_experiments.Report",
    "cfm_experiments.Summary",
    "cfm_experiments.Claim",
    "cfm_experiments.VERDICTS",
)
def _experiments_run():
    import tempfile
    from pathlib import Path

    assert {"rates", "ogd"} <= set(COMMANDS) and all(isinstance(v, str) for v in VERDICTS)
    assert (_Square.name, _Square.options, _Square.optional) == ("square", SQUARE.options, False)
    with pytest.raises(ValueError, match="a Declaration's name must be a non-empty string"):
        Declaration("")

    def go():
        with tempfile.TemporaryDirectory() as tmp:
            report = run_command("contract", out=Path(tmp) / "a", ns=[i64(2), 4])
            assert isinstance(report, Report) and [r["value"] for r in report.rows] == [4, 16]
            assert report.claims[0].verdict in VERDICTS and report.claims[0].command.startswith("cfm-jax contract")
            with pytest.raises(ValueError, match="--ns"):
                run_command("contract", out=Path(tmp) / "b", ns=[0])
            with pytest.raises(ValueError, match="--scale"):
                run_command("contract", out=Path(tmp) / "c", scale=-1.0)
        with pytest.raises(ValueError, match="nope"):
            run_command("nope")

    _with_command(go)


@row("cfm_experiments.cli.main")
def _cli_main():
    import tempfile

    def go():
        with tempfile.TemporaryDirectory() as tmp:
            assert cli_main(["contract", "--out", tmp, "--ns", "2", "3", "--no-progress"]) == 0
            assert cli_main(["contract", "--out", tmp, "--ns", "0", "--no-progress"]) != 0

    _with_command(go)


@row("cfm_experiments.resolve", "cfm_experiments.Settings")
def _resolve():
    settings = resolve((_Square(),), quick=True, scale=np.float64(2.0))
    assert isinstance(settings, Settings) and settings["scale"] == 2.0 and settings.quick
    with pytest.raises(ValueError, match="scale"):
        resolve((_Square(),), scale="x")
    with pytest.raises(ValueError, match="bogus"):
        resolve((_Square(),), bogus=1)


@row("cfm_experiments.Sweep", "cfm_experiments.read_rows", "cfm_experiments.ResultsFolder")
def _sweep():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        folder = ResultsFolder(Path(tmp) / "r", "contract", {"a": 1})
        sweep = Sweep(folder.path / "rows.jsonl", progress=False, folder=folder)
        rows = sweep.run([{"n": 1}, {"n": 2}], lambda c: {"sq": c["n"] ** 2})
        assert [r["sq"] for r in read_rows(folder.path / "rows.jsonl")] == [r["sq"] for r in rows] == [1, 4]
        with pytest.raises(ValueError, match="`mode`"):
            ResultsFolder(Path(tmp) / "r", "contract", {"a": 1}, mode="bogus")  # pyright: ignore[reportArgumentType]


def test_every_public_name_has_a_row():
    names = {f"cfm_experiments.{n}" for n in cfm_experiments.__all__} | {"cfm_experiments.cli.main"}
    assert not sorted(names - set(ROWS)), f"public names without a contract row: {sorted(names - set(ROWS))}"
    assert not sorted(set(ROWS) - names), f"contract rows for names that are not public: {sorted(set(ROWS) - names)}"


@pytest.mark.parametrize("name", sorted({fn.__name__: name for name, fn in ROWS.items()}.values()))
def test_contract(name):
    ROWS[name]()
