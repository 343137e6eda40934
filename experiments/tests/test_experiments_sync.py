"""`cfm-jax sync` as a command: its parts, its options and their one-line errors, and a part run end to end
through the one driver (results folder, claims, figure, resume)."""

import json

import pytest

import cfm_experiments
from cfm_experiments import cli
from cfm_experiments.driver import default_out
from cfm_experiments.registry import COMMANDS
from cfm_experiments.sync.convergence import Strong

DEFAULT = ["sync", "lyapunov", "strong", "chaos", "weak_L", "weak_m"]


def test_parts_and_registry():
    """Today's sections run by default; the paper's grid, Figure 1 and the W₂ chaos are optional parts
    whose results go to a subfolder named after them; every part computes in float64."""
    cmd = COMMANDS["sync"]
    assert [p.name for p in cmd.default_parts()] == DEFAULT
    assert [p.name for p in cmd.parts() if p.optional] == ["paper", "figure1", "chaos_w2"]
    assert all(p.float64 for p in cmd.parts())
    assert str(default_out(cmd, cmd.default_parts())) == "cfm_out/sync"
    assert str(default_out(cmd, cmd.select(["paper"]))) == "cfm_out/sync/paper"
    assert str(default_out(cmd, cmd.select(["figure1", "paper"]))) == "cfm_out/sync/paper+figure1"


@pytest.mark.parametrize(
    "argv,line",
    [
        (
            ["--realisations", "1"],
            "--realisations must be an integer >= 2 (a confidence interval needs two), got 1.",
        ),
        (["--parts", "paper", "--width", "0"], "--width must be an integer >= 1, got 0."),
        (["--width", "64"], "--width: not an option of the parts run (sync, lyapunov, strong, chaos, weak_L, weak_m)."),
        (["--parts", "strong", "--realisations", "8"], "--realisations: not an option of the parts run (strong)."),
        (
            ["--parts", "paper", "--full-grid", "--realisations", "8"],
            "--full-grid and --realisations both set the realisations per cell: give one.",
        ),
        (
            ["--seed", "-1"],
            "--seed must be an integer in [0, 2**62) (a JAX PRNG seed; offsets are added to it), got -1.",
        ),
    ],
)
def test_a_bad_option_is_one_line_naming_the_flag(tmp_path, capsys, argv, line):
    """Checked before any work (no folder made), exit code 2 like argparse's own usage errors."""
    out = tmp_path / "never"
    assert cli.main(["sync", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"cfm-jax sync: error: {line}"] and not out.exists()


def test_python_entry_point_has_the_same_rules(tmp_path):
    with pytest.raises(ValueError, match=r"^--realisations must be an integer >= 2"):
        cfm_experiments.run("sync", out=tmp_path / "x", realisations=1.5)
    with pytest.raises(ValueError, match=r"^--parts: unknown part 'weak' of `sync`"):
        cfm_experiments.run("sync", out=tmp_path / "x", parts=["weak"])
    assert not (tmp_path / "x").exists()


def test_help_names_every_part_and_option():
    sub = cli.build_parser(["sync"])._subparsers._group_actions[0].choices["sync"]  # type: ignore[union-attr]
    text = " ".join(sub.format_help().split())
    assert "parts to run, from: sync, lyapunov, strong, chaos, weak_L, weak_m, paper, figure1, chaos_w2" in text
    assert "(default: sync lyapunov strong chaos weak_L weak_m)" in text
    assert "--width WIDTH paper: MLP width m" in text and "(default: 256)" in text
    assert "--full-grid paper: 64 realisations per cell" in text


def test_a_part_runs_end_to_end_through_the_driver(tmp_path, monkeypatch):
    """The strong part on a tiny configuration: one row, its claim line in claims.md with the command that
    reproduces it, its figure, the settings recorded; a resume recomputes nothing."""
    tiny = dict(Ls=[4, 8], fine=16, N=3, d=3, R=3, seed=0)
    monkeypatch.setattr(Strong, "configs", lambda self, settings: [{**tiny, "seed": settings.seed}])
    out = tmp_path / "strong"
    report = cfm_experiments.run("sync", out=out, parts=["strong"], quick=True)
    assert report.passed and len(report.rows) == 1
    (claim,) = report.claims
    assert claim.command == "cfm-jax sync --parts strong --quick" and claim.figure == "strong.png"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["parts"] == ["strong"] and summary["settings"] == {"quick": True, "seed": 0}
    assert summary["results"]["strong"]["slope"] == report.rows[0]["fit"]["slope"]
    assert {"rows.jsonl", "strong.png", "claims.md"} <= {p.name for p in out.iterdir()}
    assert json.loads((out / "run.json").read_text())["config"]["parts"] == ["strong"]
    again = cfm_experiments.run("sync", out=out, parts=["strong"], quick=True, mode="resume")
    assert again.rows == report.rows and again.compile.compiled == 0
