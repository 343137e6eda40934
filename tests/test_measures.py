"""Context measures: validation at the boundary, pad_to and unchecked construction."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cfm_jax import EmpiricalMeasure


@pytest.mark.parametrize(
    "points,weights,match",
    [
        (np.zeros(3), None, "points"),
        (np.zeros((0, 2)), None, "points"),
        (np.array([[0.0, np.nan]]), None, "points"),
        (np.zeros((3, 2)), np.array([0.5, 0.5, 0.0]), "weights"),
        (np.zeros((3, 2)), np.array([0.5, 0.7, -0.2]), "weights"),
        (np.zeros((3, 2)), np.array([0.5, 0.5, 0.5]), "weights"),
        (np.zeros((3, 2)), np.array([0.5, 0.5]), "weights"),
        (np.zeros((2, 2)), np.array([0.5, np.inf]), "weights"),
    ],
)
def test_measure_validation(points, weights, match):
    with pytest.raises(ValueError, match=match):
        EmpiricalMeasure(points, weights)


def test_measure_inside_jit_skips_value_checks_but_works():
    f = jax.jit(lambda z: EmpiricalMeasure(z).mean())
    np.testing.assert_allclose(f(jnp.ones((4, 2))), jnp.ones(2))


def test_pad_to_adds_zero_mass_atoms_and_unchecked_skips_validation():
    mu = EmpiricalMeasure(jnp.arange(6.0).reshape(3, 2), jnp.array([0.5, 0.25, 0.25]))
    padded = mu.pad_to(5)
    assert padded.size == 5 and float(padded.weights[3:].max()) == 0.0
    np.testing.assert_array_equal(padded.points[:3], mu.points)
    np.testing.assert_allclose(padded.mean(), mu.mean())
    with pytest.raises(ValueError, match="`size`"):
        mu.pad_to(2)
    with pytest.raises(ValueError, match="weights"):
        EmpiricalMeasure(padded.points, padded.weights)  # a user measure must have positive weights
    raw = EmpiricalMeasure.unchecked(padded.points, padded.weights)
    np.testing.assert_array_equal(raw.weights, padded.weights)


def test_split_atom_keeps_the_measure():
    from cfm_jax import split_atom

    mu = EmpiricalMeasure(jax.random.normal(jax.random.key(0), (4, 3)))
    nu = split_atom(mu, 2, 0.3)
    assert nu.size == 5
    np.testing.assert_allclose(nu.mean(), mu.mean(), rtol=1e-14)
    np.testing.assert_allclose(nu.weights[2] + nu.weights[4], mu.weights[2], rtol=1e-14)


@pytest.mark.parametrize("excess", [2e-5, -2e-5])
def test_weight_sum_is_checked_on_both_sides(excess):
    """Weights summing just above and just below 1 (outside the 1e-5 tolerance) are refused; sums
    inside the tolerance on either side are accepted (an absolute-value check, not a one-sided one)."""
    points = np.zeros((4, 2))
    base = np.full(4, 0.25)
    with pytest.raises(ValueError, match="sum to 1"):
        EmpiricalMeasure(points, base * (1 + excess))
    mu = EmpiricalMeasure(points, base * (1 + excess / 4))
    assert float(mu.weights.sum()) == pytest.approx(1 + excess / 4, abs=1e-12)
