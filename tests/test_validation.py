"""Clear errors at the API boundary, each naming the offending argument."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cfm_jax import EmpiricalMeasure, Transformer, forward


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


@pytest.fixture
def tiny():
    return Transformer.init(jax.random.key(0), 2, heads=1, mlp_width=3, layers=2)


@pytest.mark.parametrize(
    "x0,context,kwargs,match",
    [
        (np.zeros((2, 3)), np.zeros((4, 2)), {}, "x0"),
        (np.zeros((1, 1, 2)), np.zeros((4, 2)), {}, "x0"),
        (np.zeros((2, 2)), np.zeros((4, 3)), {}, "context"),
        (np.array([[np.nan, 0.0]]), np.zeros((4, 2)), {}, "x0"),
        (np.zeros((1, 2)), np.zeros((4, 2)), {"steps": 3}, "steps"),
        (np.zeros((1, 2)), np.zeros((4, 2)), {"steps": 0}, "steps"),
        (np.zeros((1, 2), np.int32), np.zeros((4, 2)), {}, "x0"),
    ],
)
def test_forward_validation(tiny, x0, context, kwargs, match):
    with pytest.raises(ValueError, match=match):
        forward(tiny, x0, context, **kwargs)


def test_forward_rejects_non_models():
    with pytest.raises(ValueError, match="model"):
        forward({"Q": 1}, np.zeros(2), np.zeros((3, 2)))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(Q=np.zeros((2, 1, 3, 3)), K=np.zeros((2, 1, 3, 3)), V=np.zeros((2, 1, 3, 2))), "`V`"),
        (dict(Q=np.zeros((2, 1, 3)), K=np.zeros((2, 1, 3, 3)), V=np.zeros((2, 1, 3, 3))), "`Q`"),
        (dict(Q=np.zeros((2, 1, 3, 3)), K=np.zeros((3, 1, 3, 3)), V=np.zeros((2, 1, 3, 3))), "`K`"),
        (dict(Q=np.zeros((2, 1, 3, 3)), K=np.zeros((2, 1, 3, 3)), V=np.zeros((2, 1, 3, 3)), W1=np.zeros((2, 4, 3))), "W1"),
        (
            dict(Q=np.zeros((2, 1, 3, 3)), K=np.zeros((2, 1, 3, 3)), V=np.zeros((2, 1, 3, 3)),
                 W1=np.zeros((2, 4, 3)), b1=np.zeros((2, 4)), W2=np.zeros((2, 3, 5)), b2=np.zeros((2, 3))),
            "`W2`",
        ),
        (dict(Q=np.full((1, 1, 2, 2), np.inf), K=np.zeros((1, 1, 2, 2)), V=np.zeros((1, 1, 2, 2))), "`Q`"),
        (dict(Q=np.zeros((1, 1, 2, 2)), K=np.zeros((1, 1, 2, 2)), V=np.zeros((1, 1, 2, 2)), chunk_size=0), "chunk_size"),
    ],
)
def test_transformer_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Transformer(**kwargs)


@pytest.mark.parametrize("arg,value", [("dim", 0), ("heads", 0), ("layers", 0), ("mlp_width", -1)])
def test_init_validation(arg, value):
    kwargs = dict(dim=2, heads=1, mlp_width=0, layers=1)
    kwargs[arg] = value
    with pytest.raises(ValueError, match=arg):
        Transformer.init(jax.random.key(0), **kwargs)
