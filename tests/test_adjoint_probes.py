"""Probe sets: points uniform in a ball, and regular grids clipped to the ball."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from cfm_jax import ball_probes, grid_probes


def test_ball_probes_are_uniform_in_the_ball():
    """Uniform in the ball of radius R in R^d: (r/R)^d is uniform on [0, 1] (a KS test at 1%), and
    the directions have mean 0 (a two-sided 4σ band for 4000 points)."""
    pts = np.asarray(ball_probes(jax.random.key(0), 4000, 3, radius=2.0))
    r = np.linalg.norm(pts, axis=1)
    assert pts.shape == (4000, 3) and r.max() <= 2.0
    assert stats.kstest((r / 2.0) ** 3, "uniform").pvalue > 0.01
    u = pts / r[:, None]
    assert np.all(np.abs(u.mean(0)) < 4 / np.sqrt(3 * 4000))


def test_grid_probes_lie_in_the_ball_and_include_the_axes():
    g = np.asarray(grid_probes(2, radius=1.0, per_axis=5))
    assert np.all(np.linalg.norm(g, axis=1) <= 1.0 + 1e-12)
    for p in ([0, 0], [1, 0], [0, -1], [0.5, 0.5]):
        assert np.any(np.all(np.isclose(g, p), axis=1)), p
    assert not np.any(np.all(np.isclose(g, [1, 1]), axis=1))


def test_bad_probe_arguments():
    """Shapes (num, dim, per_axis) are static ints refused by name; radius is a value, checked like
    every value (eagerly and under a caller's jit), its type refused by name."""
    key = jax.random.key(0)
    for num, dim, name in ((0, 3, "num"), (2.5, 2, "num"), ("4", 2, "num"), (True, 2, "num"), (4, 2.0, "dim")):
        with pytest.raises(ValueError, match=f"`{name}` must be a positive int"):
            ball_probes(key, num, dim)  # pyright: ignore[reportArgumentType]  # bad on purpose
    assert ball_probes(key, np.int64(3), np.int32(2)).shape == (3, 2)  # pyright: ignore[reportArgumentType]
    for radius in (-1.0, 0.0, float("nan"), float("inf")):
        with pytest.raises(eqx.EquinoxRuntimeError, match="`radius` must be finite and > 0"):
            ball_probes(key, 4, 3, radius=radius)
        with pytest.raises(eqx.EquinoxRuntimeError, match="`radius` must be finite and > 0"):
            eqx.filter_jit(lambda r: ball_probes(key, 4, 3, radius=r))(jnp.asarray(radius))
        with pytest.raises(eqx.EquinoxRuntimeError, match="`radius` must be finite and > 0"):
            grid_probes(2, radius=radius)
    for radius in (True, np.ones(2), 1j, "1", None):
        with pytest.raises(ValueError, match="`radius` must be a real number"):
            ball_probes(key, 4, 3, radius=radius)  # pyright: ignore[reportArgumentType]  # bad on purpose
        with pytest.raises(ValueError, match="`radius` must be a real number"):
            grid_probes(2, radius=radius)  # pyright: ignore[reportArgumentType]  # bad on purpose
    traced = jax.jit(lambda r: ball_probes(key, 4, 3, radius=r))(2.0)
    np.testing.assert_allclose(traced, ball_probes(key, 4, 3, radius=2.0), rtol=1e-6)
    with pytest.raises(ValueError, match="`per_axis`"):
        grid_probes(2, per_axis=1)
    with pytest.raises(ValueError, match="`dim` must be a positive int"):
        grid_probes(2.5)  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="`radius` must be a number, not a traced value"):
        jax.jit(lambda r: grid_probes(2, radius=r))(1.0)
    inside = jax.jit(lambda x: grid_probes(2, radius=2.0) * x)(1.0)  # a constant radius inside a caller's jit
    np.testing.assert_array_equal(inside, grid_probes(2, radius=2.0))
    with pytest.raises(ValueError, match="too large"):
        grid_probes(10, per_axis=10)
