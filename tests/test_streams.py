"""Sample streams: user array/function streams reproduce the teacher-student stream."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _ogd_problem import CK_LAM, ETA, _short_run

import cfm_jax
from cfm_jax import ogd
from cfm_jax._streams import ArrayStream, FunctionStream


def test_user_streams_match_the_teacher_stream(setup):
    _, student, stream = setup
    samples = [stream(k) for k in range(4)]
    arrays = tuple(jnp.stack([getattr(s, f) for s in samples]) for f in ("x0", "context", "y"))
    ref = _short_run(student, stream)
    a = _short_run(student, ArrayStream(*arrays))
    for x, y in zip(jax.tree.leaves(ref.state), jax.tree.leaves(a.state)):
        np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-14)
    fs = FunctionStream(lambda k: (arrays[0][k], cfm_jax.EmpiricalMeasure(arrays[1][k]), arrays[2][k]))
    for f in ("x0", "context", "y"):
        np.testing.assert_array_equal(getattr(fs(2), f), getattr(samples[2], f))
    with pytest.raises(ValueError, match="4 samples"):
        ogd.run_ogd(student, ArrayStream(*arrays), ogd.ridge_sgd(ETA, CK_LAM), 5)


def test_a_stream_must_implement_call():
    """AbstractStream is abstract: it, or a subclass without ``__call__``, cannot be instantiated (a
    missing method is a TypeError at construction, not a NotImplementedError deep in a training loop)."""
    from cfm_jax._streams import AbstractStream

    class NoCall(AbstractStream):
        pass

    for cls in (AbstractStream, NoCall):
        with pytest.raises(TypeError, match="abstract"):
            cls()  # pyright: ignore[reportAbstractUsage]  # abstract on purpose
    assert FunctionStream(lambda k: (jnp.zeros((1, 2)), jnp.ones((3, 2)), jnp.zeros((1, 2)))).length is None
