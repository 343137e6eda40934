"""‖θ‖_{L∞} = max over layers of the Euclidean norm of all that layer's parameters, against NumPy."""

import jax
import numpy as np

import cfm_jax
from cfm_jax import ogd


def test_sup_norm_and_distance_against_numpy():
    a = cfm_jax.Transformer.init(jax.random.key(0), 3, heads=2, mlp_width=4, layers=5)
    b = cfm_jax.Transformer.init(jax.random.key(1), 3, heads=2, mlp_width=4, layers=5)
    pa, pb = a.stacked_params(), b.stacked_params()
    per_layer = lambda p: np.sqrt(sum((np.asarray(v).reshape(5, -1) ** 2).sum(1) for v in p.values()))  # noqa: E731
    np.testing.assert_allclose(ogd.sup_norm(a), per_layer(pa).max(), rtol=1e-6)
    diff = {k: np.asarray(pa[k]) - np.asarray(pb[k]) for k in pa}
    np.testing.assert_allclose(ogd.sup_distance(a, b), per_layer(diff).max(), rtol=1e-6)
    assert float(ogd.sup_distance(a, a)) == 0.0
    np.testing.assert_allclose(ogd.sup_distance(a, b), ogd.sup_distance(b, a), rtol=1e-7)
