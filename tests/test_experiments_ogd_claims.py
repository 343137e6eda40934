"""The OGD claims against the exact infinite-context limit (cfm_experiments.ogd_claims).

* the population trajectory of a coupled run with ``population=μ`` is the ridge OGD of the exact
  Gaussian loss: checked against a hand-written ridge step θ ← θ − η(L·∇L̂(θ) + λθ) whose
  gradient is ``jax.grad`` of a hand-written moment recursion (independent of the library's
  Gaussian limit and of the OGD loop), and the experiment's compiled runner (λ traced, seeds
  vmapped) against plain ``coupled_run`` with ``ridge_sgd``;
* the n-slope of sup_{k ≤ k_c} at λ = 0 at small sizes contains −1/2;
* ``summarize`` turns synthetic rows with known exponents into the right numbers and verdicts,
  ``figures`` writes the PNGs it names.
"""

import json
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_experiments import ogd_claims as oc
from cfm_jax import ogd
from cfm_jax.stats import fit_loglog

TINY: dict[str, Any] = dict(
    part="ogd",
    dim=2,
    regime="zero",
    d0=2,
    dims=[2],
    layers=2,
    batch=4,
    ns=[4, 16, 64, 256],
    context_scale=0.5,
    eta=0.5,
    steps=24,
    seeds=8,
    weak=0.125,
    strong=1.5,
    curve_points=30,
    seed=0,
)


def _moment_loss(params, x0, y, mean, cov):
    """½ mean ‖x_1 − y‖² of the infinite-context residual network, written out: per layer (one
    Euler step h = 1/L) c = Σ_h V_h m, M = Σ_h V_h Σ A_hᵀ with A_h = Q_hᵀ K_h, then
    x ← x + h(c + Mx), m ← m + h(c + Mm), Σ ← (I + hM) Σ (I + hM)ᵀ."""
    Q, K, V = params
    L = Q.shape[0]
    h = 1.0 / L
    x, m, S = x0, mean, cov
    for l in range(L):
        A = jnp.einsum("hed,hef->hdf", Q[l], K[l])
        c = jnp.einsum("hij,j->i", V[l], m)
        M = jnp.einsum("hij,jk,hlk->il", V[l], S, A)
        G = jnp.eye(m.shape[0]) + h * M
        x, m, S = x + h * (c + x @ M.T), m + h * (c + M @ m), G @ S @ G.T
    return 0.5 * jnp.mean(jnp.sum((x - y) ** 2, axis=-1))


def test_population_trajectory_is_hand_written_ridge_ogd_on_the_moment_recursion():
    cfg = dict(TINY, ns=[4, 8])
    mu = oc._population(cfg)
    _, student, stream = oc._models(cfg, jax.random.key(5), mu)
    eta, lam, K = 0.1, 0.7, 6
    res = ogd.coupled_run(student, stream, (4, 8), ogd.ridge_sgd(eta, lam), K, record_params=True, population=mu)
    grad = jax.jit(jax.grad(_moment_loss))
    theta = (student.Q, student.K, student.V)
    L = student.num_layers
    ref = res.ref_params
    assert isinstance(ref, cfm_jax.Transformer)
    for k in range(K):
        s = stream(jnp.asarray(k))
        g = grad(theta, s.x0, s.y, mu.mean, mu.cov)
        theta = tuple(t - eta * (L * gi + lam * t) for t, gi in zip(theta, g))
        got = (ref.Q[k], ref.K[k], ref.V[k])
        for a, b in zip(got, theta):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    # and the n-point trajectories do see n points: at n = 4 they are not the population one
    assert float(res.deviations[-1, 0]) > 1e-6


def test_stream_labels_are_the_teachers_exact_population_output():
    cfg = dict(TINY, ns=[4, 8])
    mu = oc._population(cfg)
    teacher, _, stream = oc._models(cfg, jax.random.key(5), mu)
    s = stream(jnp.asarray(3))
    loss = _moment_loss((teacher.Q, teacher.K, teacher.V), s.x0, s.y, mu.mean, mu.cov)
    assert float(loss) < 1e-25
    assert s.context.shape == (8, 2)
    np.testing.assert_allclose(np.cov(np.asarray(stream(jnp.asarray(0)).context).T).shape, (2, 2))


def test_measure_windows_and_horizons_on_a_known_curve():
    """devs = c_s·k (k = 1…K): every window's maximum is its last step, sup over k ≤ h is c_s·h."""
    cfg = dict(TINY, eta=0.25, steps=36, curve_points=12)  # k_c = 4; windows of 4 steps over [4, 36]
    K = cfg["steps"]
    k = np.arange(1, K + 1, dtype=float)
    c = np.array([[1.0, 2.0], [3.0, 5.0]])  # (S, len(ns))
    devs = c[:, None, :] * k[None, :, None]
    out = oc._measure(cfg, devs, np.zeros((2, K, 3)), np.ones((2, K)), Cs=[0.4, 40.0])
    np.testing.assert_array_equal(out["window_k"], np.arange(8, 37, 4))  # each window's last step
    np.testing.assert_array_equal(np.asarray(out["window_max"]), c[:, None, :] * np.arange(8, 37, 4)[None, :, None])
    np.testing.assert_array_equal(out["sup_dev"], c * K)
    np.testing.assert_array_equal(out["sup_dev_kc"], c * 4)
    assert out["k_C"] == [10, 1]  # 1/(ηC) = 1/(0.25·0.4), and at least one step
    np.testing.assert_array_equal(out["sup_dev_kC"], c * np.array([[10], [1]]))
    fits = oc.growth_fit(out)
    np.testing.assert_allclose([f.slope for f in fits], 1.0, rtol=1e-9)  # a linear ramp: growth exponent 1


@pytest.fixture(scope="module")
def tiny_rows():
    """The zero row of the tiny configuration and the weak row (λ from the zero row's C)."""
    zero = oc.run_config(dict(TINY))
    weak = oc.run_config(dict(TINY, regime="weak"))
    return zero, weak


@pytest.mark.slow
def test_runner_with_traced_ridge_matches_plain_coupled_run(tiny_rows):
    _, weak = tiny_rows
    s = 1
    mu = oc._population(TINY)
    _, student, stream = oc._models(TINY, oc.seed_keys(TINY)[s], mu)
    res = ogd.coupled_run(
        student, stream, tuple(TINY["ns"]), ogd.ridge_sgd(TINY["eta"], weak["lam"][s]), TINY["steps"], population=mu
    )
    np.testing.assert_allclose(weak["sup_dev"][s], np.asarray(res.deviations).max(0), rtol=1e-9)
    kc = round(1 / TINY["eta"])
    np.testing.assert_allclose(weak["sup_dev_kc"][s], np.asarray(res.deviations)[:kc].max(0), rtol=1e-9)
    # the weak ridge is λ_c/8 with λ_c = 2C of that seed's λ = 0 region
    np.testing.assert_allclose(weak["lam"][s], 2 * weak["C_seeds"][s] / 8, rtol=1e-12)


@pytest.mark.slow
def test_n_slope_at_small_sizes_contains_minus_one_half(tiny_rows):
    zero, _ = tiny_rows
    fit = fit_loglog(np.asarray(TINY["ns"], float), np.asarray(zero["sup_dev_kc"]).T)
    print(f"λ = 0, d = 2, sup over k ≤ k_c: n-slope {fit.slope:+.3f} [{fit.ci_low:+.3f}, {fit.ci_high:+.3f}]")
    assert fit.contains(-0.5)
    assert all(c > 0 for c in zero["C_seeds"])
    json.dumps(zero, allow_nan=False)  # rows are JSON


# --- summarize / figures on synthetic rows with known exponents -----------------------------------


def _synthetic_rows(a_n=-0.5, a_d=0.5, beta_strong=0.0, beta_weak=0.0, beta_zero=1.0, S=8):
    cfg = {**oc.configs(True, 0)[0]}
    cfg.update(dims=[2, 4, 8], d0=4, ns=[4, 16, 64, 256], eta=0.1, steps=80)
    ns = np.asarray(cfg["ns"], float)
    rng = np.random.default_rng(0)
    k = np.arange(15, 80, 10, dtype=float)  # window centres after k_c = 10
    rows = []
    for d in cfg["dims"]:
        for regime, beta in (("zero", beta_zero), ("weak", beta_weak), ("strong", beta_strong)):
            if regime == "weak" and d != cfg["d0"]:
                continue
            noise = np.exp(0.005 * rng.standard_normal((S, len(ns))))
            sup = 0.3 * ns**a_n * d**a_d * noise  # (S, len(ns))
            C = 0.5 + 0.01 * rng.standard_normal(S)
            lam = {"zero": 0 * C, "weak": 2 * C / 8, "strong": 3 * C}[regime]
            wn = np.exp(0.005 * rng.standard_normal((S, len(k), len(ns))))
            windows = sup[:, None, :] * (k[None, :, None] / k[0]) ** beta * wn
            rows.append(
                {
                    "config": {**cfg, "dim": d, "regime": regime},
                    "sup_dev": sup.tolist(),
                    "sup_dev_kc": sup.tolist(),
                    "sup_dev_kC": sup.tolist(),
                    "k_C": [20] * S,
                    "window_k": k.tolist(),
                    "window_max": windows.tolist(),
                    "curve_k": list(range(1, 81)),
                    "curve": np.tile(sup.mean(0), (80, 1)).tolist(),
                    "lam": lam.tolist(),
                    "C_seeds": C.tolist(),
                    "region_C_seeds": (C / 2).tolist(),
                }
            )
    return rows


def _by_figure(lines):
    return {(ln["figure"], ln["claim"][:12]): ln for ln in lines}


def test_summarize_recovers_known_exponents_and_verdicts():
    lines = oc.summarize(_synthetic_rows())
    assert len(lines) == 5
    for ln in lines:
        assert set(ln) == {"claim", "command", "figure", "measured", "verdict"}
        assert ln["command"] == oc.COMMAND and ln["figure"] in oc.FIGURES
    n_line, d_line, strong, weak, zero = lines
    assert "n-slope -0.50 [" in n_line["measured"] and n_line["verdict"] == "holds"
    assert "n=4 +0.50 [" in d_line["measured"] and d_line["verdict"] == "holds"
    assert strong["verdict"] == "holds" and "1.5 λ_c" in strong["measured"]
    assert weak["verdict"] == "not observed at these sizes" and "0.125 λ_c" in weak["measured"]
    assert "+1.00 [" in zero["measured"] and zero["verdict"] == "not observed at these sizes"  # linear, not (1+ηC)^k


def test_summarize_verdicts_flip_with_the_data():
    lines = oc.summarize(_synthetic_rows(a_n=-0.2, a_d=1.0, beta_strong=0.5, beta_weak=1.0, beta_zero=0.0))
    n_line, d_line, strong, weak, zero = lines
    assert "-0.20 [" in n_line["measured"] and n_line["verdict"] == "not observed at these sizes"
    assert d_line["verdict"] == "refuted at these sizes"
    assert strong["verdict"] == "refuted at these sizes"
    assert weak["verdict"] == "holds"
    assert zero["verdict"] == "refuted at these sizes"  # λ = 0 bounded: no divergence at all
    lines = oc.summarize(_synthetic_rows(a_n=0.0))
    assert lines[0]["verdict"] == "refuted at these sizes"


def test_figures_write_the_named_pngs(tmp_path):
    rows = _synthetic_rows()
    paths = oc.figures(rows, tmp_path)
    assert [p.name for p in paths] == list(oc.FIGURES)
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000
    assert {ln["figure"] for ln in oc.summarize(rows)} <= {p.name for p in paths}


def test_configs_are_json_and_cover_every_regime():
    for quick in (True, False):
        cs = oc.configs(quick, 3)
        json.dumps(cs)
        assert {c["part"] for c in cs} == {"ogd"} and all(c["seed"] == 3 for c in cs)
        d0 = cs[0]["d0"]
        assert {(c["dim"], c["regime"]) for c in cs} == {
            *((d, r) for d in cs[0]["dims"] for r in ("zero", "strong")),
            (d0, "weak"),
        }
    assert max(oc.DEFAULTS["ns"]) / min(oc.DEFAULTS["ns"]) >= 100  # two decades of n
    assert oc.DEFAULTS["steps"] * oc.DEFAULTS["eta"] >= 8  # several times k_c = 1/η
    assert cfm_jax.GaussianMeasure  # the exact limit is what the module measures against
