"""The one value-check path (``cfm_jax._validation``): every way a user calls the library raises a
failed check naming the argument, and nothing comes back as a silent NaN.

The matrix: a few of the library's checks (a NaN token, a NaN parameter, a NaN context point,
weights that do not sum to one, a NaN target of the loss) × the ways a user calls an entry point
(eagerly, inside ``jax.jit``, ``eqx.filter_jit``, ``jax.grad``, ``jax.jit(jax.grad)`` with a loss
whose gradient does not need the primal output, ``jax.jit(jax.vmap(jax.grad))``, a ``lax.scan``
body, the user's own ``cfm_jax.compiled`` step, a caller's ``checkify``). The cases with a clean
input give finite values the same way (so a check that always fails cannot pass)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import traceback

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import cfm_jax
from cfm_jax import _validation
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
    row = bad[1]
    with pytest.raises(Exception, match="non-finite"):  # no traced argument: a jit traces the call all the same
        jax.block_until_ready(jax.jit(lambda: _double(row))())
    with pytest.raises(eqx.EquinoxRuntimeError, match=f"^{re.escape(MESSAGE)}"):  # nothing traces this call
        jax.vmap(lambda _: _double(row))(jnp.arange(2.0))
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


KEY_M, KEY_X, KEY_Z, KEY_Y = jax.random.split(jax.random.key(0), 4)
MODEL = cfm_jax.Transformer.init(KEY_M, dim=3, heads=1, mlp_width=4, layers=2)
X0 = jax.random.normal(KEY_X, (2, 3))
Z = jax.random.normal(KEY_Z, (6, 3))
Y = jax.random.normal(KEY_Y, (2, 3))


def _nan_model(model):
    """``model`` with one NaN entry in its first floating parameter."""
    params, static = eqx.partition(model, eqx.is_inexact_array)
    leaves, tree = jax.tree.flatten(params)
    leaves[0] = leaves[0].reshape(-1).at[0].set(jnp.nan).reshape(leaves[0].shape)
    return eqx.combine(jax.tree.unflatten(tree, leaves), static)


#: a bad input, by the argument its message names: (model, tokens, context points, context weights,
#: targets); the context is built inside the caller's function, so its own check names `points`
BAD = {
    "x0": (MODEL, X0.at[0, 1].set(jnp.nan), Z, None, Y),
    "model": (_nan_model(MODEL), X0, Z, None, Y),
    "points": (MODEL, X0, Z.at[2, 0].set(jnp.inf), None, Y),
    "weights": (MODEL, X0, Z, jnp.full(6, 0.2), Y),
    "y": (MODEL, X0, Z, None, Y.at[1, 1].set(jnp.nan)),
}


#: how each message names the argument: the context built inside the caller's function is checked
#: by the entry point, as `context` points / weights
NAMES = {"x0": "`x0`", "model": "`model`", "points": "points.? contain", "weights": "weights.? must sum", "y": "`y`"}


def _measure(z, w):
    return cfm_jax.EmpiricalMeasure(z) if w is None else cfm_jax.EmpiricalMeasure(z, w)


def _loss(model, x0, z, w, y):
    """A loss whose gradient does not need the primal output (linear in it), through
    ``loss_and_grad`` for the target check and through ``forward`` otherwise."""
    x1 = cfm_jax.forward(model, x0, _measure(z, w)).x1
    return jnp.sum(x1 * y)


def _loss_checked_y(model, x0, z, w, y):
    return cfm_jax.loss_and_grad(model, x0, _measure(z, w), y)[0] + 0.0 * _loss(model, x0, z, w, y)


def _scan(model, x0, z, w, y):
    def body(carry, _):
        return carry + _loss(model, x0, z, w, y), None

    return jax.lax.scan(body, jnp.zeros(()), None, length=2)[0]


def _under_checkify(fn):
    def run(*args):
        err, out = checkify.checkify(fn)(*args)
        err.throw()
        return out

    return run


def _batched(fn):
    def run(model, x0, z, w, y):
        return fn(model, jnp.stack([x0, x0]), z, w, y)

    return run


WAYS = {
    "eager": lambda f: f,
    "jax.jit": jax.jit,
    "eqx.filter_jit": eqx.filter_jit,
    "grad": lambda f: jax.grad(f),
    "jit(grad)": lambda f: jax.jit(jax.grad(f)),
    "jit(vmap(grad))": lambda f: _batched(jax.jit(jax.vmap(jax.grad(f), in_axes=(None, 0, None, None, None)))),
    "scan": lambda f: jax.jit(lambda *a: _scan(*a)) if f is _loss else jax.jit(f),
    "compiled": lambda f: cfm_jax.compiled(jax.grad(f)),
    "compiled(vmap(grad))": lambda f: _batched(
        cfm_jax.compiled(jax.vmap(jax.grad(f), in_axes=(None, 0, None, None, None)))
    ),
    "checkify": lambda f: _under_checkify(jax.jit(jax.grad(f))),
}


def _finite(tree) -> bool:
    return all(bool(jnp.all(jnp.isfinite(a))) for a in jax.tree.leaves(eqx.filter(tree, eqx.is_inexact_array)))


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("name", BAD)
def test_a_bad_value_raises_naming_the_argument_however_the_call_is_made(name, way):
    loss = _loss_checked_y if name == "y" else _loss
    fn = WAYS[way](loss)
    with pytest.raises(Exception, match=NAMES[name]) as info:
        jax.block_until_ready(fn(*BAD[name]))
    # the message is the library's, whatever wraps it
    assert any(word in str(info.value) for word in ("non-finite", "sum to 1", "nan/inf")), str(info.value)


@pytest.mark.parametrize("way", WAYS)
def test_clean_inputs_run_and_give_finite_values_every_way(way):
    out = WAYS[way](_loss_checked_y)(MODEL, X0, Z, None, Y)
    assert _finite(out)


def test_one_error_type_eagerly_compiled_and_under_filter_jit():
    x0 = BAD["x0"][1]
    for call in (
        lambda: cfm_jax.forward(MODEL, x0, Z),
        lambda: eqx.filter_jit(lambda x: cfm_jax.forward(MODEL, x, Z))(x0),
        lambda: jax.grad(lambda x: _loss(MODEL, x, Z, None, Y))(x0),
        lambda: cfm_jax.compiled(lambda x: cfm_jax.forward(MODEL, x, Z).x1)(x0),
        lambda: cfm_jax.EmpiricalMeasure(Z.at[0, 0].set(jnp.nan)),
    ):
        with pytest.raises(eqx.EquinoxRuntimeError):
            jax.block_until_ready(call())


def test_a_compiled_entry_point_inside_another_joins_its_checks():
    """The inner call's checks become the outer program's data (no host callback), raised after it."""
    outer = cfm_jax.compiled(lambda x: cfm_jax.forward(MODEL, x, Z).x1)
    text = cfm_jax.compiled(lambda x: cfm_jax.forward(MODEL, x, Z).x1).lower(X0).as_text()  # pyright: ignore[reportFunctionMemberAccess]
    assert "callback" not in text
    with pytest.raises(eqx.EquinoxRuntimeError, match="`x0`"):
        outer(BAD["x0"][1])


def test_a_users_step_has_no_host_callback_and_still_checks():
    """``cfm_jax.compiled`` of a value-and-grad step through ``forward`` holds no host callback (the
    persistent cache can store it), where the same step under ``eqx.filter_jit`` has them."""

    def step(model, x0):
        return eqx.filter_value_and_grad(lambda m: _loss(m, x0, Z, None, Y))(model)

    ours = cfm_jax.compiled(step).lower(MODEL, X0).as_text()  # pyright: ignore[reportFunctionMemberAccess]
    theirs = eqx.filter_jit(step).lower(MODEL, X0).as_text()
    assert "callback" not in ours
    assert "callback" in theirs
    value, grads = cfm_jax.compiled(step)(MODEL, X0)
    assert _finite((value, grads))
    with pytest.raises(eqx.EquinoxRuntimeError, match="`x0`"):
        cfm_jax.compiled(step)(MODEL, BAD["x0"][1])


def test_checks_under_a_callers_checkify_are_host_callbacks():
    """A caller's own ``checkify.checkify`` is a transformation like ``jit``: the library's checks
    are host callbacks there, raising naming the argument when the program runs (not ``err``'s
    functional checks); the same function in ``cfm_jax.compiled`` holds no host callback."""
    fn = jax.grad(lambda x: _loss(MODEL, x, Z, None, Y))
    with pytest.raises(Exception, match="`x0` contains non-finite values"):
        jax.block_until_ready(checkify.checkify(jax.jit(fn))(BAD["x0"][1]))
    err, _ = checkify.checkify(jax.jit(fn))(X0)
    assert err.get() is None
    assert "callback" in jax.jit(checkify.checkify(fn)).lower(X0).as_text()
    assert "callback" not in cfm_jax.compiled(fn).lower(X0).as_text()  # pyright: ignore[reportFunctionMemberAccess]


def test_a_check_inside_the_callers_scan_inside_compiled_is_data():
    text = cfm_jax.compiled(_scan).lower(MODEL, X0, Z, None, Y).as_text()  # pyright: ignore[reportFunctionMemberAccess]
    assert "callback" not in text
    with pytest.raises(eqx.EquinoxRuntimeError, match="`x0`"):
        cfm_jax.compiled(_scan)(*BAD["x0"])


def test_a_check_tied_to_the_gradient_fails_where_only_the_gradient_is_kept():
    """The host-callback path guards the tangent too: remove that and ``jit(grad)`` of a loss linear
    in the checked value (its primal never needed) returns a gradient silently."""
    fn = jax.jit(jax.grad(lambda x: _loss(MODEL, x, Z, None, Y)))
    with pytest.raises(Exception, match="`x0`"):
        jax.block_until_ready(fn(BAD["x0"][1]))
    checked = compiled(lambda x: check(x, ~jnp.all(jnp.isfinite(x)), MESSAGE))  # the identity, checked
    linear = jax.jit(jax.grad(lambda x: jnp.sum(3.0 * checked(x))))  # the primal is not needed
    np.testing.assert_array_equal(linear(jnp.ones(2)), [3.0, 3.0])
    with pytest.raises(Exception, match="non-finite"):
        jax.block_until_ready(linear(jnp.array([1.0, jnp.nan])))


def test_check_eagerly_outside_any_program():
    x = jnp.ones(3)
    assert _validation.check(x, jnp.array(False), "unused") is x
    with pytest.raises(eqx.EquinoxRuntimeError, match="the message"):
        _validation.check(x, jnp.array([False, True]), "the message")


def test_messages_with_braces_survive_checkify():
    fn = cfm_jax.compiled(lambda x: _validation.check(x, x < 0, "`x` must be in {0, 1}"))
    with pytest.raises(eqx.EquinoxRuntimeError, match=re.escape("`x` must be in {0, 1}")):
        fn(jnp.array(-1.0))


ON_ERROR = textwrap.dedent(
    """
    import jax, jax.numpy as jnp
    import cfm_jax
    model = cfm_jax.Transformer.init(jax.random.key(0), dim=2, heads=1, mlp_width=2, layers=1)
    x0 = jnp.array([[jnp.nan, 0.0]])
    context = jax.random.normal(jax.random.key(1), (4, 2))
    x1 = cfm_jax.forward(model, x0, context).x1
    g = jax.jit(jax.grad(lambda x: jnp.sum(cfm_jax.forward(model, x, context).x1)))(x0)
    print("RESULT", bool(jnp.all(jnp.isnan(x1))), bool(jnp.all(jnp.isnan(g))))
    """
)


@pytest.mark.slow  # a fresh interpreter: equinox reads EQX_ON_ERROR at import
def test_eqx_on_error_nan_gives_nan_without_raising():
    env = {**os.environ, "EQX_ON_ERROR": "nan"}
    out = subprocess.run([sys.executable, "-c", ON_ERROR], capture_output=True, text=True, env=env, check=True)
    assert "RESULT True True" in out.stdout, out.stdout + out.stderr


def test_eqx_on_error_nan_at_top_level(monkeypatch):
    monkeypatch.setenv("EQX_ON_ERROR", "nan")
    x1 = cfm_jax.forward(MODEL, BAD["x0"][1], Z).x1
    assert np.all(np.isnan(np.asarray(x1)))
    monkeypatch.setenv("EQX_ON_ERROR", "raise")
    with pytest.raises(eqx.EquinoxRuntimeError):
        cfm_jax.forward(MODEL, BAD["x0"][1], Z)


IMPORTED_INSIDE_JIT = textwrap.dedent(
    """
    import jax, jax.numpy as jnp
    import cfm_jax

    x0 = jnp.array([[jnp.nan, 0.0]])
    context = jax.random.normal(jax.random.key(1), (4, 2))

    @jax.jit
    def first_use(x):  # the package's modules are imported here, inside a trace
        model = cfm_jax.Transformer.init(jax.random.key(0), dim=2, heads=1, mlp_width=2, layers=1)
        return cfm_jax.forward(model, x, context).x1

    first_use(jnp.zeros((1, 2)))
    model = cfm_jax.Transformer.init(jax.random.key(0), dim=2, heads=1, mlp_width=2, layers=1)

    @cfm_jax.compiled
    def scanned(x):  # at top level: the check inside the scan is data, raised after the call
        body = lambda c, _: (c + cfm_jax.forward(model, x, context).x1.sum(), None)
        return jax.lax.scan(body, 0.0, None, length=2)[0]

    try:
        scanned(x0)
    except Exception as e:
        print("RESULT", type(e).__name__)
    """
)


@pytest.mark.slow  # a fresh interpreter, where the package is first used inside a jit
def test_the_top_level_is_known_when_the_package_is_first_used_inside_a_jit():
    out = subprocess.run([sys.executable, "-c", IMPORTED_INSIDE_JIT], capture_output=True, text=True, check=True)
    assert "RESULT EquinoxRuntimeError" in out.stdout, out.stdout + out.stderr


def _batched_loop(x):
    """A vmap of a while loop, which checkify refuses, after a check of ``x``."""
    x = check(x, ~jnp.all(jnp.isfinite(x)), MESSAGE)
    return jax.vmap(lambda v: jax.lax.while_loop(lambda c: c < v, lambda c: c + 1.0, 0.0))(x)


def test_a_program_checkify_cannot_rewrite_is_declared_where_it_is_defined():
    """checkify refuses a vmap of a while loop: such a function is declared
    ``compiled(fn, checkify=False)``, runs with its checks as host callbacks, and refuses, naming
    itself, to run inside another compiled program (whose checkify would refuse it); undeclared, the
    call is checkify's ``ValueError``. The checks of other functions stay data."""
    declared = cfm_jax.compiled(_batched_loop, checkify=False)
    np.testing.assert_array_equal(declared(jnp.arange(3.0)), [0.0, 1.0, 2.0])
    with pytest.raises(eqx.EquinoxRuntimeError, match="non-finite"):
        declared(jnp.array([1.0, jnp.nan]))
    assert "callback" in declared.lower(jnp.arange(3.0)).as_text()  # pyright: ignore[reportFunctionMemberAccess]
    with pytest.raises(ValueError, match="_batched_loop.* checkify=False"):
        cfm_jax.compiled(lambda x: declared(x) + 1)(jnp.arange(3.0))
    with pytest.raises(ValueError):
        cfm_jax.compiled(_batched_loop)(jnp.arange(3.0))
    assert "callback" not in _double.lower(jnp.ones(2)).as_text()  # pyright: ignore[reportFunctionMemberAccess]


class _Opaque(_validation.AbstractRewritable):
    """A strategy whose computation checkify cannot rewrite (as a kernel on a mesh)."""

    rewrites: bool = eqx.field(static=True)

    def checkify_rewrites(self) -> bool:
        return self.rewrites


@cfm_jax.compiled
def _with_strategy(strategy, x):
    return check(x, ~jnp.all(jnp.isfinite(x)), MESSAGE) * 2


def test_an_argument_checkify_cannot_rewrite_makes_the_call_host_checked():
    """A strategy among the arguments that says checkify cannot rewrite it (a Pallas kernel on a mesh,
    run inside shard_map) gives the call host-callback checks at top level, still raising; inside
    another compiled program it is refused naming the fix. One that can keeps the checks as data."""
    opaque, plain = _Opaque(False), _Opaque(True)
    np.testing.assert_array_equal(_with_strategy(opaque, jnp.ones(2)), [2.0, 2.0])
    with pytest.raises(eqx.EquinoxRuntimeError, match="non-finite"):
        _with_strategy(opaque, jnp.array([1.0, jnp.nan]))
    lower = _with_strategy.lower  # pyright: ignore[reportFunctionMemberAccess]
    assert "callback" in lower(opaque, jnp.ones(2)).as_text()
    assert "callback" not in lower(plain, jnp.ones(2)).as_text()
    with pytest.raises(ValueError, match="_with_strategy.*pass the model.* checkify=False"):
        cfm_jax.compiled(lambda x: _with_strategy(opaque, x) + 1)(jnp.ones(2))
    # given as an argument of the enclosing step, the step itself is host-checked and runs
    step = cfm_jax.compiled(lambda s, x: _with_strategy(s, x) + 1)
    np.testing.assert_array_equal(step(opaque, jnp.ones(2)), [3.0, 3.0])
    with pytest.raises(eqx.EquinoxRuntimeError, match="non-finite"):
        step(opaque, jnp.array([1.0, jnp.nan]))


def test_coupled_deviations_with_sinkhorn_still_checks():
    """``chaos.coupled_deviations`` with Sinkhorn's W1 (batched over depths: declared
    ``checkify=False``): its clean run gives finite values and a bad value still raises naming it."""
    from cfm_jax import chaos

    model = cfm_jax.Transformer.init(KEY_M, dim=2, heads=1, mlp_width=4, layers=2)
    ref, x0 = jax.random.normal(KEY_Z, (9, 2)), jax.random.normal(KEY_X, (3, 2))
    out = chaos.coupled_deviations(model, x0, ref[:5], ref, w1_size=4, adjoint=False)
    assert _finite(out)
    with pytest.raises(eqx.EquinoxRuntimeError, match="`x0`"):
        chaos.coupled_deviations(model, x0.at[0, 0].set(jnp.nan), ref[:5], ref, w1_size=4, adjoint=False)
