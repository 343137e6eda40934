"""claims.rho_models: per-model ρ against an independent eigenvalue computation, candidates inside the
declared β range, a ρ that is not finite in no bin, and the selection that fills the ρ bins (or
refuses what it cannot fill)."""

import numpy as np
import pytest

from cfm_experiments.claims import rho_models as M

RANGE = (0.5, 16.0)


def test_rho_of_reads_the_largest_layer():
    Q = np.zeros((1, 2, 1, 3, 3))
    K = np.zeros((1, 2, 1, 3, 3))
    Q[0, 0, 0] = np.eye(3)
    K[0, 0, 0] = 1.5 * np.eye(3)
    Q[0, 1, 0], K[0, 1, 0] = np.eye(3), 3.0 * np.eye(3)  # the largest layer counts
    np.testing.assert_allclose(M.rho_of({"Q": Q, "K": K}), [2 * 3.0 / 3])


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
    np.testing.assert_allclose(M.rho_of({"Q": Q, "K": K}, scale), _rho_by_eigenvalues(Q, K, scale), rtol=1e-10)


def test_candidates_lie_in_the_declared_beta_range_log_uniformly():
    """Every candidate's β lies in ``--rho-beta-range`` (its edges included, in float32), and about half
    of them below the range's geometric mean (log-uniform), for a narrow and a wide range."""
    for lo, hi in ((0.5, 16.0), (2.0, 2.5), (1e-3, 1e4)):
        beta, _ = M.candidates(M.model_key(3, 1), np.arange(512), np.asarray([lo, hi]), layers=1)
        beta = np.asarray(beta, np.float64)
        assert beta.min() >= np.float32(lo) and beta.max() <= np.float32(hi), (lo, hi, beta.min(), beta.max())
        below = np.mean(beta < np.sqrt(lo * hi))
        assert 0.4 < below < 0.6, (lo, hi, below)
        assert beta.min() < lo * (hi / lo) ** 0.05 and beta.max() > hi * (lo / hi) ** 0.05  # the whole range


def test_a_rho_that_is_not_finite_falls_in_no_bin():
    np.testing.assert_array_equal(M._bin_of([0.5, np.nan, np.inf, 7.0, 1.0]), [0, -1, -1, 4, 1])


def test_select_keeps_the_first_candidates_of_each_bin():
    """Every bin gets ``per_bin`` candidates whose ρ lies in it, and they are the first such in index
    order (the selection reads ρ alone: no candidate of the bin is skipped)."""
    per_bin = 3
    chosen = M.select(0, per_bin, RANGE, layers=1)
    top = max(max(c) for c in chosen) + 1
    _, params = M.candidates(M.model_key(0), np.arange(top), np.asarray(RANGE), layers=1)
    rho = M.rho_of(params)
    assert len(chosen) == len(M.RHO_BINS) - 1
    for b, idx in enumerate(chosen):
        lo, hi = M.RHO_BINS[b], M.RHO_BINS[b + 1]
        inside = [i for i in range(top) if lo <= rho[i] < hi]
        assert idx == inside[:per_bin], (b, idx, inside)
    other = M.select(1, per_bin, RANGE, layers=1)
    assert other != chosen  # another seed, another draw
    assert M.select(0, per_bin, RANGE, layers=1, draw=1) != chosen  # another draw of the same seed


def test_select_refuses_what_it_cannot_fill():
    with pytest.raises(ValueError, match="--rho-per-bin 2.*--rho-beta-range"):
        M.select(0, 2, (0.5, 2.0), layers=1)  # ρ <= β/2 at d = 4: no candidate reaches ρ >= 4
    with pytest.raises(ValueError, match="--rho-beta-range"):
        M.select(0, 2, (0.5, 4.0, 16.0), layers=1)
    with pytest.raises(ValueError, match="--rho-beta-range"):
        M.check_beta_range((8.0, 2.0))
