"""cfm_experiments.rates.fits: the fitted rates, the floor flag, the allowed exponents and the table,
on synthetic rows with a known answer."""

import json
import math

import numpy as np
import pytest
from _rates_rows import synthetic_rows

from cfm_experiments.rates import COLUMNS, POLICY, expected_band, fit_rates, format_prefactors, format_table
from cfm_experiments.rates.fits import prefactors_vs_dim
from cfm_experiments.results import ResultsFolder


def test_fits_recover_the_known_slopes_and_prefactors():
    """Deviations 0.6·n^slope (5 % noise over 8 seeds, centred): every fitted slope and prefactor is
    the known one, its CI around it, each quantity over its own sizes."""
    slopes = {("attention", "token"): -0.5, ("attention", "grad_phi"): -0.3, ("control", "token"): -0.25}
    fits = fit_rates(synthetic_rows(slopes), n_boot=300)
    assert {(f["field"], f["dim"]) for f in fits} == {("attention", 2), ("attention", 8), ("control", 4)}
    for f in fits:
        want = slopes.get((f["field"], f["quantity"]), f["expected"])
        assert f["slope"] == pytest.approx(want, abs=1e-12) and f["ci_low"] < want < f["ci_high"], f
        assert f["ci_high"] - f["ci_low"] < 0.2 and f["prefactor"] == pytest.approx(0.6, rel=1e-9)
        assert len(f["mean"]) == len(f["ns"]) == len(f["ci_halfwidth"])
    gp = next(f for f in fits if f["quantity"] == "grad_phi" and f["dim"] == 8)
    assert gp["ns"] == [16.0, 64.0, 256.0] and gp["reference"] == "qmc"  # ∇φ up to 256, against QMC
    w1 = next(f for f in fits if f["quantity"] == "w1")
    assert w1["dim"] == 2 and w1["ns"] == [16.0, 32.0, 64.0, 128.0]
    tok = next(f for f in fits if f["quantity"] == "token" and f["dim"] == 2)
    assert tok["reference"] == "gaussian" and tok["expected"] == -0.5


@pytest.mark.parametrize("ratio,meaningful", [(0.6, True), (0.7, True), (0.72, False), (1.0, False)])
def test_floor_flag_is_the_reference_error_against_half_the_deviation(ratio, meaningful):
    """meaningful ⇔ floor/√2 < 0.5 × the mean deviation at the largest n, i.e. floor/dev < 0.707."""
    fits = fit_rates(synthetic_rows(floor_ratio=ratio, noise=0.0), n_boot=50)
    for f in fits:
        if f["quantity"] == "context":  # no floor: always meaningful
            assert f["meaningful"] and math.isnan(f["floor"])
        else:
            assert f["floor"] / f["deviation_at_max_n"] == pytest.approx(ratio)
            assert f["meaningful"] is meaningful, f


def test_expected_band_allows_the_log_at_intrinsic_dimension_two():
    """dʹ = 2 (W1, or the control field): from −1/2 to the least-squares slope of √(log n / n) over
    the sizes, computed here by an independent normal-equation solve; elsewhere the exponent itself."""
    ns = np.array([16.0, 32.0, 64.0, 128.0])
    X = np.stack([np.ones(4), np.log(ns)], axis=1)
    want = np.linalg.solve(X.T @ X, X.T @ np.log(np.sqrt(np.log(ns) / ns)))[1]
    assert want == pytest.approx(-0.36, abs=0.01)
    assert expected_band("attention", "w1", 2, ns) == pytest.approx((-0.5, want))
    assert expected_band("control", "token", 2, ns) == pytest.approx((-0.5, want))
    assert expected_band("attention", "token", 2, ns) == (-0.5, -0.5)
    assert expected_band("control", "token", 4, ns) == (-0.25, -0.25)
    assert expected_band("attention", "w1", 1, ns) == (-0.5, -0.5)


def test_table_and_summary_have_no_nan_strings(tmp_path):
    fits = fit_rates(synthetic_rows(), n_boot=50)
    table = format_table(fits)
    assert "nan" not in table.lower() and POLICY in table
    for col in COLUMNS:  # every column is explained under the table
        assert f"  {col} " in table
    assert sum(line.startswith("context ") for line in table.splitlines()) == 3
    text = ResultsFolder(tmp_path / "o", "rates", {}).write_summary({"fits": fits}).read_text()
    loaded = json.loads(text, parse_constant=lambda c: pytest.fail(c))
    context = next(f for f in loaded["fits"] if f["quantity"] == "context")
    assert context["floor"] is None  # no floor for the coupled context: null, not "nan"
    floored = format_table(fit_rates(synthetic_rows(floor_ratio=1.0), n_boot=50))
    assert "floor-limited: slope not meaningful" in floored


def test_prefactors_vs_dim_are_the_gaussian_attention_fits():
    fits = fit_rates(synthetic_rows(prefactor=0.4, noise=0.0), n_boot=50)
    pre = prefactors_vs_dim(fits)
    assert set(pre) == {"token", "context", "adjoint", "grad_phi"}  # not W1, not the control field
    assert set(pre["token"]) == {2, 8} and pre["token"][8] == pytest.approx(0.4)
    lines = format_prefactors(pre).splitlines()
    assert lines[0].startswith("fitted prefactor C vs d") and "d=2: 0.4  d=8: 0.4" in lines[1]
    assert format_prefactors({}) == ""
