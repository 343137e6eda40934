"""Probe sets: points uniform in a ball, and regular grids clipped to the ball."""

import jax
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
    with pytest.raises(ValueError, match="num"):
        ball_probes(jax.random.key(0), 0, 3)
    with pytest.raises(ValueError, match="radius"):
        ball_probes(jax.random.key(0), 4, 3, radius=-1.0)
    with pytest.raises(ValueError, match="per_axis"):
        grid_probes(2, per_axis=1)
    with pytest.raises(ValueError, match="too large"):
        grid_probes(10, per_axis=10)
