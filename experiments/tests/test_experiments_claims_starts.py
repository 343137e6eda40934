"""claims.starts: the law starts lie in the law set and spend the budget; the parameter constructions
have the norms they state (at the edge of Θ), and the starts' names and shapes follow the pairs."""

import numpy as np
import pytest

from cfm_experiments.claims import ascent as A, starts as S


def _op(a):
    return np.linalg.norm(np.asarray(a), ord=2, axis=(-2, -1))


def _concat(V):
    L, H, d, _ = V.shape[-4:]
    return _op(np.moveaxis(np.asarray(V), -3, -2).reshape(*V.shape[:-4], L, d, H * d))


def _second_moment(law, energy, mask):
    d = int(mask.sum())
    cov = np.asarray(A.covariance(law, energy, mask))[:d, :d]
    m = np.asarray(law["m"])[:d]
    return cov + np.outer(m, m)


@pytest.mark.parametrize("name", S.LAWS)
def test_law_starts_are_in_the_set_and_spend_the_budget(name):
    """Each start law has E‖z‖² = B (isotropic: Σ = B I/d exactly) unless the direction bound clips it,
    and its points are m + εLᵀ with L Σ's Cholesky factor, zero beyond d."""
    d = 3
    mask = np.array([1.0, 1.0, 1.0, 0.0, 0.0])
    for energy in (1.0, float(d)):
        law = A.Problem(d, 1, 5, 1, energy).law(S.law_start(d, name, energy))
        second = _second_moment(law, energy, mask)
        assert np.linalg.eigvalsh(second).max() <= 1 + 1e-9 and np.trace(second) <= energy * (1 + 1e-9)
        if name == "isotropic" or energy == 1.0:
            np.testing.assert_allclose(np.trace(second), energy, rtol=1e-9)
        if name == "isotropic":
            np.testing.assert_allclose(second, energy / d * np.eye(d), atol=1e-12)
    eps = np.random.default_rng(2).standard_normal((2, 6, 5))
    z = np.asarray(A.contexts_of(law, eps, energy, mask))
    chol = np.linalg.cholesky(np.asarray(A.covariance(law, energy, mask)))
    np.testing.assert_allclose(z, (np.asarray(law["m"]) + eps @ chol.T) * mask, atol=1e-12)
    assert np.all(z[..., 3:] == 0)


@pytest.mark.parametrize("v_sum", [False, True])
def test_constructions_sit_at_the_norms_they_state(v_sum):
    """‖Q_lh‖ = ‖K_lh‖ = √qk (Q = K = 0 for the trivial model) and the values at norm v, concatenated
    or summed over heads; a projection onto Θ leaves them unchanged; identical heads are copies."""
    rng = np.random.default_rng(4)
    d, H, L, qk, v = 3, 2, 2, 2.0, 0.7
    ones = (np.ones(d), np.ones(H))
    for name in (*S.CONSTRUCTIONS, "random"):
        theta = S.construction(rng, name, d, H, L, qk, v, v_sum)
        expected = 0.0 if name == "trivial" else np.sqrt(qk)
        np.testing.assert_allclose(_op(theta["Q"]), expected, atol=1e-12)
        np.testing.assert_allclose(_op(theta["K"]), expected, atol=1e-12)
        vn = _op(theta["V"]).sum(axis=1) if v_sum else _concat(theta["V"])
        np.testing.assert_allclose(vn, v, rtol=1e-12)
        projected = A.project(theta, qk, v, v_sum, *ones)
        for k in theta:
            np.testing.assert_allclose(projected[k], theta[k], atol=1e-9)
        if name == "identical heads":
            np.testing.assert_array_equal(theta["Q"][:, 0], theta["Q"][:, 1])
            np.testing.assert_array_equal(theta["V"][:, 0], theta["V"][:, 1])
    with pytest.raises(ValueError, match="`name`"):
        S.construction(rng, "nope", d, H, L, qk, v, v_sum)


def test_starts_follow_the_pairs_then_the_random_restarts():
    rng = np.random.default_rng(5)
    pairs = S.STRUCTURED[:2]
    theta, law, names = S.starts(rng, 3, 2, 1, 1.0, pairs, 3, False)
    assert names == [f"{p} · {w}" for p, w in pairs] + [
        "random 1 · isotropic",
        "random 2 · low-dimensional",
        "random 3 · isotropic",
    ]
    assert theta["Q"].shape == (5, 1, 2, 3, 3) and law["m"].shape == (5, 3) and law["F"].shape == (5, 3, 3)
