"""Input checks shared by the public API: clear errors at the boundary, never a silent NaN.

Types, shapes and options are checked in Python when a function is traced (``ValueError`` or
``TypeError`` naming the argument). Values (finite tokens and parameters, weights that sum to one,
a positive definite covariance, a solve that did not fail) are checked by :func:`check`; a failed
one raises ``equinox.EquinoxRuntimeError`` naming the argument. Where it is traced decides how:

- on known values (an eager call, a constructor given arrays): raised at once;
- in a program :func:`compiled` traces (an entry point at top level — no argument and no new array
  is a tracer — or a user's step in ``cfm_jax.compiled``): a functional ``checkify.check``, through
  every ``scan``, ``vmap``, ``grad`` and nested entry point; the first failed one is raised after the
  call, from the caller's line, and the program holds no host callback (the persistent compilation
  cache stores it);
- anywhere else (a caller's own ``jit``, ``vmap``, ``grad``, ``scan``, ``checkify``): an
  ``eqx.error_if`` host callback tied to the result and, through the tangent, to its gradient, so
  ``jax.jit(jax.grad(loss))`` raises even when only the gradient is kept (a plain ``jax.jit`` raises
  ``jax.errors.JaxRuntimeError`` carrying the message, logged first on its own line).

A function checkify cannot rewrite (a ``vmap`` of a while loop) is declared where it is defined,
``compiled(fn, checkify=False)``. ``EQX_ON_ERROR`` is honoured everywhere: ``raise`` (default),
``nan`` (the result, or gradient, filled with NaN), ``off``, ``breakpoint`` (where a host callback
runs; raised otherwise). Advice that depends on values travels beside the result (:func:`notice`)
and is given after a top-level call.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import os
from collections.abc import Callable
from typing import ParamSpec, TypeVar, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jax.experimental import checkify as jax_checkify

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")


class _CheckSentence(logging.Filter):
    """JAX's log of a callback an ``eqx.error_if`` check failed, made the check's sentence alone
    (under a plain ``jax.jit`` the error raised next opens with JAX's line and a traceback)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if type(error).__module__.startswith("equinox"):  # the record of a failed check's callback
            record.msg, record.args = "%s", (str(error).split("\n\n\n")[0],)  # equinox's advice follows
            record.exc_info = record.exc_text = None
        return True


# the logger of the module that runs a pure callback (tests/test_environment.py names it)
logging.getLogger(jax.pure_callback.__module__).addFilter(_CheckSentence())

#: True while :func:`compiled` traces a program under checkify: a check there is functional
_FUNCTIONAL: contextvars.ContextVar[bool] = contextvars.ContextVar("functional", default=False)
#: the notices of that program: ``(values, advise)`` pairs, None outside one
_NOTICES: contextvars.ContextVar[list[tuple[object, Callable]] | None] = contextvars.ContextVar("notices", default=None)

#: the suffix checkify adds to a failed check's message (left on it should checkify change it)
_CHECKIFY_SUFFIX = " (`check` failed)"


def _on_error() -> str:
    """What a failed check does: equinox's ``EQX_ON_ERROR`` (raise, nan, off, breakpoint)."""
    return os.environ.get("EQX_ON_ERROR", "raise")


def _nan_like(x):
    """``x`` filled with NaN (inexact), the largest value (integers) or True, as ``EQX_ON_ERROR=nan``."""
    if not eqx.is_array(x):
        return x
    if jnp.issubdtype(x.dtype, jnp.inexact):
        return jnp.full_like(x, jnp.nan)
    if jnp.issubdtype(x.dtype, jnp.integer):
        return jnp.full_like(x, jnp.iinfo(x.dtype).max)
    return jnp.ones_like(x) if x.dtype == bool else x


def _fail(out, message: str):
    """A check failed where its outcome is known: raise, or ``EQX_ON_ERROR``'s answer."""
    on_error = _on_error()
    if on_error == "off":
        return out
    if on_error == "nan":
        return jax.tree.map(_nan_like, out)
    raise eqx.EquinoxRuntimeError(message)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _tied(x, pred, message: str):
    """``eqx.error_if(x, pred, message)`` whose check also guards the tangent, so a caller that keeps
    only a gradient (``jax.jit(jax.grad(f))``) still runs it: the tangent (and so, transposed, the
    cotangent) is multiplied by a checked one."""
    return eqx.error_if(x, pred, message)


@_tied.defjvp
def _tied_jvp(message, primals, tangents):
    x, pred = primals
    one = eqx.error_if(jnp.ones(()), pred, message)
    return _tied(x, pred, message), jax.tree.map(lambda t: t * one.astype(t.dtype), tangents[0])


def check(x: _T, failed, message: str) -> _T:
    """``x``, with the value check ``failed`` (a boolean array: any True fails) raising ``message``:
    at once on known values, a functional check inside a program :func:`compiled` traces, else a
    host callback tied to ``x`` and its gradient (module docstring)."""
    if _on_error() == "off":
        return x
    if not isinstance(failed, Tracer):  # known now (given values, or decided by shapes)
        return _fail(x, message) if bool(np.any(np.asarray(failed))) else x
    if _FUNCTIONAL.get():
        jax_checkify.check(~jnp.any(failed), message.replace("{", "{{").replace("}", "}}"))  # a format string
        return x
    pred = jnp.any(failed)
    inexact, rest = eqx.partition(x, eqx.is_inexact_array)
    if jax.tree.leaves(inexact):
        inexact = _tied(inexact, pred, message)
    if jax.tree.leaves(rest):  # integer and boolean arrays: no tangent to guard
        rest = eqx.error_if(rest, pred, message)
    return eqx.combine(inexact, rest)


def notice(values, advise: Callable) -> None:
    """Call ``advise(values)`` on the host after the top-level compiled call that traces this line,
    with the values ``values`` (a pytree of arrays) have there; inside a caller's ``jit``/``vmap``/
    ``grad`` there are none and it is not called. ``advise`` is static: the same function for every
    trace of one structure (a module-level function, not a closure over traced values). Outside a
    compiled program it is called at once if the values are concrete."""
    notices = _NOTICES.get()
    if notices is None:
        _advise(values, advise)
    else:
        notices.append((values, advise))


def _advise(values, advise: Callable) -> None:
    if all(is_concrete(a) for a in jax.tree.leaves(values)):
        advise(values)


def _tracing(fn, functional: bool):
    """``fn`` traced with its checks functional, returning ``(out, (values, advice))`` (its notices
    beside it), or as host callbacks, returning ``out``."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        notices: list[tuple[object, Callable]] | None = [] if functional else None
        tokens = _FUNCTIONAL.set(functional), _NOTICES.set(notices)
        try:
            out = fn(*args, **kwargs)
        finally:
            _FUNCTIONAL.reset(tokens[0])
            _NOTICES.reset(tokens[1])
        return out if notices is None else (out, (tuple(v for v, _ in notices), tuple(a for _, a in notices)))

    return run


def _checkified(program):
    """``program`` (returning ``(out, notices)``) under checkify, returning ``(error, out, notices)``.
    Arrays pass through checkify; the rest (static fields, the advice functions) is carried around."""

    @functools.wraps(program)
    def run(*args, **kwargs):
        static: list = []

        def arrays_only():
            dynamic, rest = eqx.partition(program(*args, **kwargs), eqx.is_array)
            static.append(rest)
            return dynamic

        error, dynamic = jax_checkify.checkify(arrays_only)()
        return error, *eqx.combine(dynamic, static[0])

    return run


def _static(value):
    """A numpy integer or bool scalar as the Python value (``eqx.filter_jit`` would trace it)."""
    return bool(value) if isinstance(value, np.bool_) else int(value) if isinstance(value, np.integer) else value


def _traced(tree) -> bool:
    """Whether a transformation traces this call: an argument is a tracer (``vmap``, ``grad``), or a
    new array is one (``jit``, ``scan``, ``checkify``)."""
    return any(isinstance(leaf, Tracer) for leaf in jax.tree.leaves(tree)) or isinstance(jnp.zeros(()), Tracer)


class AbstractRewritable(eqx.Module):
    """A strategy module (an attention kernel) that says whether ``checkify`` can rewrite what it
    computes: one run inside ``shard_map`` cannot be. A :func:`compiled` call given one that cannot,
    anywhere in its arguments, is as ``compiled(..., checkify=False)``: host callbacks at top level."""

    def checkify_rewrites(self) -> bool:
        return True


def _rewritable(tree) -> bool:
    """Whether checkify can rewrite a program of these arguments (``AbstractRewritable``)."""
    found = jax.tree.leaves(tree, is_leaf=lambda x: isinstance(x, AbstractRewritable))
    return all(m.checkify_rewrites() for m in found if isinstance(m, AbstractRewritable))


def compiled(fn: Callable[_P, _R], *, checkify: bool = True) -> Callable[_P, _R]:
    """``eqx.filter_jit(fn)`` whose value checks are data: arrays traced, everything else static, one
    program per structure; a failed check raised as ``equinox.EquinoxRuntimeError`` naming the
    argument after the call, then the library's advice that depends on values.

    The decorator of every entry point, public for a user's own step: the checks of the library's
    functions called inside (through ``scan``, ``vmap``, ``grad``) become the step's data, with no
    host callback, so the persistent compilation cache stores it. Inside another ``compiled``
    function its checks join the enclosing ones; inside a caller's own transformation they are host
    callbacks tied to the result and its gradient. ``checkify=False`` declares a function checkify
    cannot rewrite (a ``vmap`` of a while loop): host callbacks at top level too, and a
    ``ValueError`` inside another compiled function; so does an argument that says checkify cannot
    rewrite it (an :class:`~cfm_jax.AbstractAttentionKernel` on a mesh). NumPy integer and bool
    scalars become Python values (``steps=np.int64(4)`` is static like ``steps=4``);
    ``step.lower(*args, **kwargs)`` lowers the program a top-level call runs.

    Example: ``step = cfm_jax.compiled(lambda model, x0, context, y: cfm_jax.loss_and_grad(model, x0,
    context, y))``.
    """
    inner = eqx.filter_jit(_tracing(fn, functional=True))  # one trace of fn, at top level and nested alike
    top = eqx.filter_jit(_checkified(inner))
    hosted = eqx.filter_jit(_tracing(fn, functional=False))  # in a caller's transformation, or checkify=False

    @functools.wraps(fn)
    def call(*args, **kwargs):
        args, kwargs = tuple(map(_static, args)), {k: _static(v) for k, v in kwargs.items()}
        rewritable = checkify and _rewritable((args, kwargs))
        if _FUNCTIONAL.get():  # inside another compiled program: the checks join its own
            if not rewritable:
                raise ValueError(
                    f"`{call.__qualname__}` runs a program checkify cannot rewrite (a vmap of a while loop, "
                    "a kernel inside shard_map): call it outside `cfm_jax.compiled`, pass the model to the "
                    "enclosing function as an argument, or declare it `cfm_jax.compiled(..., checkify=False)`."
                )
            return inner(*args, **kwargs)[0]  # pyright: ignore[reportCallIssue, reportIndexIssue]
        if not rewritable or _traced((args, kwargs)):
            return hosted(*args, **kwargs)  # pyright: ignore[reportCallIssue]
        error, out, notices = top(*args, **kwargs)  # pyright: ignore[reportCallIssue]
        text = error.get()
        if text is not None:
            out = _fail(out, text.removesuffix(_CHECKIFY_SUFFIX))
        for values, advise in zip(*notices, strict=True):
            _advise(values, advise)
        return out

    def lower(*args, **kwargs):
        args, kwargs = tuple(map(_static, args)), {k: _static(v) for k, v in kwargs.items()}
        return (top if checkify and _rewritable((args, kwargs)) else hosted).lower(*args, **kwargs)

    call.lower = lower  # pyright: ignore[reportAttributeAccessIssue]
    return cast(Callable[_P, _R], call)


def is_concrete(x) -> bool:
    return not isinstance(x, Tracer)  # actual values, not a tracer inside jit/vmap/grad
