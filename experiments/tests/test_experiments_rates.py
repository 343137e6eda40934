"""cfm-jax rates through the one driver: files, summary, claims, resumption; and the rates themselves
at small size, against the exact limit and with a floor-limited i.i.d. reference."""

import json
from typing import Any

import pytest

import cfm_experiments
from cfm_experiments.driver import execute, load_summary, open_folder
from cfm_experiments.protocol import resolve
from cfm_experiments.rates import fit_rates, run_config, sweep_configs
from cfm_experiments.registry import command

#: the options of conftest.TINY_RATES (two rows, no adjoint): the CLI tests share its programs.
TINY: dict[str, Any] = dict(
    dims=[1],
    control_dims=[1],
    ns=[4, 8],
    control_ns=[4, 8],
    n_ref=32,
    control_n_ref=32,
    seeds=2,
    no_subspace=True,
    no_adjoint=True,
    layers=2,
)


def _rows(out):
    return [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]


@pytest.mark.slow  # a sweep through the driver
def test_rates_run_through_the_driver(tmp_path):
    out = tmp_path / "o"
    report = cfm_experiments.run("rates", out=out, **TINY)
    assert report.passed and [r["config"]["part"] for r in report.rows] == ["exact", "exact"]
    summary = load_summary(out)
    assert summary["command"] == "rates" and summary["parts"] == ["exact"]
    assert {"rows.jsonl", "table.txt", "rates.png", "claims.md"} <= {*summary["files"], "rows.jsonl"}
    fits = summary["results"]["exact"]["fits"]
    assert {(f["field"], f["quantity"]) for f in fits} == {
        ("attention", "token"),
        ("attention", "context"),
        ("attention", "w1"),
        ("control", "token"),
        ("control", "context"),
        ("control", "w1"),
    }
    assert [c["claim"].split(" ")[0] for c in summary["claims"]] == ["attention:", "attention:", "W1", "a"]
    assert all(c["command"] == "cfm-jax rates --parts exact" for c in summary["claims"])
    assert (out / "table.txt").read_text().startswith("quantity")


def test_resume_matches_uninterrupted(tmp_path):
    cmd = command("rates")
    parts = cmd.select(None)
    settings = resolve(parts, **TINY)
    part_out = tmp_path / "part"
    execute(cmd, parts, settings, open_folder(cmd, parts, settings, part_out, "new"), progress=False, stop_after=1)
    assert len(_rows(part_out)) == 1
    cfm_experiments.run("rates", out=part_out, mode="resume", **TINY)
    cfm_experiments.run("rates", out=tmp_path / "full", **TINY)
    strip = lambda rows: [(r["key"], json.dumps(r["values"]), json.dumps(r["floor"])) for r in rows]  # noqa: E731
    assert strip(_rows(part_out)) == strip(_rows(tmp_path / "full"))


def test_the_main_job_raises_no_heavy_tail_warning_and_its_table_says_why(tmp_path, monkeypatch):
    """The tiny sweep's d = 1 Gaussian row is in the heavy-tail regime (ρ ≥ 1, a few effective points at
    n = 8), as the sweep's rows are by design: no HeavyTailWarning is raised (the library warns once
    per process: its flag is reset first), and table.txt names the row under the heading that says so."""
    import warnings

    import cfm_jax
    import cfm_jax._regime as regime_module
    from cfm_experiments.rates.parts import REGIME_HEAD

    monkeypatch.setattr(regime_module, "_WARNED", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = cfm_experiments.run("rates", out=tmp_path / "o", **TINY)
    heavy = [str(w.message) for w in caught if issubclass(w.category, cfm_jax.HeavyTailWarning)]
    assert heavy == [], heavy
    table = (tmp_path / "o" / "table.txt").read_text()
    assert "by design" in REGIME_HEAD and REGIME_HEAD in table
    assert table.split(REGIME_HEAD)[1].strip().startswith("attention gaussian d = 1:")
    assert report.summaries["exact"].data["heavy_tailed"][0].startswith("attention gaussian d = 1:")


def test_exact_reference_rates_and_floor_flag():
    """Against the exact Gaussian limit (attention d = 8, one layer, n ∈ {8, …, 512}, 8 seeds): the token
    and coupled-context deviations fall with a fitted slope whose bootstrap 95 % CI lies below 0,
    contains −1/2 and is narrower than 0.6; their floor is exactly 0 and the fit is meaningful. A
    sample reference of n_ref = 256 = 2·max n has floor/dev ≈ 1: fit_rates must call it floor-limited."""
    grid = dict(
        attention_dims=[8],
        control_dims=[],
        ns=[8, 32, 128, 512],
        control_ns=[4, 8],
        n_ref=64,
        control_n_ref=32,
        seeds=8,
        subspace=None,
        reference="exact",
        w1_ns=[4, 8],
        w1_size=32,
    )

    def rows(g):
        return [{"config": c, **run_config(c)} for c in sweep_configs(g, layers=1, adjoint=False)]

    for f in fit_rates(rows(grid)):
        if f["quantity"] in ("token", "context"):
            assert f["ci_high"] < 0 and f["ci_low"] <= -0.5 <= f["ci_high"] and f["ci_high"] - f["ci_low"] < 0.6, f
            assert f["floor"] == 0 and f["meaningful"] and f["reference"] == "gaussian", f
            assert f["expected"] == -0.5 and f["ns"] == [8.0, 32.0, 128.0, 512.0]
    coarse = dict(grid, ns=[8, 32, 128], n_ref=256, reference="sample")
    ctok = next(f for f in fit_rates(rows(coarse)) if f["quantity"] == "token")
    assert not ctok["meaningful"] and ctok["reference"] == "sample", ctok


@pytest.mark.slow  # a second part's sweep through the driver
def test_sample_part_runs_beside_the_exact_one(tmp_path):
    """--parts exact sample: both parts' rows in one folder, each its own table and figure; the sample
    rows compare with i.i.d. references (no exact floor)."""
    sample: dict[str, Any] = dict(sample_ns=[4, 8], sample_control_ns=[4, 8], sample_n_ref=32, sample_control_n_ref=32)
    report = cfm_experiments.run("rates", out=tmp_path / "o", parts=["exact", "sample"], **TINY, **sample)
    assert [r["config"]["part"] for r in report.rows] == ["exact", "exact", "sample", "sample"]
    assert {"table.txt", "table_sample.txt", "rates.png", "rates_sample.png"} <= {p.name for p in report.files}
    fits = report.summaries["sample"].data["fits"]
    assert {f["reference"] for f in fits} == {"sample"} and all(
        f["floor"] > 0 for f in fits if f["quantity"] == "token"
    )
