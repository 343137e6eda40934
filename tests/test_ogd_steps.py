"""Step sizes and the ridge optimiser θ ← (1 − ηλ)θ − η g."""

from typing import cast

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from cfm_jax import ogd


def test_ridge_sgd_is_the_hand_written_update():
    eta, lam = 0.25, 0.5  # dyadic: every product below is exact in binary floating point
    theta = {"a": jnp.asarray([1.0, -2.0, 0.5, 3.0]), "b": jnp.asarray([[0.75, -0.125]])}
    g = {"a": jnp.asarray([0.5, 0.25, -1.0, 2.0]), "b": jnp.asarray([[-4.0, 0.0625]])}
    opt = ogd.ridge_sgd(eta, lam)
    upd, _ = opt.update(g, opt.init(theta), theta)
    new = cast(dict[str, jax.Array], optax.apply_updates(theta, upd))  # optax types it as any pytree
    for k in theta:
        np.testing.assert_array_equal(new[k], (1 - eta * lam) * theta[k] - eta * g[k])
    # generic float64 values: equal to round-off (a few ulp)
    t = jax.random.normal(jax.random.key(0), (50,), jnp.float64)
    gg = jax.random.normal(jax.random.key(1), (50,), jnp.float64)
    opt = ogd.ridge_sgd(0.037, 1.9)
    upd, _ = opt.update(gg, opt.init(t), t)
    new_t = cast(jax.Array, optax.apply_updates(t, upd))
    np.testing.assert_allclose(new_t, (1 - 0.037 * 1.9) * t - 0.037 * gg, rtol=0, atol=1e-15)


@pytest.mark.parametrize(
    "eta, lam, match",
    [
        (0.0, 0.1, "learning_rate"),
        (-1.0, 0.1, "learning_rate"),
        (float("nan"), 0.1, "learning_rate"),
        (0.1, -0.5, "weight_decay"),
        (0.5, 2.0, "η·λ"),
        (0.1, float("inf"), "weight_decay"),
        ("a", 1.0, "numbers"),
    ],
)
def test_bad_step_sizes(eta, lam, match):
    with pytest.raises(ValueError, match=match):
        ogd.ridge_sgd(eta, lam)
