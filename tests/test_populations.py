"""cfm_jax._populations: supports, moments, purity in the key, and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _compiles import lowered_programs
from _problems import residual_network

from cfm_jax._populations import (
    embedded_sphere,
    gaussian_mixture,
    isotropic_gaussian,
    make_population,
    subspace_gaussian,
    uniform_sphere,
)

KEY = jax.random.key(0)


def test_supports_and_intrinsic_dims():
    z = subspace_gaussian(6, 2)(KEY, 50)
    assert np.linalg.matrix_rank(np.asarray(z), tol=1e-5) == 2 and subspace_gaussian(6, 2).intrinsic_dim == 2
    s = embedded_sphere(5, 2, radius=2.0)(KEY, 40)
    np.testing.assert_allclose(np.linalg.norm(np.asarray(s), axis=1), 2.0, rtol=1e-5)
    assert np.linalg.matrix_rank(np.asarray(s), tol=1e-5) == 3
    np.testing.assert_allclose(np.linalg.norm(np.asarray(uniform_sphere(3)(KEY, 10)), axis=1), 1.0, rtol=1e-5)
    assert uniform_sphere(3).intrinsic_dim == 2 and isotropic_gaussian(4).intrinsic_dim == 4


def test_moments_within_monte_carlo_bands():
    """Sample mean and second moment of N(m, s² I_d) within 5 standard errors (n = 4000, so a
    wrong scale or mean by 10 % is far outside): SE(mean) = s/√n, SE(‖z − m‖²/d) = s²√(2/(n d))."""
    n, d, s = 4000, 3, 0.7
    mean = jnp.array([1.0, -2.0, 0.5])
    z = np.asarray(isotropic_gaussian(d, scale=s, mean=mean)(KEY, n), np.float64)
    assert np.all(np.abs(z.mean(0) - np.asarray(mean)) < 5 * s / np.sqrt(n))
    m2 = np.mean(np.sum((z - np.asarray(mean)) ** 2, 1)) / d
    assert abs(m2 - s**2) < 5 * s**2 * np.sqrt(2 / (n * d))
    # uniform on the sphere: E z = 0, E z zᵀ = I/d (SE of each entry ≤ 1/√n)
    u = np.asarray(uniform_sphere(d)(KEY, n), np.float64)
    np.testing.assert_allclose(u.T @ u / n, np.eye(d) / d, atol=5 / np.sqrt(n))


def test_mixture_weights():
    """Two far-apart components with weights (0.25, 0.75): the fraction on the first is 0.25 within
    5 binomial standard errors."""
    n = 2000
    m = gaussian_mixture(jnp.array([[5.0, 0.0], [-5.0, 0.0]]), scale=0.1, weights=jnp.array([0.25, 0.75]))(KEY, n)
    frac = float((m[:, 0] > 0).mean())
    assert abs(frac - 0.25) < 5 * np.sqrt(0.25 * 0.75 / n)


def test_pure_in_key_and_vmappable():
    z1, z2 = jax.jit(jax.vmap(lambda k: isotropic_gaussian(2)(k, 3)))(jax.random.split(KEY, 2))
    assert z1.shape == (3, 2) and not np.allclose(z1, z2)
    np.testing.assert_array_equal(isotropic_gaussian(2)(KEY, 3), isotropic_gaussian(2)(KEY, 3))


def test_make_population_and_bad_input():
    assert make_population("subspace_gaussian", 5, 2).intrinsic_dim == 2
    with pytest.raises(ValueError, match="intrinsic_dim"):
        subspace_gaussian(3, 4)
    with pytest.raises(ValueError, match="n"):
        isotropic_gaussian(2)(KEY, 0)
    with pytest.raises(ValueError):
        make_population("cauchy", 2)  # pyright: ignore[reportArgumentType]  # bad on purpose


# --- quasi-Monte Carlo samplers ---------------------------------------------------------------

LAWS = {
    "gaussian": lambda: isotropic_gaussian(3, scale=0.7, mean=jnp.array([1.0, -2.0, 0.5])),
    "mixture": lambda: gaussian_mixture(jnp.array([[2.0, 0.0], [-2.0, 0.0]]), weights=[0.25, 0.75]),
    "sphere": lambda: uniform_sphere(3),
    "subspace": lambda: subspace_gaussian(6, 2),
    "embedded_sphere": lambda: embedded_sphere(5, 2, radius=2.0),
}


@pytest.mark.parametrize("name", list(LAWS))
def test_qmc_samples_have_the_law(name):
    """QMC points have the law's support and its moments (compared with a large i.i.d. sample),
    are pure in the key, differ between keys, and vmap."""
    law = LAWS[name]()
    n = 1 << 12
    q = np.asarray(law(KEY, n, qmc=True), np.float64)
    ref = np.asarray(law(jax.random.key(9), 1 << 16), np.float64)
    assert q.shape == (n, law.dim) and np.isfinite(q).all()
    np.testing.assert_allclose(q.mean(0), ref.mean(0), atol=0.05)
    np.testing.assert_allclose(np.cov(q.T), np.cov(ref.T), atol=0.08)
    if name in ("sphere", "embedded_sphere"):
        r = 2.0 if name == "embedded_sphere" else 1.0
        np.testing.assert_allclose(np.linalg.norm(q, axis=1), r, rtol=1e-6)
    if name == "subspace":
        assert np.linalg.matrix_rank(q, tol=1e-5) == 2
    np.testing.assert_array_equal(q, np.asarray(law(KEY, n, qmc=True), np.float64))
    keys = jax.random.split(KEY, 2)
    both = jax.jit(jax.vmap(lambda k: law(k, 64, qmc=True)))(keys)
    np.testing.assert_allclose(both[1], law(keys[1], 64, qmc=True), atol=1e-12)
    assert not np.allclose(both[0], both[1])


def test_qmc_mixture_component_frequencies():
    """Component k is chosen by its inverse CDF on one QMC coordinate: frequencies within 1/n·few."""
    law = LAWS["mixture"]()
    n = 1 << 12
    q = np.asarray(law(KEY, n, qmc=True))
    frac = np.mean(q[:, 0] < 0)  # the component at −2 e_1, weight 0.75 (overlap of the tails ~1e-4)
    assert abs(frac - 0.75) < 0.005


def test_qmc_bad_option():
    with pytest.raises(ValueError, match="`qmc` must be True or False"):
        isotropic_gaussian(2)(KEY, 8, qmc="yes")  # pyright: ignore[reportArgumentType]  # bad on purpose


@pytest.mark.slow  # a rate fitted over many sample sizes
def test_qmc_reference_error_falls_faster_than_iid():
    """The n_ref-point reference of the infinite-context token, against the exact Gaussian limit:
    i.i.d. references err as n_ref^{-1/2}; QMC references at equal n_ref fall faster (fitted
    slopes with seed CIs, disjoint). One compiled system: prefixes of N points with weights 1/n
    (a scrambled Sobol prefix of 2^k points is itself a scrambled net)."""
    import cfm_jax
    from cfm_jax import GaussianMeasure, forward

    d, s = 3, 3**-0.5
    model = cfm_jax.Transformer.init(jax.random.key(1), d, heads=2, layers=2, dtype=jnp.float64)
    law = isotropic_gaussian(d, scale=s)
    x = 0.5 * jax.random.normal(jax.random.key(2), (4, d), jnp.float64)
    exact = forward(model, x, GaussianMeasure(jnp.zeros(d), s**2 * jnp.eye(d))).x1
    ns = [16, 64, 256, 1024]
    N = ns[-1]

    def errs(key, qmc):
        z = law(key, N, qmc=qmc).astype(jnp.float64)

        def at(n):
            w = jnp.where(jnp.arange(N) < n, 1.0 / n, 0.0)
            x1, _ = residual_network(model, x, cfm_jax.EmpiricalMeasure.unchecked(z, w))
            return jnp.mean(jnp.linalg.norm(x1 - exact, axis=-1))

        return jax.lax.map(at, jnp.asarray(ns, jnp.float64))

    keys = jax.random.split(jax.random.key(3), 24)
    from cfm_jax.stats import fit_loglog

    iid = fit_loglog(ns, np.asarray(jax.jit(jax.vmap(lambda k: errs(k, False)))(keys)).T)
    qmc = fit_loglog(ns, np.asarray(jax.jit(jax.vmap(lambda k: errs(k, True)))(keys)).T)
    assert iid.contains(-0.5), iid
    assert qmc.ci_high < iid.ci_low, (qmc, iid)
    assert qmc.slope < -0.65, qmc


@pytest.mark.parametrize("qmc", [False, True])
def test_a_draw_outside_jit_compiles_one_program(qmc):
    """A mixture's draw at a new n is one compiled program (its scramble, inverse CDFs and component
    choice inside), not one XLA program per operation."""
    mixture = gaussian_mixture(np.array([[0.0, 0.0], [2.0, 1.0]]), weights=np.array([0.3, 0.7]))
    key = jax.random.key(3)
    with lowered_programs() as names:
        z = mixture(key, 37, qmc=qmc)
    assert names == ["jit(_draw)"] and z.shape == (37, 2), names
