"""The rules built on the one value check: finite arrays and parameters, a solve that succeeded."""

import re

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax._arguments import check_solved


def test_check_solved_raises_diffraxs_message_or_one_of_its_own():
    """A failure diffrax names raises its message after the prefix; any other unsuccessful result
    (here an implicit solver's) the library's own; a successful one nothing: at top level, inside a
    compiled program and under a caller's jit alike."""
    R = diffrax.RESULTS
    solved = lambda r, x: check_solved(x, r, "forward: ")  # noqa: E731
    x = jnp.ones(2)
    for way in (lambda f: f, cfm_jax.compiled, jax.jit):
        np.testing.assert_array_equal(way(solved)(R.successful, x), x)
        with pytest.raises(Exception, match=re.escape("forward: " + R[R.max_steps_reached])):
            jax.block_until_ready(way(solved)(R.max_steps_reached, x))
        with pytest.raises(Exception, match="forward: The solve did not succeed: `throw=False` returns its `result`"):
            jax.block_until_ready(way(solved)(R.nonlinear_divergence, x))
