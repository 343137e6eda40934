"""The second paper's parametrisation and theorem quantities (docs/stochastic.md).

Independent paths: a Monte Carlo over random MLPs written out here (G(y) = m^{-1/2} W σ(U y/√d +
b_U) + b_W, not the library's sampler), the paper's ReLU closed forms (its Prop. 1.5), a
brute-force grid minimum of the naive formula for F, and the analytic cluster limit of the
attention energy ratio.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cfm_jax.stochastic import (
    PAPER_ACTIVATIONS,
    NoiseKernel,
)

SIGMA = 0.3


def _paper_mlp_moments(key, act, d, sigma_u, sigma_w, m=4, R=20_000):
    """Per-realisation samples of |G(x)|²/d, <G(x), G(y)>/d and |D_v G(x)|²/d (v ⊥ x unit).

    E|D_v G(x)|²/d = ∂_s∂_t κ(x + s v, x + t v) at 0 = κ'(1): on the sphere only the
    cross term of <x + s v, x + t v> = 1 + s t survives the mixed derivative.
    """
    sig = {"relu": jax.nn.relu, "silu": jax.nn.silu, "sigmoid": jax.nn.sigmoid, "tanh": jnp.tanh}[act]
    x = jnp.zeros(d).at[0].set(1.0)
    v = jnp.zeros(d).at[1].set(1.0)
    rho = 0.3
    y = rho * x + math.sqrt(1 - rho**2) * jnp.zeros(d).at[2].set(1.0)

    def one(k):
        kw, ku, kb, kc = jax.random.split(k, 4)
        W = jax.random.normal(kw, (d, m))
        U = jax.random.normal(ku, (m, d))
        bu = sigma_u * jax.random.normal(kb, (m,))
        bw = sigma_w * jax.random.normal(kc, (d,))
        G = lambda z: W @ sig(U @ z / math.sqrt(d) + bu) / math.sqrt(m) + bw  # noqa: E731
        g, dg = jax.jvp(G, (x,), (v,))
        return jnp.stack([g @ g / d, g @ G(y) / d, dg @ dg / d])

    return np.asarray(jax.vmap(one)(jax.random.split(key, R))), rho


@pytest.mark.parametrize("act", PAPER_ACTIVATIONS)
def test_paper_kernel_matches_an_independent_mlp_monte_carlo(act):
    """κ(1), κ(ρ) and κ'(1) of ``NoiseKernel.paper`` (output bias included) against the Monte
    Carlo mean over R = 20000 random MLPs. Band: ±4.5 standard errors of that mean (two-sided,
    a false alarm probability below 1e-5 per quantity); σ_W² = 0.09 is 20–200 SE, so a kernel
    without the output bias fails."""
    d = 5
    k = NoiseKernel.paper(act, d, sigma_u=SIGMA, sigma_w=SIGMA)
    samples, rho = _paper_mlp_moments(jax.random.key(PAPER_ACTIVATIONS.index(act)), act, d, SIGMA, SIGMA)
    mean, se = samples.mean(0), samples.std(0) / math.sqrt(samples.shape[0])
    expected = np.array([k.kappa1, float(k(jnp.asarray(rho))), k.dkappa1])
    z = (mean - expected) / se
    assert np.all(np.abs(z) < 4.5), (act, mean, expected, z)
    assert float(k(jnp.asarray(1.0))) == pytest.approx(k.kappa1, rel=1e-9)


@pytest.mark.parametrize("d", [4, 5, 64])
@pytest.mark.parametrize("su,sw", [(0.0, 0.0), (0.1, 0.1), (0.5, 0.2)])
def test_relu_closed_forms_of_the_paper(d, su, sw):
    """Prop. 1.5: λ₁ = −1/(2d) − (σ_U² + 2σ_W²)(d−1)/4 and λ̄ = 1/d − (σ_U² + 2σ_W²)(d−3)/2."""
    k = NoiseKernel.paper("relu", d, su, sw)
    s2 = su**2 + 2 * sw**2
    assert k.lyapunov(d) == pytest.approx(-1 / (2 * d) - s2 * (d - 1) / 4, rel=1e-12, abs=1e-15)
    assert k.dissipation(d) == pytest.approx(1 / d - s2 * (d - 3) / 2, rel=1e-12, abs=1e-15)
    # the relation between the two exponents (docs/stochastic.md)
    assert k.lyapunov(d) == pytest.approx(k.dissipation(d) / 2 - k.kappa1 - k.dkappa1, rel=1e-12, abs=1e-15)


def _naive_F(k, u, d, beta):
    kap = np.asarray(k(jnp.asarray(u)), np.float64)
    k1 = k.kappa1
    G = kap * (d - 2 + u**2 - beta * u * (1 - u**2)) + k1 * (beta * (1 - u**2) - (d - 1) * u)
    return beta * np.exp(beta * u) * G / (np.exp(beta) - np.exp(beta * u))


CASES = [
    ("relu", 5, 0.0, 1.0),
    ("relu", 64, 0.1, 1.0),
    ("sigmoid", 64, 0.1, 1.0),
    ("tanh", 64, 0.1, 2.0),
    ("silu", 128, 0.1, 1.0),
    ("sigmoid", 5, 0.0, 0.5),
]


@pytest.mark.parametrize("act,d,s,beta", CASES)
def test_energy_rate_is_the_grid_minimum_of_F(act, d, s, beta):
    """λ̄' = −inf F against a brute-force minimum of the naive formula on 400001 points of
    [−1, 1 − 1e-7] (the naive form is accurate there to ~1e-9 relative) and the paper's value
    F(1) = −λ̄ = (d−3)κ(1) − (d−1)κ'(1); the grid minimum can only lie above the true infimum,
    by at most the grid's second-order error (≪ 1e-4)."""
    k = NoiseKernel.paper(act, d, s, s)
    u = np.linspace(-1.0, 1.0 - 1e-7, 400_001)
    brute = min(_naive_F(k, u, d, beta).min(), (d - 3) * k.kappa1 - (d - 1) * k.dkappa1)
    lam = k.energy_rate(d, beta)
    assert -lam == pytest.approx(brute, rel=1e-4)
    assert -lam <= brute + 1e-12 * abs(brute)


@pytest.mark.parametrize("act,d,s,beta", CASES)
def test_F_tends_to_minus_dissipation_at_one(act, d, s, beta):
    """F(1 − r) → −λ̄ as r → 0, at the order of the kernel's expansion (O(r); O(√r) for ReLU,
    whose κ has an r^{3/2} term), and the robust form agrees with the naive one at r = 1e-3."""
    k = NoiseKernel.paper(act, d, s, s)
    lam_bar = k.dissipation(d)
    r = np.array([1e-4, 1e-6, 1e-8, 1e-10, 1e-12])
    F = np.asarray(k.energy_rate_function(jnp.asarray(1.0 - r), d, beta))
    err = np.abs(F + lam_bar)
    order = np.sqrt(r) if act == "relu" else r
    assert np.all(err <= 1e-9 * abs(lam_bar) + 10 * order * (abs(lam_bar) + k.kappa1 * d * (1 + beta))), err
    assert err[-1] <= 1e-5 * abs(lam_bar)
    assert float(k.energy_rate_function(jnp.asarray(1.0), d, beta)) == pytest.approx(-lam_bar, rel=1e-12)
    uu = np.array([1 - 1e-3, 0.5, -0.9])
    np.testing.assert_allclose(
        np.asarray(k.energy_rate_function(jnp.asarray(uu), d, beta)), _naive_F(k, uu, d, beta), rtol=1e-8
    )


def test_assumption_one_gives_a_negative_energy_rate():
    """Under Assumption 1 (λ̄ < 0) F > 0 on [−1, 1], so λ̄' < 0; ReLU without bias at d = 5
    violates it (λ̄ = 1/d) and its λ̄' is then F's limit value at u = 1, +λ̄."""
    k = NoiseKernel.paper("sigmoid", 64, 0.1, 0.1)
    assert k.dissipation(64) < 0 and k.energy_rate(64, 1.0) < 0
    u = jnp.linspace(-1, 1, 2001)
    assert float(jnp.min(k.energy_rate_function(u, 64, 1.0))) > 0
    k0 = NoiseKernel.paper("relu", 5)
    assert k0.energy_rate(5, 1.0) == pytest.approx(k0.dissipation(5), rel=1e-9)


def test_paper_kernel_bad_inputs():
    with pytest.raises(ValueError, match="dim"):
        NoiseKernel.paper("relu", 1)
    with pytest.raises(ValueError, match="sigma_u"):
        NoiseKernel.paper("relu", 5, sigma_u=-0.1)
    with pytest.raises(ValueError, match="activation"):
        NoiseKernel.paper("gelu!", 5)  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="beta"):
        NoiseKernel.paper("relu", 5).energy_rate(5, -1.0)
