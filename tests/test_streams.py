"""Sample streams: user array/function streams reproduce the teacher-student stream."""

import equinox as eqx
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


def test_teacher_stream_samples_have_their_law():
    """Sample k: x_0 ~ N(0, x_scale² I), y = the teacher's x_1 on the sample's own context plus label
    noise of standard deviation `noise`, independent of x_0. Over 64 samples (512 numbers): the std
    of x_0 and of y − x_1 within 5 standard errors of x_scale = 2 and noise = 0.1, and their
    correlation within 5/√512 of 0 (a noise drawn with x_0's key correlates them exactly)."""
    teacher = cfm_jax.Transformer.init(jax.random.key(1), 2, heads=1, layers=2, dtype=jnp.float64)
    stream = cfm_jax.TeacherStudentStream(
        teacher, cfm_jax.isotropic_gaussian(2), jax.random.key(5), batch=4, context_size=8, noise=0.1, x_scale=2.0
    )
    s = jax.vmap(stream)(jnp.arange(64))
    x1 = jax.vmap(lambda x0, z: cfm_jax.forward(teacher, x0, z).x1)(s.x0, s.context)
    x0, r = np.asarray(s.x0).ravel(), np.asarray(s.y - x1).ravel()
    n = x0.size
    assert abs(x0.std() - 2.0) < 5 * 2.0 / np.sqrt(2 * n)
    assert abs(r.std() - 0.1) < 5 * 0.1 / np.sqrt(2 * n)
    assert abs(np.corrcoef(x0, r)[0, 1]) < 5 / np.sqrt(n)
    quiet = cfm_jax.TeacherStudentStream(
        teacher, cfm_jax.isotropic_gaussian(2), jax.random.key(5), batch=4, context_size=8
    )
    q = quiet(3)
    np.testing.assert_allclose(q.y, cfm_jax.forward(teacher, q.x0, q.context).x1, rtol=1e-12)


def test_teacher_stream_checks_its_teacher_once_and_draws_without_callbacks():
    """A non-finite teacher is refused when the stream is built, naming it; the samples are drawn
    without value checks, so a program drawing from the stream holds no host callback (the
    persistent compilation cache never stores one that does)."""
    teacher = cfm_jax.Transformer.init(jax.random.key(0), 3, heads=1, mlp_width=4, layers=2)
    stream = cfm_jax.TeacherStudentStream(
        teacher, cfm_jax.isotropic_gaussian(3), jax.random.key(1), batch=2, context_size=8
    )
    hlo = jax.jit(lambda k: stream(k).y).lower(3).as_text()
    assert "callback" not in hlo
    bad = jax.tree.map(lambda a: a.at[0].set(jnp.nan) if eqx.is_inexact_array(a) and a.ndim else a, teacher)
    with pytest.raises(eqx.EquinoxRuntimeError, match="`teacher` parameters contain non-finite"):
        cfm_jax.TeacherStudentStream(bad, cfm_jax.isotropic_gaussian(3), jax.random.key(1))
    # a traced teacher (a caller's jit): the same check, carried by the teacher into the samples
    draw = eqx.filter_jit(
        lambda t: cfm_jax.TeacherStudentStream(t, cfm_jax.isotropic_gaussian(3), jax.random.key(1))(0).y
    )
    with pytest.raises(eqx.EquinoxRuntimeError, match="`teacher` parameters contain non-finite"):
        draw(bad)
    np.testing.assert_array_equal(
        draw(teacher), cfm_jax.TeacherStudentStream(teacher, cfm_jax.isotropic_gaussian(3), jax.random.key(1))(0).y
    )
    for name, kwargs in (("batch", dict(batch=2.5)), ("context_size", dict(context_size=0))):
        with pytest.raises(ValueError, match=f"`{name}` must be a positive int"):
            cfm_jax.TeacherStudentStream(teacher, cfm_jax.isotropic_gaussian(3), jax.random.key(1), **kwargs)  # pyright: ignore[reportArgumentType]
