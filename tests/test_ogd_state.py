"""The OGD state: every trajectory starts at the model, and mismatched states are rejected."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import ogd


def test_init_state_starts_every_trajectory_at_the_model():
    model = cfm_jax.Transformer.init(jax.random.key(0), 2, heads=1, mlp_width=3, layers=2)
    state = ogd.init_state(model, ogd.ridge_sgd(0.1, 0.5), context_sizes=(4, None))
    assert state.context_sizes == (4, None) and int(state.step) == 0
    for p in state.params:
        for a, b in zip(jax.tree.leaves(p), jax.tree.leaves(eqx.filter(model, eqx.is_inexact_array))):
            np.testing.assert_array_equal(a, b)
    back = state.model(model, 0)
    assert type(back) is type(model) and back.activation is model.activation


def test_state_checks_name_the_argument():
    model = cfm_jax.Transformer.init(jax.random.key(0), 2, heads=1, mlp_width=3, layers=2)
    opt = ogd.ridge_sgd(0.1)
    with pytest.raises(ValueError, match="optimizer"):
        ogd.init_state(model, "sgd")  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="context_sizes"):
        ogd.init_state(model, opt, context_sizes=())
    with pytest.raises(ValueError, match="context_sizes"):
        ogd.init_state(model, opt, context_sizes=(0,))
    other = cfm_jax.Transformer.init(jax.random.key(0), 2, heads=1, mlp_width=5, layers=2)
    from cfm_jax.ogd._state import check_state

    with pytest.raises(ValueError, match="state.params"):
        check_state(ogd.init_state(other, opt), model, opt)
    with pytest.raises(ValueError, match="`state`"):
        check_state({"params": jnp.zeros(1)}, model, opt)
