"""Flat draws: the same numbers as ``jax.random``'s, and programs whose counters are 1-D."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import _random

SHAPES = [(3,), (5, 2), (2, 3, 4), (4, 1, 3, 3), (2, 1, 2, 3, 2)]


@pytest.mark.parametrize("partitionable", [True, False])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_same_numbers_as_jax_random(shape, dtype, partitionable):
    key = jax.random.key(7)
    with jax.threefry_partitionable(partitionable):
        np.testing.assert_array_equal(_random.normal(key, shape, dtype), jax.random.normal(key, shape, dtype))
        np.testing.assert_array_equal(
            _random.uniform(key, shape, dtype, -3.0, 0.5), jax.random.uniform(key, shape, dtype, -3.0, 0.5)
        )
        # under jit and vmap over keys too (the sweeps draw per seed)
        keys = jax.random.split(key, 3)
        got = jax.jit(jax.vmap(lambda k: _random.normal(k, shape, dtype)))(keys)
        np.testing.assert_array_equal(got, jnp.stack([jax.random.normal(k, shape, dtype) for k in keys]))


def test_other_key_implementations_and_broadcast_bounds_draw_as_jax_random():
    key = jax.random.key(3, impl="rbg")
    shape = (2, 3, 4)
    np.testing.assert_array_equal(_random.normal(key, shape), jax.random.normal(key, shape))
    lo = jnp.arange(4.0)  # bounds broadcast per element: not drawn flat
    k = jax.random.key(1)
    np.testing.assert_array_equal(
        _random.uniform(k, shape, None, lo, lo + 1), jax.random.uniform(k, shape, None, lo, lo + 1)
    )


def _counter_ranks(fn, *args) -> set[int]:
    """The ranks of the unsigned iotas (threefry's counters) in ``fn``'s lowered program."""
    text = jax.jit(fn).lower(*args).as_text()
    return {s.count("x") for s in re.findall(r"stablehlo\.iota dim = \d+ : tensor<([0-9x]+)xui(?:32|64)>", text)}


def test_model_weights_are_drawn_with_flat_counters():
    """Transformer.init's (L, H, d, d) weights: no counter of rank >= 2 (the slow-compiling form)."""
    init = lambda k: cfm_jax.Transformer.init(k, 3, heads=2, mlp_width=4, layers=2)  # noqa: E731
    ranks = _counter_ranks(init, jax.random.key(0))
    assert ranks and max(ranks) == 0, ranks  # "1024xui32" has no "x" before the dtype: rank 1
    # the check itself sees the multi-axis form
    assert max(_counter_ranks(lambda k: jax.random.normal(k, (2, 2, 3, 3)), jax.random.key(0))) >= 1
