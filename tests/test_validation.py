"""Value checks of the compiled entry points: raised after the call from flags the program returns
(at top level), a host callback inside a caller's own transformation; the same message either way."""

import traceback

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

import cfm_jax
from cfm_jax._validation import check, compiled, notice

MESSAGE = "`x` contains non-finite values (nan/inf)."


@compiled
def _double(x):
    return 2 * check(x, ~jnp.all(jnp.isfinite(x)), MESSAGE)


@compiled
def _two_checks(x):
    x = check(x, x[0] < 0, "first")
    return check(x, x[1] < 0, "second")


def test_top_level_calls_raise_after_the_call_from_the_callers_line():
    _double(jnp.ones(2))  # traced and compiled here, by the first call
    with pytest.raises(eqx.EquinoxRuntimeError) as info:
        _double(jnp.array([1.0, jnp.nan]))  # the same program, a second call
    assert str(info.value) == MESSAGE  # the message alone: no stack of another call inside it
    frames = traceback.extract_tb(info.tb)
    here = [f for f in frames if f.name == "test_top_level_calls_raise_after_the_call_from_the_callers_line"]
    assert here and "_double(jnp.array([1.0, jnp.nan]))" in (here[-1].line or "")


def test_the_first_failed_check_is_the_one_raised():
    with pytest.raises(eqx.EquinoxRuntimeError, match="^first$"):
        _two_checks(jnp.array([-1.0, -1.0]))
    with pytest.raises(eqx.EquinoxRuntimeError, match="^second$"):
        _two_checks(jnp.array([1.0, -1.0]))
    assert float(_two_checks(jnp.array([1.0, 1.0]))[0]) == 1.0


def test_inside_a_callers_transformation_the_check_still_raises():
    bad = jnp.array([[1.0, 2.0], [jnp.nan, 1.0]])
    with pytest.raises(eqx.EquinoxRuntimeError, match="non-finite"):
        eqx.filter_jit(_double)(bad[1])
    with pytest.raises(Exception, match="non-finite"):  # JaxRuntimeError around the message
        jax.jit(_double)(bad[1])
    with pytest.raises(Exception, match="non-finite"):
        jax.vmap(_double)(bad)
    assert jax.vmap(_double)(bad[:1]).shape == (1, 2)
    with pytest.raises(eqx.EquinoxRuntimeError, match="non-finite"):  # an eager grad carries values
        jax.grad(lambda x: jnp.sum(_double(x)))(bad[1])
    assert float(jax.grad(lambda x: jnp.sum(_double(x)))(jnp.ones(2))[0]) == 2.0


def test_forward_raises_the_same_messages_eagerly_and_under_jit():
    model = cfm_jax.Transformer.init(jax.random.key(0), dim=2, layers=2)
    x0, z = jnp.ones((2, 2)), jnp.full((3, 2), 0.5)
    bad = x0.at[0, 0].set(jnp.nan)
    for call in (
        lambda x: cfm_jax.forward(model, x, z),
        eqx.filter_jit(lambda x: cfm_jax.forward(model, x, z)),
        jax.jit(lambda x: cfm_jax.forward(model, x, z).x1),
    ):
        call(x0)
        with pytest.raises(Exception, match="`x0` contains non-finite values"):
            call(bad)
    with pytest.raises(Exception, match="`model` parameters contain non-finite"):
        cfm_jax.loss_and_grad(jax.tree.map(lambda a: a * jnp.nan, model), x0, z, x0)


def _record(values):
    _SEEN.append(float(values))


_SEEN: list[float] = []


@compiled
def _noticed(x):
    notice(jnp.sum(x), _record)
    return 2 * x


def test_a_notice_is_given_after_a_top_level_call_with_its_values():
    """The host function receives the program's values after each top-level call (the compiled program
    reused); inside a caller's jit, vmap or grad there are no values and it is not called."""
    _SEEN.clear()
    assert float(_noticed(jnp.ones(2))[0]) == 2.0
    _noticed(jnp.full(2, 3.0))  # the same program: the notice is the program's output, not its trace's
    assert _SEEN == [2.0, 6.0]
    jax.jit(_noticed)(jnp.ones(2))
    jax.vmap(_noticed)(jnp.ones((3, 2)))
    jax.grad(lambda x: jnp.sum(_noticed(x)))(jnp.ones(2))
    assert _SEEN == [2.0, 6.0]
    notice(jnp.array(5.0), _record)  # outside a compiled trace: at once
    assert _SEEN == [2.0, 6.0, 5.0]
