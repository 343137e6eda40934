"""Energies and observables: values at synchronisation and algebraic identities."""

import math

import jax
import jax.numpy as jnp
import pytest

from cfm_jax.stochastic import (
    energy_deficit,
    interaction_energy,
    observables,
    random_tokens,
)


def test_energies_at_sync_and_identities():
    """The paper's E_β = ½∬(e^β − e^{β<x,y>}) on configurations with known values."""
    x = random_tokens(jax.random.key(0), 7, 3)
    beta = 1.7
    # two tokens at angle θ: of the 4 ordered pairs two are off-diagonal, E = ¼(e^β − e^{β cos θ})
    th = 1.1
    pair = jnp.array([[1.0, 0.0, 0.0], [math.cos(th), math.sin(th), 0.0]])
    assert float(energy_deficit(pair, beta)) == pytest.approx(
        0.25 * (math.exp(beta) - math.exp(beta * math.cos(th))), rel=1e-12
    )
    assert float(interaction_energy(pair, beta)) == pytest.approx(
        0.25 * (math.exp(beta) + math.exp(beta * math.cos(th))), rel=1e-12
    )
    sync = jnp.tile(x[:1], (7, 1))
    obs = observables(sync, beta)
    assert float(obs["deficit"]) == 0.0 and float(obs["diameter"]) == 0.0
    assert float(obs["order"]) == pytest.approx(1.0)
    # ∬‖x−y‖² = 2(1 − ‖mean‖²) on the sphere
    assert float(observables(x)["dist_energy_p1"]) == pytest.approx(
        2 * (1 - float(observables(x)["order"]) ** 2), rel=1e-10
    )
    # E_β stays accurate (relative) for nearly merged tokens: E_β ≈ ½ e^β β · mean r (abs=0:
    # pytest.approx's default absolute tolerance 1e-12 would make this check vacuous)
    y = jnp.stack(
        [x[0], (x[0] + 1e-9 * jnp.array([0.0, 1.0, 0.0])) / jnp.linalg.norm(x[0] + 1e-9 * jnp.array([0.0, 1.0, 0.0]))]
    )
    r = 0.5 * float(jnp.sum((y[0] - y[1]) ** 2))
    assert float(energy_deficit(y, beta)) == pytest.approx(0.5 * math.exp(beta) * beta * (2 * r / 4), rel=1e-6, abs=0)


def test_realisation_stats_known_values():
    """Mean, median and log-mean (geometric mean) over realisations, per time; values below the floor
    (exact zeros) are floored for the log-mean only."""
    import numpy as np

    from cfm_jax.stochastic import realisation_stats

    v = np.array([[1.0, 1e-4, 0.0], [100.0, 1e-2, 4.0], [10.0, 1.0, 1.0]])
    st = realisation_stats(v, floor=1e-6)
    np.testing.assert_allclose(st["mean"], v.mean(0), rtol=1e-15)
    np.testing.assert_allclose(st["median"], [10.0, 1e-2, 1.0], rtol=1e-15)
    np.testing.assert_allclose(st["logmean"], [10.0, 1e-2, (1e-6 * 4.0) ** (1 / 3)], rtol=1e-12)
