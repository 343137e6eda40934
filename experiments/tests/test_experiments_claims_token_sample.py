"""claims.token_sample: the bias rule on fed intervals, the paired fits on planted errors (a
reference error that adds to every size's flattens, one that shrinks with n steepens), a real tiny
row recomputed independently, the options, the table and the figure."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cfm_experiments.claims import token_sample as T
from cfm_experiments.protocol import resolve
from cfm_experiments.verdicts import claims as VC
from cfm_jax import GaussianMeasure, attention_output_moments

NS = [300, 600, 1200, 2400]


def _iv(lo, hi):
    return {"value": (lo + hi) / 2, "ci_low": lo, "ci_high": hi}


def test_the_bias_rule_reads_every_horizon():
    """Every Δβ interval outside ±0.01 (either side): *holds*; one inside: *refuted*; one across an
    edge (and none inside): *undecided*; no interval: *not measured*."""
    far_up, far_down, inside, across = _iv(0.03, 0.06), _iv(-0.12, -0.05), _iv(-0.004, 0.006), _iv(0.002, 0.04)
    assert VC.bias_verdict([far_up, far_down, far_up], T.NEGLIGIBLE) == "holds"
    assert VC.bias_verdict([far_up, inside, far_down], T.NEGLIGIBLE) == "refuted at these sizes"
    assert VC.bias_verdict([far_up, across], T.NEGLIGIBLE) == "undecided: interval straddles the boundary"
    assert VC.bias_verdict([inside, across], T.NEGLIGIBLE) == "refuted at these sizes"
    assert VC.bias_verdict([], T.NEGLIGIBLE) == "not measured: no usable rows"
    assert VC.bias_verdict([_iv(float("nan"), float("nan"))], T.NEGLIGIBLE) == "not measured: no usable rows"


def _row(exact, mc, scale=1.0, horizon=0.5):
    """A row with planted errors ``(seeds, K)`` for both quantities (the same for mean and cov)."""
    cfg = {"scale": scale, "dim": 50, "n_ref": 10_000, "ns": NS}
    S = len(exact)
    return {
        "config": cfg,
        "ns": NS,
        "horizon": horizon,
        **{f"{q}_exact": np.asarray(exact).tolist() for q in T.QUANTITIES},
        **{f"{q}_mc": np.asarray(mc).tolist() for q in T.QUANTITIES},
        "ref_mean_error": [0.02] * S,
        "ref_cov_error": [0.1] * S,
        "cov_norm": 1.0,
    }


def _planted(seeds=6):
    """Exact-reference errors n^{-1/2} with log-normal noise per seed and size."""
    noise = np.exp(0.03 * np.random.default_rng(0).standard_normal((seeds, len(NS))))
    return np.asarray(NS, float) ** -0.5 * noise


def test_a_reference_error_that_adds_flattens_and_one_that_shrinks_steepens():
    """The paired Δβ and prefactor ratio on planted errors: the reference's own error adding in
    quadrature (√(e² + r²)) flattens the slope; a shrinking one (e·(n/n₀)^{-0.1}) steepens it by 0.1;
    the same errors give Δβ = 0 and ratio 1; a factor on every size changes the prefactor only."""
    e = _planted()
    added = np.sqrt(e**2 + 0.03**2)
    h = T.per_horizon(_row(e, added))["mean"]
    assert h["delta"]["ci_low"] > 0.05, h["delta"]
    assert -0.55 < h["exact"]["slope"] < -0.45, h["exact"]
    steep = T.per_horizon(_row(e, e * (np.asarray(NS) / NS[0]) ** -0.1))["cov"]
    np.testing.assert_allclose(steep["delta"]["value"], -0.1, atol=1e-12)
    same = T.per_horizon(_row(e, e))["mean"]
    assert same["delta"]["ci_low"] == same["delta"]["ci_high"] == 0.0
    np.testing.assert_allclose(same["ratio"]["value"], 1.0)
    lower = T.per_horizon(_row(e, 0.8 * e))["mean"]
    np.testing.assert_allclose([lower["delta"]["value"], lower["ratio"]["value"]], [0.0, 0.8], atol=1e-12)


def test_the_line_is_withheld_below_the_stable_sizes():
    e = _planted()
    data = [T.per_horizon(_row(e, np.sqrt(e**2 + 0.03**2), horizon=h)) for h in (0.1, 1.0)]
    line = T.bias_line("mean", data, dict(T.STABLE["mean"]), 10_000)
    assert line.verdict == "holds", line
    assert "flatter at 2, steeper at 0 of 2 horizons" in line.measured
    small = T.bias_line("mean", data, {**T.STABLE["mean"], "seeds": 3}, 10_000)
    assert small.verdict == "inconclusive at these sizes" and "(holds)" in small.sizes
    # the covariance's line needs more than the default sizes
    assert T.bias_line("cov", data, dict(T.STABLE["mean"]), 10_000).verdict == "inconclusive at these sizes"
    # a reference whose error is exactly the floor model's (c·n_ref^β added in quadrature): its Δβ is
    # the floor model's +0.049 > NEGLIGIBLE, yet nothing beyond it, so the line is refuted
    floor = [T.per_horizon(_row(e, np.sqrt(e**2 + 10_000**-1.0), horizon=h)) for h in (0.1, 1.0)]
    assert all(h["mean"]["delta"]["ci_low"] > T.NEGLIGIBLE for h in floor)
    line = T.bias_line("cov", floor, dict(T.STABLE["cov"]), 10_000)
    assert line.verdict == "refuted at these sizes", line.measured
    assert "Δβ beyond the floor model at the smallest" in line.measured


TINY = {"scale": 2.0, "seed": 3, "ns": [16, 32, 64], "contexts": 3, "seeds": 2, "n_ref": 128, "dim": 4, "rho": 0.5}


def test_a_real_row_is_its_errors_recomputed_by_hand():
    """One seed and size of a tiny row, recomputed from the part's keys with the library alone: the
    four error arrays are the errors they are named for (exact and Monte-Carlo, mean and covariance)."""
    row = T.TokenSample().run(dict(TINY))
    d, rho, s = TINY["dim"], TINY["rho"], TINY["scale"]
    base = T.base_layer(TINY["seed"], d)
    params = T.scaled(base, s)
    exact = attention_output_moments(params, GaussianMeasure(np.zeros(d), rho * np.eye(d)))
    r, k, n = 1, 2, 64
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(TINY["seed"]), 1), r)
    draw = lambda kk, m: math.sqrt(rho) * jax.random.normal(kk, (m, d), jnp.float32)  # noqa: E731
    mc = attention_output_moments(params, draw(jax.random.fold_in(key, 0), TINY["n_ref"]))
    got = {f"{q}_{ref}": [] for q in T.QUANTITIES for ref in T.REFERENCES}
    for kk in jax.random.split(jax.random.fold_in(key, n), TINY["contexts"]):
        m, c = attention_output_moments(params, draw(kk, n))
        for ref, (rm, rc) in (("exact", exact), ("mc", mc)):
            got[f"mean_{ref}"].append(float(jnp.linalg.norm(m - rm)))
            got[f"cov_{ref}"].append(float(jnp.linalg.norm(c - rc)))
    for name, values in got.items():
        np.testing.assert_allclose(row[name][r][k], np.mean(values), rtol=2e-5, err_msg=name)
    np.testing.assert_allclose(row["horizon"], T.horizon(base, 1.0, 1.0) * rho * s, rtol=1e-12)
    assert row["cov_norm"] > 0 and len(row["ref_mean_error"]) == TINY["seeds"]


def test_the_paper_grid_sets_the_sizes_itself():
    part = T.TokenSample()
    settings = resolve([part], token_paper_grid=True)
    assert T.sizes(settings) == (list(T.PAPER_NS), 200)
    assert T.PAPER_NS[0] == 1000 and T.PAPER_NS[-1] == 30000 and len(T.PAPER_NS) == 12
    assert T.sizes(resolve([part], token_ns=[500, 100, 200])) == ([100, 200, 500], 8)
    with pytest.raises(ValueError, match="--token-paper-grid.*--token-ns"):
        resolve([part], token_paper_grid=True, token_ns=[100, 200, 400])
    with pytest.raises(ValueError, match="--token-ns"):
        resolve([part], token_ns=[100, 200])  # a slope and its spread need three sizes
    configs = part.configs(resolve([part], quick=True))
    # two independent draws (seeds 0 and 1), each the three scales
    assert [c["scale"] for c in configs] == [0.05, 1.16, 50.0] * 2 and configs[0]["n_ref"] == 10_000
    assert [c["seed"] for c in configs] == [0, 0, 0, 1, 1, 1]


def test_the_table_and_the_figure_show_every_quantity_and_reference():
    e = _planted()
    rows = [_row(e, np.sqrt(e**2 + 0.03**2), scale=s, horizon=h) for s, h in ((0.1, 0.05), (1.0, 0.5), (10.0, 5.0))]
    data = [T.per_horizon(r) for r in rows]
    text = T.table(data)
    # the three planted horizons have the same errors: the last two repeat the first
    assert len(text.splitlines()) == 1 + 3 * 4 + 2 + 1 and text.count("repeats a smaller horizon") == 2
    body = [line for line in text.splitlines()[1:-1] if "repeats" not in line]
    references = [line.split()[4] for line in body]  # s, H, H/√d, quantity, reference
    assert references == ["exact", "Monte-Carlo"] * 6
    fig = T.token_figure(rows, data)
    axes = fig.axes
    assert len(axes) == 3 and all(a.get_xlabel() and a.get_ylabel() for a in axes)
    legends = [ax.get_legend() for ax in axes]
    assert all(legend is not None for legend in legends)
    for legend in legends[:2]:
        labels = [t.get_text() for t in legend.get_texts()]  # pyright: ignore[reportOptionalMemberAccess]
        assert "exact reference" in labels and any(t.startswith("Monte-Carlo reference") for t in labels)
    labels = [t.get_text() for t in legends[2].get_texts()]  # pyright: ignore[reportOptionalMemberAccess]
    assert {f"{q}, {r}" for q in T.QUANTITIES.values() for r in T.REFERENCES.values()} <= set(labels)


def test_the_floor_model_is_the_reference_error_adding_in_quadrature():
    """Errors n^{-1/2} exactly and a Monte-Carlo error √(n^{-1} + n_ref^{-1}) (independent errors adding):
    the measured Δβ, prefactor ratio and err_MC/err (paired fits over seeds) are the floor model's
    prediction from the exact slope, err_MC/err = √(1 + n/n_ref) ≥ 1 at every n while the intercept
    ratio at n = 1 is below 1."""
    n_ref = 2000
    e = np.tile(np.asarray(NS, float) ** -0.5, (3, 1))
    row = _row(e, np.sqrt(e**2 + 1 / n_ref))
    row["config"]["n_ref"] = n_ref
    h = T.per_horizon(row)["mean"]
    np.testing.assert_allclose(h["exact"]["slope"], -0.5, atol=1e-12)
    np.testing.assert_allclose(h["error_ratio"], np.sqrt(1 + np.asarray(NS) / n_ref), rtol=1e-12)
    np.testing.assert_allclose(h["floor"]["error_ratio"], h["error_ratio"], rtol=1e-12)
    np.testing.assert_allclose(h["floor"]["delta"], h["delta"]["value"], atol=1e-12)
    np.testing.assert_allclose(h["floor"]["ratio"], h["ratio"]["value"], rtol=1e-12)
    assert h["delta"]["value"] > 0.02 and h["ratio"]["value"] < 1 and min(h["error_ratio"]) > 1


def test_distinct_horizons_are_those_whose_errors_change():
    """A horizon whose errors are within REPEAT of the last distinct one's at every n repeats it; 5 %
    at one n is new information, and a later horizon is compared with the last distinct one."""
    e = _planted()
    mc = np.sqrt(e**2 + 0.03**2)
    bump = np.ones(len(NS))
    bump[-1] = 1.05
    rows = [
        _row(e, mc, horizon=0.1),
        _row(e * (1 + T.REPEAT / 4), mc, horizon=0.2),
        _row(e * bump, mc, horizon=1.0),
        _row(e * bump * (1 + T.REPEAT / 4), mc, horizon=2.0),
    ]
    data = [T.per_horizon(r) for r in rows]
    assert T.distinct(data) == [True, False, True, False]
    line = T.bias_line("mean", data, dict(T.STABLE["mean"]), 10_000)
    assert "2 of them distinct" in line.measured and "floor model" in line.measured, line.measured
