"""cfm_jax._qmc: scrambled Sobol points are uniform, stratified, pure in the key, and converge
faster than Monte Carlo on a smooth integrand."""

import jax
import numpy as np
import pytest
from _compiles import lowered_programs

from cfm_jax._qmc import sobol, sobol_normal
from cfm_jax.stats import fit_loglog


def test_each_coordinate_is_stratified():
    """The first 2^k points of a (scrambled) Sobol net put exactly one point in every dyadic
    interval of width 2^{-k} in each coordinate, and 4 in each square of side 2^{-k/2} of
    the first two coordinates (the (t, m, s)-net property with t = 0 there)."""
    u = np.asarray(sobol(jax.random.key(0), 1024, 4))
    assert u.min() > 0 and u.max() < 1
    for j in range(4):
        assert len(np.unique(np.floor(u[:, j] * 1024))) == 1024
    cells = np.floor(u[:, 0] * 16) * 16 + np.floor(u[:, 1] * 16)
    np.testing.assert_array_equal(np.bincount(cells.astype(int), minlength=256), 4)


def test_pure_in_key_and_randomised():
    a = sobol(jax.random.key(1), 64, 3)
    np.testing.assert_array_equal(a, sobol(jax.random.key(1), 64, 3))
    b = sobol(jax.random.key(2), 64, 3)
    assert np.abs(np.asarray(a) - np.asarray(b)).max() > 0.1
    out = jax.jit(jax.vmap(lambda k: sobol(k, 64, 3)))(jax.random.split(jax.random.key(1), 2))
    assert out.shape == (2, 64, 3)


def test_unbiased_and_faster_than_monte_carlo():
    """∫ exp(Σu) over [0,1]^3 = (e − 1)^3: the randomised QMC estimate is unbiased (the mean
    over keys within its standard error) and its error falls faster than n^{-1/2} (fitted
    slope of the RMS error over keys below −1)."""
    exact = (np.e - 1) ** 3
    ns = [64, 256, 1024, 4096]
    keys = jax.random.split(jax.random.key(3), 16)
    est = np.stack([np.asarray(jax.vmap(lambda k, n=n: jax.numpy.exp(sobol(k, n, 3).sum(1)).mean())(keys)) for n in ns])
    err = np.abs(est - exact)
    assert abs(est[0].mean() - exact) < 4 * est[0].std() / np.sqrt(len(keys))
    assert fit_loglog(ns, err).ci_high < -1.0


def test_normal_points_and_float32():
    z = np.asarray(sobol_normal(jax.random.key(4), 4096, 2, "float32"))
    assert z.dtype == np.float32 and np.isfinite(z).all()
    np.testing.assert_allclose(z.mean(0), 0.0, atol=0.01)
    np.testing.assert_allclose(z.std(0), 1.0, atol=0.01)


@pytest.mark.parametrize("n, d, match", [(0, 2, "`n` must be"), (4, 0, "`d` must be"), (2.5, 2, "`n` must be")])
def test_bad_input(n, d, match):
    with pytest.raises(ValueError, match=match):
        sobol(jax.random.key(0), n, d)


def test_each_point_is_uniform_on_the_cube():
    """The randomisation makes every point, on its own, uniform on [0, 1)^d with independent
    coordinates (what makes the estimate unbiased for every integrand, not only for separable ones).
    Over 2048 keys, for each point of a 4-point net in d = 3 and each pair of coordinates,
    E[u_j u_k] = 1/4 within 5 standard errors (SE ≈ 0.005). One digital shift shared by all
    dimensions correlates the coordinates' leading digits (the first point lies on the diagonal:
    E[u_j u_k] = 1/3, ~17 SE away)."""
    u = np.asarray(jax.vmap(lambda k: sobol(k, 4, 3))(jax.random.split(jax.random.key(7), 2048)), np.float64)
    for j, k in ((0, 1), (0, 2), (1, 2)):
        prod = u[:, :, j] * u[:, :, k]  # (keys, points)
        se = prod.std(0) / np.sqrt(prod.shape[0])
        assert np.all(np.abs(prod.mean(0) - 0.25) < 5 * se), (j, k, prod.mean(0), se)
    np.testing.assert_allclose(u.mean(0), 0.5, atol=5 * np.sqrt(1 / 12 / 2048))


def test_points_outside_jit_are_two_programs_per_shape():
    """``sobol_normal`` at a new (n, d): the scramble and the inverse CDF, each compiled once; again at
    that shape, nothing."""
    key = jax.random.key(4)
    with lowered_programs() as names:
        first = sobol_normal(key, 19, 3)
    assert names == ["jit(_scrambled)", "jit(ndtri)"], names
    with lowered_programs() as names:
        again = sobol_normal(jax.random.key(5), 19, 3)
    assert names == [] and not np.array_equal(first, again)
