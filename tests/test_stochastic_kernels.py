"""Stochastic transformer (docs/theory.md): kernels, sphere invariance, exact sampler, SDE integrators."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _compiles import lowered_programs

from cfm_jax.stochastic import (
    NoiseKernel,
    SphereAttention,
    SphereSDE,
    StochasticTransformer,
    kappa_monte_carlo,
    random_tokens,
    simulate,
)

RHO = jnp.linspace(-0.95, 1.0, 9)


# ----------------------------------------------------------------------------- kernels
@pytest.mark.parametrize("act,s_c", [("relu", 0.0), ("relu", 0.7), ("linear", 0.0), ("linear", 0.4)])
def test_closed_form_vs_quadrature(act, s_c):
    k = NoiseKernel(act, 1.3, 0.9, s_c)
    kq = NoiseKernel(act, 1.3, 0.9, s_c, method="quadrature", order=160)
    # Gauss–Hermite converges slowly across the ReLU kink (~1e-3 at this order); exact for linear.
    tol = 3e-3 if act == "relu" else 1e-12
    np.testing.assert_allclose(k(RHO), kq(RHO), atol=tol * k.kappa1)
    if act == "linear":  # σ' is a step for ReLU: quadrature of σ'σ' is too rough (FD test below)
        np.testing.assert_allclose(k.derivative(RHO), kq.derivative(RHO), atol=1e-12)
    # κ(1), κ'(1) closed forms vs 1-D quadrature (through the generic path of a "table" kernel).
    kt = NoiseKernel(act, 1.3, 0.9, s_c, method="table", grid=9)
    assert not kt.closed_form
    np.testing.assert_allclose([kt.kappa1, kt.dkappa1], [k.kappa1, k.dkappa1], rtol=1e-6)
    assert float(k(jnp.asarray(1.0))) == pytest.approx(k.kappa1, rel=1e-12)


@pytest.mark.parametrize("act", ["relu", "tanh", "linear"])
def test_kernel_vs_monte_carlo(act):
    k = NoiseKernel(act, 1.0, 1.0, 0.5)
    rho = RHO[:-1]
    mean, se = kappa_monte_carlo(jax.random.key(0), k, rho, samples=200_000)
    z = np.abs((np.asarray(mean) - np.asarray(k(rho))) / np.asarray(se))
    assert z.max() < 5.0, z


def test_table_kernel_matches_quadrature_and_derivative():
    k = NoiseKernel("tanh", 1.1, 1.0, 0.2)
    kq = NoiseKernel("tanh", 1.1, 1.0, 0.2, method="quadrature")
    r = jnp.linspace(-1, 1, 301)
    np.testing.assert_allclose(k(r), kq(r), atol=1e-8)
    np.testing.assert_allclose(k.derivative(r), kq.derivative(r), atol=1e-5)
    # κ' against central finite differences of κ (independent of Price's theorem).
    h = 1e-5
    r = jnp.linspace(-0.9, 0.9, 7)
    np.testing.assert_allclose(k.derivative(r), (k(r + h) - k(r - h)) / (2 * h), rtol=1e-6)
    kr = NoiseKernel("relu", 1.0, 1.0, 0.3)
    np.testing.assert_allclose(kr.derivative(r), (kr(r + h) - kr(r - h)) / (2 * h), rtol=1e-6)


def test_lyapunov_closed_form_special_cases():
    # ReLU without bias: κ(1) = κ'(1) = s_a² s_b²/2, so λ₁ = −s_a² s_b²/2 in every dimension.
    for d in (2, 3, 5, 10):
        assert NoiseKernel("relu", 2.0, 0.5).lyapunov(d) == pytest.approx(-0.5)
    # Linear without bias: κ(ρ) = s²ρ, λ₁ = −s².
    assert NoiseKernel("linear", 1.5, 1.0).lyapunov(7) == pytest.approx(-2.25)
    # p → 0 limit of the moment rate is 2λ₁.
    k = NoiseKernel("tanh")
    assert k.moment_rate(5, 1e-7) / 1e-7 == pytest.approx(2 * k.lyapunov(5), rel=1e-5)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="activation"):
        NoiseKernel("swish!")  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="s_a"):
        NoiseKernel("relu", -1.0)
    with pytest.raises(ValueError, match="attention"):
        SphereAttention("softmax")  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="layers"):
        StochasticTransformer(layers=0)
    with pytest.raises(ValueError, match="noise"):
        SphereSDE(noise="gaussian")  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(eqx.EquinoxRuntimeError, match="x0"):  # a value check, inside the compiled program
        simulate(StochasticTransformer(layers=2), jnp.ones((3, 2)), jax.random.key(0))
    with pytest.raises(ValueError, match="save_every"):
        simulate(
            StochasticTransformer(layers=5), random_tokens(jax.random.key(0), 2, 3), jax.random.key(0), save_every=2
        )
    for bad in (0, -5, 2.5, True):  # zero would divide by zero
        with pytest.raises(ValueError, match="`save_every` must be a positive integer"):
            simulate(
                StochasticTransformer(layers=4),
                random_tokens(jax.random.key(0), 2, 3),
                jax.random.key(0),
                save_every=bad,  # pyright: ignore[reportArgumentType]  # bad on purpose
            )


def test_kernel_deficit_is_accurate_near_the_diagonal():
    for k in (
        NoiseKernel("relu", 1.2, 0.9, 0.5),
        NoiseKernel("linear", 1.0, 1.0, 0.3),
        NoiseKernel("tanh", 1.0, 1.0, 0.2),
    ):
        r = jnp.array([0.002, 0.1, 0.7, 1.5])
        np.testing.assert_allclose(k.deficit(r), k.kappa1 - k(1.0 - r), rtol=1e-6)
        tiny = jnp.array([1e-20, 1e-14])  # κ(1) − κ(1 − r) ≈ κ'(1) r (ReLU: − (s²v/2π)(2√2/3) q^{3/2})
        np.testing.assert_allclose(k.deficit(tiny), k.dkappa1 * tiny, rtol=1e-6)


@pytest.mark.parametrize("activation", ["tanh", "silu"])
def test_deficit_taylor_branch_where_its_second_order_term_matters(activation):
    """Just below the switch r = 1e-3 the series κ'(1)r − ½κ''(1)r² is used; its second-order term
    is 1e-4…3e-4 of the value there, its truncation error ~1e-6. Against κ(1) − κ(1 − r) by direct
    Gauss–Hermite quadrature (an independent path, order 128; float64 cancellation ~1e-13 here) it
    must agree to 1e-5, and the two branches must join at the switch. (Pre-activation variance ≈ 1:
    the order-64 moments are accurate to ~3e-7 there.)"""
    k = NoiseKernel(activation, 1.0, 1.0, 0.2)
    q = NoiseKernel(activation, 1.0, 1.0, 0.2, method="quadrature", order=128)
    r = jnp.array([4e-4, 7e-4, 9.9e-4])
    direct = q(jnp.asarray(1.0)) - q(1.0 - r)
    assert float(jnp.min(0.5 * k.kappa2 * r[1:] ** 2 / direct[1:])) > 1e-4  # the term is resolved
    np.testing.assert_allclose(k.deficit(r), direct, rtol=1e-5)
    below, at = k.deficit(jnp.array(1e-3 - 1e-12)), k.deficit(jnp.array(1e-3))
    np.testing.assert_allclose(below, at, rtol=1e-5)


def test_quadrature_order_accuracy_as_documented():
    """κ'(1) = s_b² E tanh'(u)² against scipy's adaptive quadrature (independent): the documented
    accuracy of the default order 64 (3e-7 at v ≈ 1, ~2e-4 at v = 2.29) and that raising the order
    cures it (256: < 1e-8)."""
    from scipy import integrate

    def reference(s_b, s_c):
        v = s_b**2 + s_c**2
        f = lambda z: (1 / np.cosh(np.sqrt(v) * z)) ** 4 * np.exp(-z * z / 2) / np.sqrt(2 * np.pi)  # noqa: E731
        return s_b**2 * integrate.quad(f, -40, 40, epsabs=0, epsrel=1e-13, limit=500)[0]

    err = lambda s_b, order: abs(NoiseKernel("tanh", 1.0, s_b, 0.2, order=order).dkappa1 / reference(s_b, 0.2) - 1)  # noqa: E731
    assert err(1.0, 64) < 1e-6
    assert 5e-5 < err(1.5, 64) < 5e-4
    assert err(1.5, 256) < 1e-8


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_energy_rate_function_small_beta_and_r_branches(activation):
    """F(u) has two guarded limits: βr → 0 (ratio βr/(1 − e^{−βr}) → 1) and r → 0 (D(r)/r → κ'(1)).
    β = 0 exactly (the first guard everywhere) must continue β = 1e-9 (the unguarded formula) to
    ~1e-8 at every u, and r = 0 exactly (u = 1) must continue r = 1e-13 to ~1e-6 (the O(r) and,
    for ReLU, O(√r) terms)."""
    k = NoiseKernel.paper(activation, 5, 0.3, 0.2)
    u = jnp.array([-0.9, 0.0, 0.5, 1 - 1e-4])
    f0 = k.energy_rate_function(u, 5, 0.0)
    f_small = k.energy_rate_function(u, 5, 1e-9)
    np.testing.assert_allclose(f0, f_small, rtol=1e-8)
    at_one = k.energy_rate_function(jnp.array(1.0), 5, 1.0)
    near_one = k.energy_rate_function(jnp.array(1.0 - 1e-13), 5, 1.0)
    np.testing.assert_allclose(at_one, near_one, rtol=1e-5)
    assert float(at_one) == pytest.approx(-k.dissipation(5), rel=1e-12)


def test_evaluations_outside_jit_compile_one_program_per_shape():
    """κ, κ', the deficit and the energy-rate function, called eagerly, are one compiled program
    each per shape (a Python float made an array, not a static value), not a program per operation."""
    kernel = NoiseKernel("tanh", grid=33, order=8)
    rho, r = jnp.linspace(-1.0, 1.0, 13), jnp.linspace(0.0, 2.0, 13)
    with lowered_programs() as names:
        _ = kernel(rho), kernel.derivative(rho), kernel.deficit(r), kernel.energy_rate_function(rho, 4, 1.0)
    assert names == ["jit(__call__)", "jit(derivative)", "jit(deficit)", "jit(_energy_rate_values)"], names
    with lowered_programs() as names:
        _ = kernel(0.3), kernel(0.7)
    assert names.count("jit(__call__)") == 1, names
    with lowered_programs() as names:  # d and β are values of the program, not compiled in
        _ = kernel.energy_rate_function(rho, 5, 2.5), kernel.energy_rate_function(rho, 3, 0.0)
    assert names == [], names
