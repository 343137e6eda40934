"""The ``sync --paper`` / ``--figure1`` experiment (cfm_experiments.sync_paper) on tiny sizes.

Science, not strings: the odd-field symmetry behind Figure 1, its two outcomes (one cluster for
ReLU, two antipodal points for tanh), the sign of the energy rate in the three attention
regimes, the theorem's bound where Assumption 1 holds, and the rate fit on exact exponentials.
"""

import json
import math
import subprocess
import sys

import jax
import numpy as np
import pytest

from cfm_experiments import sync_paper as sp
from cfm_jax.stochastic import (
    NoiseKernel,
    StochasticTransformer,
    nematic_order,
    order_parameter,
    random_tokens,
    simulate,
    simulate_many,
)


def test_tanh_without_bias_is_an_odd_flow_and_relu_is_not():
    """G odd (tanh, σ = 0) ⇒ one layer maps −x to −(image of x) for the same weights, so the
    whole flow commutes with x ↦ −x token by token: antipodal points stay antipodal, which is
    what makes the two-point attractor possible. ReLU breaks the symmetry at O(1)."""
    x0 = random_tokens(jax.random.key(0), 6, 4)
    for act in ("tanh", "relu"):
        odd = act == "tanh"
        model = StochasticTransformer(NoiseKernel.paper(act, 4), width=32, layers=200, horizon=2.0)
        a = simulate(model, x0, jax.random.key(1))[1]
        b = simulate(model, -x0, jax.random.key(1))[1]
        gap = float(np.abs(np.asarray(a + b)).max())
        assert (gap < 1e-12) if odd else (gap > 0.1), (act, gap)


def _final_orders(act, runs, n=8, layers=3000, horizon=60.0, width=64):
    model = StochasticTransformer(NoiseKernel.paper(act, 4), width=width, layers=layers, horizon=horizon)
    x0 = jax.vmap(lambda k: random_tokens(k, n, 4))(jax.random.split(jax.random.key(0), runs))
    _, x = jax.jit(lambda x, ks: simulate_many(model, x, ks))(x0, jax.random.split(jax.random.key(1), runs))
    cos = np.asarray(np.einsum("rid,rjd->rij", x, x))
    polar = np.asarray(jax.vmap(order_parameter)(x))
    nematic = np.asarray(jax.vmap(nematic_order)(x))
    return polar, nematic, cos.min(axis=(1, 2))


def test_figure1_outcomes_small():
    """Figure 1's outcomes at a small size run long enough to reach the attractor (n = 8 on S³,
    m = 64, Δt = 0.02, T = 60; λ₁T = −7.5 (ReLU), −12 (tanh)): ReLU ends in one cluster
    (polar order ≈ 1) and never holds an antipodal pair (its field is not odd, so the antipodal
    set is not invariant); tanh ends on two antipodal points (nematic order ≈ 1) and, except
    with probability 2^{1−n} per run, both points are occupied (a pair at cosine ≈ −1, polar
    order ≤ 1 − 2/n). Merging times have a long tail, so 3 of 4 ReLU runs must have merged
    (polar > 0.95); 3 of 4 tanh runs must show both points (two or more one-sided runs: < 1e-3)."""
    polar, nematic, mincos = _final_orders("relu", 4)
    assert (polar > 0.95).sum() >= 3 and np.all(mincos > -0.5), (polar, mincos)
    polar, nematic, mincos = _final_orders("tanh", 4)
    assert np.all(nematic > 0.99), nematic
    both = mincos < -0.99
    assert both.sum() >= 3, mincos
    assert np.all(polar[both] <= 1 - 2 / 8 + 1e-3), polar


@pytest.mark.slow
def test_figure1_outcomes_full_size():
    """The paper's size (N = 64, L = 2000, T = 20, m = 2048), 3 runs each: at T = 20 the
    attractors are not yet reached (λ₁T = −2.5 for ReLU), but the two outcomes already
    separate: tanh runs contain exactly antipodal pairs (min cosine < −0.999) and a small polar
    order (< 0.5; two populated antipodal points), ReLU runs none (min cosine > −0.5) and a
    large polar order (> 0.8)."""
    for seed in range(3):
        _, xs, polar, nematic = sp.figure1_run("tanh", seed=seed)
        assert (xs[-1] @ xs[-1].T).min() < -0.999 and polar < 0.5, (seed, polar)
        _, xs, polar, nematic = sp.figure1_run("relu", seed=seed)
        assert (xs[-1] @ xs[-1].T).min() > -0.5 and polar > 0.8, (seed, polar)


def test_energy_rate_fit_recovers_an_exponential_and_brackets_it():
    """Noise-free exponentials: the fit is exact and the bootstrap CI collapses onto it; with
    independent log-normal realisation factors the 95% CI contains the true rate (the mean
    curve is exactly C e^{λt} times a constant, so only the log-mean fit enters)."""
    ts = np.linspace(0, 5, 31)
    e = np.outer(np.array([1.0, 2.0, 0.5]), np.exp(-0.7 * ts))
    rate, lo, hi = sp.energy_rate_fit(ts, e)
    assert (
        rate == pytest.approx(-0.7, rel=1e-12)
        and lo == pytest.approx(-0.7, rel=1e-9)
        and hi == pytest.approx(-0.7, rel=1e-9)
    )
    rng = np.random.default_rng(0)
    e = np.exp(rng.normal(0, 0.3, (64, 1)) - 0.7 * ts + rng.normal(0, 0.05, (64, ts.size)))
    rate, lo, hi = sp.energy_rate_fit(ts, e)
    assert lo <= -0.7 <= hi and hi - lo < 0.05, (rate, lo, hi)


def _cell(**kw):
    c = dict(
        section="cell", act="sigmoid", d=5, sigma=0.1, scale=1.0, N=6, L=20, T=5.0, beta=1.0, width=16, R=4, seed=0
    )
    return {**c, **kw}


def test_cells_energy_signs_and_the_theorem_bound():
    """No MLP, no attention: the state never moves, E_β is constant and the rate is exactly 0.
    No MLP: attractive attention (V = I) lowers E_β, repulsive (V = −I) raises it (dE/dt has
    the sign of V, docs/stochastic.md). Sigmoid at d = 5 satisfies Assumption 1, and its mean
    energy stays below exp((ε + λ̄')t) at every saved layer, as the theorem states (and a
    synthetic decay at half that rate is reported as violating it)."""
    still = sp.run_cell(_cell(act="none", scale=0.0))
    assert np.ptp(still["energy_mean"]) < 1e-14 and abs(still["rate"]) < 1e-12  # 𝒩(x) = x up to round-off
    assert sp.run_cell(_cell(act="none", scale=1.0))["rate"] < 0
    assert sp.run_cell(_cell(act="none", scale=-1.0))["rate"] > 0
    row = sp.run_cell(_cell())
    assert sp.assumption_one("sigmoid", 5, 0.1) and not sp.assumption_one("relu", 5, 0.0)
    assert not sp.assumption_one("tanh", 64, 0.0)
    rec = {"config": _cell(), **row}
    eps = {(1.0, 5): sp.epsilon_for(1.0, 6, 5, 1.0, 0)}
    (cmp,) = sp.comparison([rec], eps)
    assert eps[(1.0, 5)] <= 1e-12
    assert (
        cmp["assumption1"]
        and cmp["holds_pointwise"]
        and cmp["bound"] == pytest.approx(eps[(1.0, 5)] + row["lambda_bar_prime"])
    )
    # a decay at half the bound's rate violates it after t = 0, and must be flagged as such
    slow = {**rec, "log_ratio": 0.5 * cmp["bound"] * np.asarray(row["t"])}
    assert sp.comparison([slow], eps)[0]["holds_pointwise"] is False
    k = NoiseKernel.paper("sigmoid", 5, 0.1, 0.1)
    assert row["lambda1"] == pytest.approx(k.lyapunov(5)) and row["lambda_bar"] == pytest.approx(k.dissipation(5))


def test_grid_matches_the_paper():
    cfgs = sp.grid_configs(quick=False, full=False, width=256, realisations=None, seed=0)
    main = [c for c in cfgs if c["width"] == 256]
    assert {c["d"] for c in main} == {5, 64, 128} and {c["scale"] for c in main} == {1.0, 0.0, -1.0}
    assert {c["act"] for c in main} == {"relu", "silu", "sigmoid", "tanh", "none"}
    assert len(main) == 4 * 3 * 2 * 3 + 3 * 3  # "no MLP" has no σ
    assert all((c["N"], c["L"], c["T"], c["beta"]) == (64, 150, 5.0, 1.0) for c in main)


@pytest.mark.slow
def test_cli_figure1_quick(tmp_path):
    """``cfm-jax sync --figure1 --quick`` writes the figure and a valid summary with both runs."""
    r = subprocess.run(
        [sys.executable, "-m", "cfm_experiments", "sync", "--figure1", "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads((tmp_path / "figure1" / "summary.json").read_text())
    acts = {row["act"]: row for row in summary["figure1"]}
    assert set(acts) == {"relu", "tanh"} and (tmp_path / "figure1" / "figure1.png").stat().st_size > 10_000
    for row in acts.values():
        assert 0 <= row["polar_order"] <= 1 + 1e-12 and 1 / 4 - 1e-12 <= row["nematic_order"] <= 1 + 1e-12
    assert not math.isnan(acts["tanh"]["nematic_order"])
    run = json.loads((tmp_path / "figure1" / "run.json").read_text())
    assert run["experiment"] == "sync --figure1" and set(run["files"]) == {"figure1.png", "summary.json"}
    again = subprocess.run(
        [sys.executable, "-m", "cfm_experiments", "sync", "--figure1", "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 1 and "already holds results of `sync --figure1`" in again.stderr


def test_w2_squared_against_brute_force_and_exact_cases():
    """Exact W₂² between uniform measures (N | M) against enumerating every plan that moves
    mass k/M = 1/N blocks (all assignments of z to y repeated k times) on a tiny case; 0 for
    equal measures; and for y = one point, the mean squared distance to z."""
    import itertools

    rng = np.random.default_rng(0)
    y, z = rng.normal(size=(2, 3)), rng.normal(size=(4, 3))
    yy = np.repeat(y, 2, axis=0)
    brute = min(((yy[list(p)] - z) ** 2).sum(-1).mean() for p in itertools.permutations(range(4)))
    assert sp.w2_squared_uniform(y, z) == pytest.approx(brute, rel=1e-12)
    assert sp.w2_squared_uniform(z, z[::-1]) == pytest.approx(0.0, abs=1e-15)
    assert sp.w2_squared_uniform(y[:1], z) == pytest.approx(((z - y[0]) ** 2).sum(-1).mean(), rel=1e-12)
    with pytest.raises(ValueError, match="divide"):
        sp.w2_squared_uniform(z[:3], z)


def test_chaos_w2_is_zero_at_n_ref_and_decreases_with_n():
    """The coupling is exact: with N = N_ref the system *is* the reference (same start, same
    keys), so the deviation is 0 to round-off; smaller N deviate, and more so the smaller N
    (a 4-token system vs 16: W₂² at least doubles — it is ~N^{-1/2} to N^{-1})."""
    c = dict(
        section="chaos_w2",
        d=3,
        act="tanh",
        sigma=0.1,
        Ns=[2, 8, 16],
        N_ref=16,
        L=10,
        T=1.0,
        width=16,
        R=3,
        save_every=5,
        seed=0,
    )
    row = sp.run_chaos_w2(c)
    assert row["mean"][-1] < 1e-20
    assert row["mean"][0] > 2 * row["mean"][1] > 0


def test_cli_bad_width_is_one_line_error(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "cfm_experiments", "sync", "--paper", "--width", "0", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == ["cfm-jax sync: error: --width must be an integer >= 1, got 0."]


def test_figure1_overwrite_keeps_the_old_results_until_the_new_ones_are_computed(tmp_path, monkeypatch):
    """Figure 1 has no rows: an --overwrite interrupted while computing leaves the old figure and
    summary as they were; a finished one replaces them."""
    import argparse

    import numpy as np

    def fake_run(act, seed, **kw):
        return np.linspace(0, 20, 21), np.full((21, 3, 4), 0.5), 0.25 + seed, 0.5

    monkeypatch.setattr(sp, "figure1_run", fake_run)
    args = lambda seed, **kw: argparse.Namespace(
        out=tmp_path,
        quick=True,
        seed=seed,
        resume=False,  # noqa: E731
        overwrite=False,
        **kw,
    )
    assert sp.run_figure1(args(0)) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def crash(*a, **k):
        raise RuntimeError("interrupted while computing")

    monkeypatch.setattr(sp, "figure1_run", crash)
    with pytest.raises(RuntimeError):
        sp.run_figure1(argparse.Namespace(**{**vars(args(1)), "overwrite": True}))
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    monkeypatch.setattr(sp, "figure1_run", fake_run)
    sp.run_figure1(argparse.Namespace(**{**vars(args(1)), "overwrite": True}))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (
        summary["figure1"][0]["polar_order"] == 1.25
        and json.loads((tmp_path / "run.json").read_text())["config"]["seed"] == 1
    )
