"""Part `paper` (the second paper's appendix grid) on tiny sizes: the grid, the energy signs and the
theorem's bound, the rate interval against the hand bootstrap it replaces, program reuse, option rules."""

import numpy as np
import pytest

from cfm_experiments.protocol import resolve
from cfm_experiments.sync import paper as sp
from cfm_jax import CompileRecorder
from cfm_jax.stochastic import NoiseKernel

PART = sp.PaperGrid()


def _cell(**kw):
    c = dict(kind="cell", act="sigmoid", d=5, sigma=0.1, scale=1.0, N=6, L=20, T=5.0, beta=1.0, width=16, R=4, seed=0)
    return {**c, **kw}


def _programs(fn, *args):
    with CompileRecorder() as stats:
        out = fn(*args)
    return stats.compiled + stats.cache_loads, out


def test_grid_matches_the_paper():
    cfgs = PART.configs(resolve([PART]))
    cells = [c for c in cfgs if c["kind"] == "cell"]
    main = [c for c in cells if c["width"] == 256]
    assert {c["d"] for c in main} == {5, 64, 128} and {c["scale"] for c in main} == {1.0, 0.0, -1.0}
    assert {c["act"] for c in main} == {"relu", "silu", "sigmoid", "tanh", "none"}
    assert len(main) == 4 * 3 * 2 * 3 + 3 * 3  # "no MLP" has no σ
    assert all((c["N"], c["L"], c["T"], c["beta"], c["R"]) == (64, 150, 5.0, 1.0, 16) for c in main)
    check = [c for c in cells if c["width"] != 256]
    assert {(c["act"], c["d"], c["sigma"], c["scale"], c["width"]) for c in check} == {
        (a, 64, 0.1, 1.0, m) for a in ("relu", "sigmoid", "tanh") for m in (64, 1024)
    }
    eps = [(c["scale"], c["d"]) for c in cfgs if c["kind"] == "epsilon"]
    assert eps == [(s, d) for s in (1.0, 0.0, -1.0) for d in (5, 64, 128)]
    quick = PART.configs(resolve([PART], quick=True))
    assert len(quick) == 15 + 6 + 3 and {c["R"] for c in quick if c["kind"] == "cell"} == {4}
    assert {c["R"] for c in PART.configs(resolve([PART], full_grid=True)) if c["kind"] == "cell"} == {64}
    # a --width equal to a check width runs that cell once
    narrow = [c for c in PART.configs(resolve([PART], width=64)) if c["kind"] == "cell" and c["act"] == "relu"]
    assert len([c for c in narrow if (c["d"], c["sigma"], c["scale"]) == (64, 0.1, 1.0)]) == 2


def test_options_name_their_flags():
    with pytest.raises(ValueError, match=r"^--width must be an integer >= 1, got 0\.$"):
        resolve([PART], width=0)
    with pytest.raises(ValueError, match=r"^--full-grid and --realisations both set"):
        resolve([PART], full_grid=True, realisations=8)
    with pytest.raises(ValueError, match=r"^--full-grid must be True or False, got 1\.$"):
        resolve([PART], full_grid=1)


def test_decay_rate_is_the_hand_bootstrap_it_replaces():
    """The interval of the fitted rate equals, to round-off, the percentile bootstrap the command wrote by
    hand before (realisations resampled as whole curves with numpy's default_rng(0), 1000 resamples):
    cfm_jax.stats.bootstrap draws the same indices. Noise-free exponentials give an exact rate and a
    collapsed interval; log-normal realisation factors one that contains the true rate."""
    ts = np.linspace(0, 5, 31)
    e = np.outer(np.array([1.0, 2.0, 0.5]), np.exp(-0.7 * ts))
    rate = sp.decay_rate(ts, e)
    assert rate.value == pytest.approx(-0.7, rel=1e-12)
    assert rate.ci_low == pytest.approx(-0.7, rel=1e-9) and rate.ci_high == pytest.approx(-0.7, rel=1e-9)
    rng = np.random.default_rng(0)
    e = np.exp(rng.normal(0, 0.3, (64, 1)) - 0.7 * ts + rng.normal(0, 0.05, (64, ts.size)))
    rate = sp.decay_rate(ts, e)
    assert rate.ci_low <= -0.7 <= rate.ci_high and rate.ci_high - rate.ci_low < 0.05
    tc = ts - ts.mean()
    slope = lambda m: (np.log(m) * tc).sum(-1) / (tc**2).sum()  # noqa: E731
    idx = np.random.default_rng(0).integers(0, 64, (1000, 64))
    lo, hi = np.quantile(slope(e[idx].mean(1)), [0.025, 0.975])
    assert rate.value == pytest.approx(slope(e.mean(0)), rel=1e-14)
    assert rate.ci_low == pytest.approx(lo, rel=1e-13) and rate.ci_high == pytest.approx(hi, rel=1e-13)
    single = sp.decay_rate(ts, e[:1])
    assert np.isnan(single.ci_low) and np.isnan(single.ci_high)


@pytest.mark.slow  # the appendix grid's cells
def test_cells_energy_signs_and_the_theorem_bound():
    """No MLP, no attention: the state never moves, E_β is constant and the rate is exactly 0. No MLP:
    attractive attention (V = I) lowers E_β, repulsive (V = −I) raises it. Sigmoid at d = 5 satisfies
    Assumption 1, and its mean energy stays under exp((ε + λ̄')t) at every saved layer."""
    still = sp.run_cell(_cell(act="none", scale=0.0))
    assert np.ptp(still["energy_mean"]) < 1e-14 and abs(still["rate"]) < 1e-12
    assert "lambda1" not in still and not still["assumption1"]
    assert sp.run_cell(_cell(act="none", scale=1.0))["rate"] < 0
    assert sp.run_cell(_cell(act="none", scale=-1.0))["rate"] > 0
    row = sp.run_cell(_cell())
    assert row["assumption1"] and not sp.assumption_one("relu", 5, 0.0) and not sp.assumption_one("tanh", 64, 0.0)
    eps = sp.epsilon_for(1.0, 6, 5, 1.0, 0)
    assert eps <= 1e-12 and sp.epsilon_for(0.0, 6, 5, 1.0, 0) == 0.0
    bound = eps + row["lambda_bar_prime"]
    assert np.all(np.asarray(row["log_ratio"]) <= bound * np.asarray(row["t"]) + 1e-12)
    k = NoiseKernel.paper("sigmoid", 5, 0.1, 0.1)
    assert row["lambda1"] == pytest.approx(k.lyapunov(5)) and row["lambda_bar"] == pytest.approx(k.dissipation(5))
    assert np.asarray(row["energy"]).shape == (4, 5) and row["energy_mean"] == pytest.approx(np.mean(row["energy"], 0))


def test_one_program_for_both_attention_signs_and_every_seed():
    """V = ±I is an array of the attention: the repulsive cell and another seed reuse the attractive cell's
    programs (the kernel and the width are static: another of either would compile anew)."""
    sp.run_cell(_cell(L=10))
    added, _ = _programs(sp.run_cell, _cell(L=10, scale=-1.0))
    assert added == 0, f"the other attention sign compiled {added} program(s)"
    added, _ = _programs(sp.run_cell, _cell(L=10, seed=3))
    assert added == 0, f"a second seed compiled {added} program(s)"


def test_part_runs_both_kinds_of_row():
    eps = PART.run(dict(kind="epsilon", scale=0.0, d=5, N=6, beta=1.0, seed=0))
    assert eps == {"epsilon": 0.0}
    row = PART.run(_cell(L=10))
    assert {"rate", "rate_ci", "energy", "cos_quantiles", "assumption1"} <= set(row)
    assert np.all(np.diff(np.asarray(row["cos_quantiles"], float), axis=1) >= 0)  # quantiles in order at every layer
    # another width: the same starts (the paired width comparison needs them), other noise
    other = PART.run(_cell(L=10, width=8))
    np.testing.assert_array_equal(np.asarray(other["energy"])[:, 0], np.asarray(row["energy"])[:, 0])
    assert np.abs(np.asarray(other["energy"])[:, -1] - np.asarray(row["energy"])[:, -1]).min() > 1e-6
