"""The sphere SDE: the Itô correction of the normalised step, diffrax vs scan on one Brownian path, strong
convergence."""

import math
from typing import cast

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cfm_jax.stochastic import (
    NoiseKernel,
    SphereAttention,
    SphereSDE,
    brownian_increments,
    brownian_path,
    integrate_increments,
    random_tokens,
    solve_diffrax,
)


def test_normalisation_realises_ito_correction():
    """E<𝒩(x + ΔW), x> = 1 − ½(d − 1)κ(1)Δt + O(Δt²): the Itô correction of docs/theory.md."""
    k = NoiseKernel("linear", 1.0, 1.0)
    d, dt, R = 4, 0.005, 200_000
    x = random_tokens(jax.random.key(5), 1, d)
    model = SphereSDE(k, steps=1, horizon=dt)
    x1 = jax.vmap(lambda kk: model.step(x, kk))(jax.random.split(jax.random.key(6), R))
    c = jnp.sum(x1[:, 0] * x[0], -1)
    drift = (float(c.mean()) - 1) / dt
    se = float(c.std()) / math.sqrt(R) / dt
    assert abs(drift + 0.5 * (d - 1) * k.kappa1) < 4 * se + 0.05, (drift, se)


def test_diffrax_and_scan_agree_on_a_shared_brownian_path():
    N, d = 5, 3
    sde = SphereSDE(NoiseKernel("relu", 1.0, 1.0, 0.3), steps=16, horizon=1.0, attention=SphereAttention("SA", 1.5))
    x0 = random_tokens(jax.random.key(0), N, d)
    # the UnsafeBrownianPath variant is timed in benchmarks/bench_stochastic.py
    assert isinstance(brownian_path(jax.random.key(1), sde, (N, d)), diffrax.UnsafeBrownianPath)
    with pytest.raises(ValueError, match="path_type"):
        brownian_path(jax.random.key(1), sde, (N, d), path_type=diffrax.ControlTerm)  # pyright: ignore[reportArgumentType]  # bad on purpose
    for path_type in (diffrax.VirtualBrownianTree,):
        path = brownian_path(jax.random.key(1), sde, (N, d), path_type=path_type)
        ts = jnp.linspace(0.0, sde.horizon, sde.steps + 1)
        dB = cast(jax.Array, jax.vmap(path.evaluate)(ts[:-1], ts[1:]))  # diffrax types it as any pytree
        x_scan = integrate_increments(sde, x0, dB, save_every=4)
        x_dfx = solve_diffrax(sde, x0, path, save_every=4)
        np.testing.assert_allclose(x_dfx, x_scan, atol=1e-12)


def test_sphere_solver_composes_euler_instead_of_subclassing_it():
    """The retracted solver wraps diffrax's Euler step: no concrete diffrax solver among its bases."""
    from cfm_jax.stochastic._sde import _SphereEuler

    concrete = [c for c in _SphereEuler.__mro__[1:] if c.__module__.startswith("diffrax")]
    assert concrete and all(c.__name__.startswith("Abstract") for c in concrete), concrete
    assert isinstance(_SphereEuler().euler, diffrax.Euler)


def test_strong_convergence_of_coupled_scheme():
    """Coarse and fine schemes driven by the same Brownian matrix: strong error → 0 with a
    fitted order in [0.35, 1.3] (theory: ½ for non-commutative noise, up to 1)."""
    N, d, R, fine = 3, 3, 48, 256
    k = NoiseKernel("relu", 1.0, 1.0, 0.5)
    att = SphereAttention("USA", 1.0)
    x0 = random_tokens(jax.random.key(2), N, d)
    dB = jax.vmap(lambda kk: brownian_increments(kk, fine, (N, d), 1.0))(jax.random.split(jax.random.key(3), R))
    ref = jax.vmap(lambda b: integrate_increments(SphereSDE(k, fine, 1.0, att), x0, b))(dB)
    Ls = [4, 16, 64]
    errs = []
    for L in Ls:
        xl = jax.vmap(lambda b: integrate_increments(SphereSDE(k, L, 1.0, att), x0, b))(dB)
        errs.append(float(jnp.sqrt(jnp.mean(jnp.sum((xl - ref) ** 2, axis=(-2, -1))))))
    slope = -np.polyfit(np.log(Ls), np.log(errs), 1)[0]
    assert errs[0] > errs[1] > errs[2]
    assert 0.35 < slope < 1.3, (errs, slope)


def test_save_every_must_be_a_positive_divisor():
    sde = SphereSDE(NoiseKernel("linear", 1.0, 1.0), steps=4, horizon=1.0)
    x0 = random_tokens(jax.random.key(0), 2, 3)
    dB = brownian_increments(jax.random.key(1), 4, (2, 3), 1.0)
    path = brownian_path(jax.random.key(1), sde, (2, 3))
    for bad in (0, -1):
        with pytest.raises(ValueError, match="`save_every` must be a positive integer"):
            integrate_increments(sde, x0, dB, save_every=bad)
        with pytest.raises(ValueError, match="`save_every` must be a positive integer"):
            solve_diffrax(sde, x0, path, save_every=bad)
    with pytest.raises(ValueError, match="must divide `steps`"):
        integrate_increments(sde, x0, dB, save_every=3)
    assert integrate_increments(sde, x0, dB, save_every=4).shape == (2, 2, 3)


def test_brownian_increments_check_steps_and_horizon():
    assert brownian_increments(jax.random.key(0), 1, (2, 3), 1e-12).shape == (1, 2, 3)
    for steps, horizon, name in (
        (0, 1.0, "steps"),
        (1.5, 1.0, "steps"),
        (2, 0.0, "horizon"),
        (2, -1.0, "horizon"),
        (2, float("nan"), "horizon"),
    ):
        with pytest.raises(ValueError, match=f"`{name}`"):
            brownian_increments(jax.random.key(0), steps, (2, 3), horizon)  # pyright: ignore[reportArgumentType]  # bad on purpose
