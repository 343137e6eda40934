"""claims.rho: the candidate law, per-model ρ, the size buckets, and the regression verdict on synthetic
slopes that follow the law, or do not."""

import numpy as np
import pytest

from cfm_experiments.claims import rho as R

HAVE = {"largest n": 10240, "models": 30, "contexts": 4}


def test_predicted_slope_and_rho_of():
    np.testing.assert_allclose(R.predicted_slope([0.5, 2.0, 4.0]), [-0.5, -0.5, -0.125])
    Q = np.zeros((1, 2, 1, 3, 3))
    K = np.zeros((1, 2, 1, 3, 3))
    Q[0, 0, 0] = np.eye(3)
    K[0, 0, 0] = 1.5 * np.eye(3)
    Q[0, 1, 0], K[0, 1, 0] = np.eye(3), 3.0 * np.eye(3)  # the largest layer counts
    np.testing.assert_allclose(R.rho_of({"Q": Q, "K": K}), [2 * 3.0 / 3])


def _rho_by_eigenvalues(Q, K, scale):
    """2 max_{l,h} λ_max(AᵀA)^½ σ²/d (A = Q_hᵀK_h) by NumPy's symmetric eigensolver, per model."""
    A = np.einsum("blhed,blhef->blhdf", Q, K)
    lam = np.linalg.eigvalsh(np.swapaxes(A, -1, -2) @ A)[..., -1]
    return 2 * np.sqrt(lam).max(axis=(1, 2)) * scale**2 / Q.shape[-1]


@pytest.mark.parametrize("scale", [1.0, 1.7])
def test_rho_of_is_the_regime_at_the_context_law(scale):
    """ρ of cfm_jax.attention_regime at N(0, σ²I/d) equals 2‖QᵀK‖σ²/d computed independently, for
    random non-symmetric Q, K of several layers and heads (the largest over them, per model)."""
    rng = np.random.default_rng(5)
    Q, K = rng.standard_normal((2, 3, 2, 1, 3, 3))
    np.testing.assert_allclose(R.rho_of({"Q": Q, "K": K}, scale), _rho_by_eigenvalues(Q, K, scale), rtol=1e-10)


def test_the_part_reports_the_rho_of_its_models():
    """A row's ρ is that of the models it drew, at its context law (σ = SCALE, d = DIM)."""
    config = {"beta": 4.0, "seed": 2, "rho_ns": [8, 32], "rho_models": 2, "rho_contexts": 2, "layers": 2}
    row = R.Rho().run(config)
    params, _, _ = R.inputs(config)
    expected = _rho_by_eigenvalues(np.asarray(params["Q"], np.float64), np.asarray(params["K"], np.float64), R.SCALE)
    np.testing.assert_allclose(row["rho"], expected, rtol=1e-10)
    assert params["Q"].shape[-1] == R.DIM and np.ptp(expected) > 0  # distinct models, each its own ρ


def test_buckets_keep_large_sizes_alone():
    assert R.buckets([10, 40, 160, 640, 2560, 10240]) == [[10, 40], [160, 640], [2560], [10240]]


def _models(rhos, slope_of, rng, ns=(640, 2560, 10240)):
    """Per model: a mean deviation ∝ n^{slope} ending with the given slope, 4 contexts of small noise."""
    out = []
    for rho in rhos:
        s = slope_of(rho)
        values = np.asarray(ns, float) ** s * np.exp(0.02 * rng.standard_normal((4, len(ns))))
        out.append({"config": {"beta": 1.0}, "ns": list(ns), "rho": [rho], "values": [values.tolist()]})
    return R.per_model(out)


def test_the_regression_verdict_on_synthetic_slopes():
    rng = np.random.default_rng(0)
    rhos = np.linspace(0.3, 6.0, 30)
    law = _models(rhos, lambda r: float(R.predicted_slope(r)), rng)
    assert R.rho_line(law, HAVE).verdict == "holds"
    flat = _models(rhos, lambda r: -0.5, rng)  # no transition at all
    assert R.rho_line(flat, HAVE).verdict == "refuted at these sizes"
    assert R.rho_line(law, HAVE | {"largest n": 2560}).verdict == "inconclusive at these sizes"


@pytest.mark.parametrize("bins", [R.RHO_BINS])
def test_binned_slopes_cover_the_bins(bins):
    rng = np.random.default_rng(1)
    law = _models(np.linspace(0.3, 6.0, 30), lambda r: float(R.predicted_slope(r)), rng)
    out = R.binned(law)
    assert len(out) == len(bins) - 1 and all(v.contains(p) or abs(v.value - p) < 0.05 for _, v, p in out)


def test_a_second_beta_compiles_nothing():
    """Rows of another β (and another base seed) reuse the draw, reference and deviation programs."""
    from cfm_experiments.compiles import recording

    part = R.Rho()
    config = {"beta": 1.0, "seed": 0, "rho_ns": [8, 32], "rho_models": 2, "rho_contexts": 2, "layers": 1}
    first = part.run(config)
    with recording() as stats:
        second = part.run({**config, "beta": 8.0, "seed": 3})
    assert stats.programs + stats.cache_loads == 0, stats.names  # compiled or loaded from the disk cache
    assert np.asarray(second["values"]).shape == np.asarray(first["values"]).shape == (2, 2, 2)
    assert min(second["rho"]) > max(first["rho"])  # ρ grows with β
