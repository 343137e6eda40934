"""experiments.rates: grid rules, the resumable sweep, fits and their floor flag, table, figure, JSON."""

import json
import math

import numpy as np
import pytest

from cfm_experiments import rates

TINY = dict(
    attention_dims=[1],
    control_dims=[1],
    ns=[4, 8],
    control_ns=[4, 8],
    n_ref=32,
    control_n_ref=32,
    seeds=2,
    subspace=None,
)


def _tiny_configs():
    # The same specs as the CLI tests, so they share compiled functions.
    return rates.sweep_configs(TINY, layers=2, adjoint=False)


def test_sweep_configs_rules():
    """The default grid: one configuration per (field, population, d); exact references (the Gaussian
    limit, MLP declared linear, for Gaussian attention; QMC for the rest); attention over >= 2 decades
    of n; the W1 policy (dʹ = 1 at every n, dʹ = 2 over its own sizes against >= 4n QMC points, none
    above dʹ = 3); ∇φ only up to grad_phi_max_n, against QMC. The sample grid keeps n <= n_ref."""
    from cfm_jax import chaos

    configs = rates.sweep_configs(rates.default_grid(False))
    keys = [(c["field"], c["population"], c["dim"]) for c in configs]
    assert len(keys) == len(set(keys)) == 5 + 4 + 2
    for c in configs:
        spec = rates.spec_from_config(c)
        chaos.validate_spec(spec)
        dk = c["intrinsic_dim"] or c["dim"]
        gaussian = c["field"] == "attention" and c["population"] == "gaussian"
        assert c["reference"] == ("gaussian" if gaussian else "qmc")
        assert (c.get("mlp_activation") == "linear") == gaussian
        assert max(c["ns"]) / min(c["ns"]) >= (100 if c["field"] == "attention" else 16)
        assert c["w1"] == (dk <= 3)
        if c["w1"] and dk == 1:
            assert spec.quantity_ns("w1") == spec.ns
            assert chaos.quantity_reference(spec, "w1") == ("gaussian" if gaussian else "qmc")
        elif c["w1"]:
            w1_ns = spec.quantity_ns("w1")
            assert 4 * max(w1_ns) <= spec.w1_size <= spec.n_ref and len(w1_ns) >= 4
            assert chaos.quantity_reference(spec, "w1") == "qmc"
        if c["field"] == "attention":
            assert 2 <= len(spec.quantity_ns("grad_phi")) < len(spec.ns)
            assert chaos.quantity_reference(spec, "grad_phi") == "qmc"
            assert (
                chaos.quantity_reference(spec, "token") == chaos.quantity_reference(spec, "adjoint") == c["reference"]
            )
    sub = [c for c in configs if c["population"] == "subspace_gaussian"]
    assert {(c["dim"], c["intrinsic_dim"]) for c in sub} == {(8, 2)}
    for c in rates.sweep_configs(rates.default_grid(False, "sample")):
        assert max(c["ns"]) <= c["n_ref"] and c.get("reference", "sample") == "sample" and "w1_ns" not in c


def test_sweep_resume_matches_uninterrupted(tmp_path):
    configs = _tiny_configs()
    full = rates.run_sweep(configs, tmp_path / "full", progress=False)
    part = rates.run_sweep(configs, tmp_path / "part", progress=False, stop_after=1)
    assert len(part) == 1
    resumed = rates.run_sweep(configs, tmp_path / "part", resume=True, progress=False)
    strip = lambda rows: [(r["key"], json.dumps(r["values"]), json.dumps(r["floor"])) for r in rows]  # noqa: E731
    assert strip(resumed) == strip(full)
    lines = (tmp_path / "part" / "rows.jsonl").read_text().splitlines()
    assert len(lines) == len(configs)  # no duplicates


def test_exact_reference_rates_and_floor_flag(tmp_path):
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
    configs = rates.sweep_configs(grid, layers=1, adjoint=False)
    fits = rates.fit_rates(rates.run_sweep(configs, tmp_path / "a", progress=False))
    for q in ("token", "context"):
        f = next(f for f in fits if f["quantity"] == q)
        assert f["ci_high"] < 0 and f["ci_low"] <= -0.5 <= f["ci_high"] and f["ci_high"] - f["ci_low"] < 0.6, f
        assert f["floor"] == 0 and f["meaningful"] and f["reference"] == "gaussian", f
        assert f["expected"] == -0.5 and f["ns"] == [8.0, 32.0, 128.0, 512.0]
    coarse = dict(grid, ns=[8, 32, 128], n_ref=256, reference="sample")
    cfits = rates.fit_rates(
        rates.run_sweep(rates.sweep_configs(coarse, layers=1, adjoint=False), tmp_path / "b", progress=False)
    )
    ctok = next(f for f in cfits if f["quantity"] == "token")
    assert not ctok["meaningful"] and ctok["reference"] == "sample", ctok


def test_table_and_summary_have_no_nan_strings(tmp_path):
    rows = rates.run_sweep(_tiny_configs(), tmp_path, progress=False)
    fits = rates.fit_rates(rows)
    table = rates.format_table(fits)
    assert "nan" not in table.lower()
    for col in rates.COLUMNS:  # every column is explained under the table
        assert f"  {col} " in table
    from cfm_experiments.results import write_summary

    text = write_summary(tmp_path, {"fits": fits}).read_text()
    loaded = json.loads(text, parse_constant=lambda c: pytest.fail(c))
    context = next(f for f in loaded["fits"] if f["quantity"] == "context")
    assert context["floor"] is None  # no floor for the coupled context: null, not "nan"


def test_figure_has_one_labelled_panel_per_quantity(tmp_path):
    """No empty panel, every axis labelled, x ticks at the n that were run, a legend in every panel."""
    fits = rates.fit_rates(rates.run_sweep(_tiny_configs(), tmp_path, progress=False))
    fig = rates.rates_figure(fits)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["attention: token", "attention: context", "attention: w1", "control: token", "control: w1"]
    for ax in fig.axes:
        assert ax.get_xlabel() == "context size n" and ax.get_ylabel()
        np.testing.assert_array_equal(ax.get_xticks(), [4, 8])
        legend = ax.get_legend()
        assert legend is not None
        labels = legend.get_texts()
        assert any("expected slope" in t.get_text() for t in labels)
        # the floor's line style is explained exactly where a floor is drawn (none for the coupled context)
        drawn = any(line.get_linestyle() == ":" for line in ax.get_lines())
        assert drawn == any("floor" in t.get_text() for t in labels) == (ax.get_title() != "attention: context")
    assert rates.plot_rates(fits, tmp_path / "rates.png").stat().st_size > 10_000


def test_grid_from_args_rejects_bad_sizes():
    import argparse

    parser = argparse.ArgumentParser()
    rates.add_arguments(parser)
    with pytest.raises(ValueError, match="--ns"):
        rates.grid_from_args(parser.parse_args(["--ns", "8"]))
    with pytest.raises(ValueError, match="--n-ref"):
        rates.grid_from_args(parser.parse_args(["--reference", "sample", "--ns", "8", "64", "--n-ref", "32"]))
    rates.grid_from_args(
        parser.parse_args(["--ns", "8", "64", "--n-ref", "32", "--w1-ns", "4", "8"])
    )  # exact: n > n_ref
    with pytest.raises(ValueError, match="--seeds"):
        rates.grid_from_args(parser.parse_args(["--seeds", "1"]))
    with pytest.raises(ValueError, match="--w1-ns: the largest size"):
        rates.grid_from_args(parser.parse_args(["--w1-ns", "16", "256"]))
    with pytest.raises(ValueError, match="--w1-ns: needs --reference exact"):
        rates.grid_from_args(parser.parse_args(["--reference", "sample", "--w1-ns", "16", "32"]))
    assert math.isclose(rates.grid_from_args(parser.parse_args(["--quick"]))["n_ref"], 1024)
    np.testing.assert_array_equal(rates.grid_from_args(parser.parse_args([]))["ns"], [16, 64, 256, 1024, 4096])
    sample = rates.grid_from_args(parser.parse_args(["--reference", "sample"]))
    assert sample["ns"] == [16, 32, 64, 128] and sample["reference"] == "sample"


def test_exact_reference_grid_and_table(tmp_path):
    """--reference exact: Gaussian attention rows against the Gaussian limit (MLP declared linear),
    the others against QMC; sizes may exceed n_ref; the table and the fits name the reference."""
    import argparse

    parser = argparse.ArgumentParser()
    rates.add_arguments(parser)
    grid = rates.grid_from_args(parser.parse_args(["--quick", "--ns", "4", "64", "--n-ref", "32", "--w1-ns", "4", "8"]))
    assert grid["reference"] == "exact"
    grid = dict(TINY, reference="exact", w1_ns=[4, 8], w1_size=32)
    configs = rates.sweep_configs(grid, layers=2, adjoint=False)
    refs = {(c["field"], c["population"]): (c["reference"], c.get("mlp_activation")) for c in configs}
    assert refs == {("attention", "gaussian"): ("gaussian", "linear"), ("control", "gaussian"): ("qmc", None)}
    fits = rates.fit_rates(rates.run_sweep(configs, tmp_path, progress=False))
    assert {(f["field"], f["reference"]) for f in fits} == {("attention", "gaussian"), ("control", "qmc")}
    token = next(f for f in fits if f["field"] == "attention" and f["quantity"] == "token")
    assert token["floor"] == 0 and token["meaningful"] and len(token["ci_halfwidth"]) == 2
    table = rates.format_table(fits)
    assert "gaussian" in table and "qmc" in table and "nan" not in table.lower()
