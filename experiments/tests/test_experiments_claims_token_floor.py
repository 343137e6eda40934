"""token_floor: the floor model's prediction in closed form, and the paired fits of both references on
planted per-seed power laws."""

import math

import numpy as np

from cfm_experiments.claims import token_floor as F

NS = [300, 600, 1200, 2400]


def test_the_floor_model_at_the_root_rate_is_the_closed_form():
    """At β = −1/2 err_MC/err = √(1 + n/n_ref) at every n (errors adding in quadrature), the fitted
    slope flatter (Δβ > 0) and the intercept at n = 1 lower (ratio < 1)."""
    n_ref = 2000
    f = F.floor_model(NS, -0.5, n_ref)
    np.testing.assert_allclose(f["error_ratio"], np.sqrt(1 + np.asarray(NS) / n_ref), rtol=1e-12)
    assert f["delta"] > 0 and f["ratio"] < 1


def test_below_n_ref_a_steeper_exact_slope_predicts_a_smaller_floor():
    root, steep = F.floor_model(NS, -0.5, 10_000), F.floor_model(NS, -1.0, 10_000)  # every n below n_ref
    assert 0 < steep["delta"] < root["delta"] and 1 < steep["error_ratio"][-1] < root["error_ratio"][-1]


def test_a_reference_without_error_predicts_no_floor():
    """n_ref → ∞: nothing added, Δβ = 0, ratios 1 (the prediction reads the exact slope alone)."""
    f = F.floor_model(NS, -0.5, 10**18)
    np.testing.assert_allclose(f["delta"], 0.0, atol=1e-8)
    np.testing.assert_allclose([f["ratio"], *f["error_ratio"]], 1.0, rtol=1e-8)


def test_paired_fits_recover_planted_per_seed_slopes_and_prefactors():
    """Exact power laws per seed, c·n^β: Δβ and log(c_MC/c_exact) are the seeds' mean differences,
    their Student-t intervals around them (zero width when every seed differs alike)."""
    lx = np.log(np.asarray(NS, float))
    b_ex, b_mc = np.array([-0.5, -0.45, -0.55]), np.array([-0.4, -0.3, -0.35])
    a_ex, a_mc = np.array([0.1, 0.2, 0.0]), np.array([-0.2, -0.1, 0.05])
    exact = np.exp(a_ex[:, None] + b_ex[:, None] * lx)
    mc = np.exp(a_mc[:, None] + b_mc[:, None] * lx)
    out = F.paired(NS, exact, mc)
    np.testing.assert_allclose(out["delta"]["value"], np.mean(b_mc - b_ex), atol=1e-12)
    np.testing.assert_allclose(math.log(out["ratio"]["value"]), np.mean(a_mc - a_ex), atol=1e-12)
    for k in ("delta", "ratio"):
        assert out[k]["ci_low"] < out[k]["value"] < out[k]["ci_high"]
    same = F.paired(NS, exact, exact * 2.0)
    np.testing.assert_allclose([same["delta"]["value"], same["ratio"]["value"]], [0.0, 2.0], atol=1e-12)
    np.testing.assert_allclose([same["ratio"]["ci_low"], same["ratio"]["ci_high"]], 2.0, atol=1e-9)
