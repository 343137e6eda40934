"""What the parts of `cfm-jax sync` share: a slope's text and the shared programs."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cfm_experiments.sync import common
from cfm_jax.stochastic import random_tokens


def test_interval_text():
    assert common.interval_text(-0.6031, -0.6621, -0.5372) == "-0.60 [-0.66, -0.54]"
    assert common.interval_text(-1.5, math.nan, math.nan, 3) == "-1.500 (no interval)"


def test_random_starts_are_the_library_tokens_one_key_per_run():
    key = jax.random.key(3)
    x = common.random_starts(key, 4, 5, 3)
    assert x.shape == (4, 5, 3) and np.allclose(np.linalg.norm(np.asarray(x), axis=-1), 1.0, atol=1e-14)
    for r, k in enumerate(jax.random.split(key, 4)):
        # compiled vs op by op: equal to round-off (the division may be fused differently)
        np.testing.assert_allclose(np.asarray(x[r]), np.asarray(random_tokens(k, 5, 3)), rtol=0, atol=1e-15)


def test_sup_rms_against_a_loop():
    rng = np.random.default_rng(0)
    xs, ref = rng.normal(size=(2, 3, 4, 5, 2))
    want = [max(math.sqrt(np.mean(np.sum((xs[r, s] - ref[r, s]) ** 2, -1))) for s in range(4)) for r in range(3)]
    np.testing.assert_allclose(np.asarray(common.sup_rms(jnp.asarray(xs), jnp.asarray(ref))), want, rtol=1e-13)


def test_realisations_option_states_its_bound():
    assert common.REALISATIONS.check(None) is None and common.REALISATIONS.check(2) == 2
    with pytest.raises(
        ValueError, match=r"^--realisations must be an integer >= 2 \(a confidence interval needs two\)"
    ):
        common.REALISATIONS.check(1)
