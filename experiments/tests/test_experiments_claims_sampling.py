"""claims.sampling: fixed-norm models, the laws' samplers, the collapsed MLP, the draw program."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cfm_experiments.claims import sampling as S
from cfm_jax import CompileRecorder, EmpiricalMeasure, forward


def _op(a):
    return np.linalg.norm(np.asarray(a), ord=2, axis=(-2, -1))


@pytest.mark.parametrize("v_sum", [False, True])
def test_fixed_norm_params_have_the_norms_asked_for(v_sum):
    p = S.fixed_norm_params(jax.random.key(0), 5, heads=3, width=7, layers=2, qk=2.5, v=0.7, v_sum=v_sum)
    np.testing.assert_allclose(_op(p["Q"]) * _op(p["K"]), 2.5, rtol=1e-6)
    if v_sum:
        np.testing.assert_allclose(_op(p["V"]).sum(axis=1), 0.7, rtol=1e-6)
    else:
        concat = np.moveaxis(np.asarray(p["V"]), 1, 2).reshape(2, 5, 15)  # [V_1 V_2 V_3] per layer
        np.testing.assert_allclose(_op(concat), 0.7, rtol=1e-6)
    np.testing.assert_allclose(_op(p["W1"]), 1.0, rtol=1e-6)
    np.testing.assert_allclose(_op(p["W2"]), 1.0, rtol=1e-6)
    assert S.param_count(dict(dim=5, heads=3, width=7, layers=2)) == sum(np.asarray(a).size for a in p.values())


@pytest.mark.parametrize("qmc", [False, True])
def test_samplers_have_their_laws_moments(qmc):
    """Gaussian: E‖z‖² = σ², the covariance of the exact reference; ball of radius R in d = 3: inside
    it, E‖z‖ = 3R/4, E‖z‖² = 3R²/5, mean 0."""
    n, key = 4096, jax.random.key(1)
    g = np.asarray(S.sample_law("gaussian", key, n, 4, 1.5, qmc=qmc))
    assert abs((g**2).sum(1).mean() / 1.5**2 - 1) < 0.05
    law = S.gaussian_law(4, 1.5)
    np.testing.assert_allclose(np.cov(g.T), np.asarray(law.cov), atol=0.04)
    np.testing.assert_allclose(g.mean(0), np.asarray(law.mean), atol=0.05)
    b = np.asarray(S.sample_law("ball", key, n, 3, 2.0, qmc=qmc))
    r = np.linalg.norm(b, axis=1)
    assert r.max() <= 2.0 and abs(r.mean() / 1.5 - 1) < 0.02 and abs((r**2).mean() / 2.4 - 1) < 0.03
    assert np.abs(b.mean(0)).max() < 0.05


def test_collapsed_mlp_gives_the_same_flow_and_a_wrong_collapse_does_not():
    """A linear MLP acts through W2W1 (and W2b1): the collapsed model's tokens equal the original's; a
    collapse that drops W2's action on b1 (a planted mistake) does not, once b1 is non-zero."""
    p = S.fixed_norm_params(jax.random.key(2), 3, heads=1, width=5, layers=2, qk=1.0, v=1.0)
    p["b1"] = 0.3 * jnp.ones_like(p["b1"])
    x0, z = jax.random.normal(jax.random.key(3), (2, 3)), jax.random.normal(jax.random.key(4), (16, 3))
    run = lambda q: forward(S.transformer(q), x0, EmpiricalMeasure(z)).x1  # noqa: E731
    collapsed = S.collapse_mlp(p)
    np.testing.assert_allclose(run(collapsed), run(p), rtol=1e-12, atol=1e-12)
    wrong = {**collapsed, "b1": jnp.zeros_like(p["b1"]).at[:, :3].set(p["b1"][:, :3])}
    assert not np.allclose(run(wrong), run(p), atol=1e-6)
    with pytest.raises(ValueError, match="m >= d"):
        S.collapse_mlp(S.fixed_norm_params(jax.random.key(2), 6, heads=1, width=4, layers=1, qk=1.0, v=1.0))


def test_draw_is_one_program_per_shape_and_pure_in_the_seed():
    """A second batch of seeds, other norms and another base seed reuse the program; seed i's draw does
    not depend on which batch it is in."""
    static = dict(batch=4, law="gaussian", dim=3, heads=1, width=0, layers=2, size=8, n_ref=0)
    fixed, seeds = S.seed_keys(0)
    a = S.draw(seeds, 0, fixed, 1.0, 1.0, 1.0, False, False, False, **static)
    with CompileRecorder() as stats:
        b = S.draw(seeds, 2, fixed, 1.0, 1.0, 1.0, False, False, False, **static)
        f2, s2 = S.seed_keys(5)
        S.draw(s2, 0, f2, 2.0, 0.5, 3.0, True, True, False, **static)
    assert stats.compiled + stats.cache_loads == 0, stats.compiled_names  # compiled or loaded from the disk cache
    np.testing.assert_array_equal(np.asarray(a["z"])[2:], np.asarray(b["z"])[:2])
