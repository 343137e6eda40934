"""Input checks shared by the public API: clear errors at the boundary, not NaNs inside XLA.

Types, shapes and options are checked in Python when a function is traced (``ValueError`` naming
the argument). Values — finite tokens and parameters, weights that sum to one, a covariance that is
positive definite, a solve that did not fail — can only be known inside the compiled program; they
are checked with :func:`check`, in one of two ways:

- **Called at top level** (eagerly, the usual case): every compiled public entry point
  (:func:`compiled`) returns, beside its result, one boolean per check of its program, and raises
  ``equinox.EquinoxRuntimeError`` with the first failed check's message after the call, in Python,
  from the caller's own line. The program holds no host callback, so JAX's persistent compilation
  cache stores it and a new process compiles it no more (the error-code design of
  ``jax.experimental.checkify``, for the checks this library makes).
- **Inside a caller's own transformation** (``jax.jit``, ``eqx.filter_jit``, ``vmap``, ``grad``,
  ``lax.scan``): the flags are traced values there, so they are attached to the result with
  ``eqx.branched_error_if``, a host callback that raises the same message when the caller's program
  runs — the only way a check can fail from inside a program it does not own. Under
  ``eqx.filter_jit`` that is an ``equinox.EquinoxRuntimeError``; under a plain ``jax.jit`` the message
  arrives inside ``jax.errors.JaxRuntimeError: INTERNAL: CpuCallback error …``, after JAX's own
  frames, ending with Equinox's advice to wrap the program in ``eqx.filter_jit``. JAX also logs the
  failed callback's traceback before raising; that log only repeats the exception that follows, so
  it is filtered out for Equinox's checks (:class:`_RepeatedCheckLog`, as ``eqx.filter_jit`` does for
  the duration of its calls).

``throw=False`` (where an entry point has it) leaves the checks out of the program altogether.

Advice that is not an error — a warning that depends on values, such as the heavy-tail regime of a
model at a Gaussian context — travels the same way (:func:`notice`): arrays returned beside the
result and a host function called with their values after a top-level call. Inside a caller's own
transformation there are no values to warn about and no warning is given (the diagnostic the warning
comes from can be called outside it).
"""

from __future__ import annotations

import contextvars
import functools
import logging
import numbers
from collections.abc import Callable
from typing import ParamSpec, TypeVar, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

_P = ParamSpec("_P")
_R = TypeVar("_R")


class _RepeatedCheckLog(logging.Filter):
    """Drops JAX's log of a host callback that failed with an ``eqx.error_if`` check: the same error is
    raised to the caller right after (with its message), so the log only adds a duplicate traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (
            record.getMessage() == "jax.pure_callback failed"
            and error is not None
            and type(error).__module__.startswith("equinox")
        )


logging.getLogger("jax._src.callback").addFilter(_RepeatedCheckLog())


def _static(value):
    """A numpy integer or bool scalar as the Python value (``eqx.filter_jit`` would trace it)."""
    if isinstance(value, np.bool_):
        return bool(value)
    return int(value) if isinstance(value, np.integer) else value


#: the checks of the program being traced by :func:`compiled`: ``(flag, message)`` pairs, a flag
#: True when the check failed; None outside such a trace (a check is then a host callback)
_CHECKS: contextvars.ContextVar[list[tuple[jax.Array, str]] | None] = contextvars.ContextVar("checks", default=None)


def check(x, failed, message: str):
    """``x``, with the value check ``failed`` (a boolean array: any True fails) raising ``message``.

    Inside a program traced by :func:`compiled` the flag becomes one of its outputs and the error is
    raised after the call (module docstring); anywhere else it is ``eqx.error_if``. Only for checks
    at the top level of such a program, not inside a ``lax.scan`` body or a ``vmap``/``grad`` it
    makes itself (a flag traced there could not leave it).
    """
    checks = _CHECKS.get()
    if checks is None:
        return eqx.error_if(x, failed, message)
    checks.append((jnp.any(failed), message))
    return x


#: the notices of the program being traced by :func:`compiled`: ``(values, advise)`` pairs
_NOTICES: contextvars.ContextVar[list[tuple[object, Callable]] | None] = contextvars.ContextVar("notices", default=None)


def notice(values, advise: Callable) -> None:
    """Call ``advise(values)`` on the host after the compiled call that traces this line, when
    ``values`` (a pytree of arrays) have values there: at top level, not inside a caller's
    ``jit``/``vmap``/``grad`` (module docstring). ``advise`` is static: the same function for every
    trace of one structure (a module-level function, not a closure over traced values). Outside a
    program traced by :func:`compiled` it is called at once if the values are concrete."""
    notices = _NOTICES.get()
    if notices is None:
        _advise(values, advise)
    else:
        notices.append((values, advise))


def _advise(values, advise: Callable) -> None:
    if all(is_concrete(a) for a in jax.tree.leaves(values)):
        advise(values)


def _flagged(fn):
    """``fn`` returning ``(out, (flags, messages), (values, advice))``: the flags of its checks
    ``(k,)`` and their messages, the values of its notices and their host functions (messages and
    functions static: the same for every trace of one structure)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        checks: list[tuple[jax.Array, str]] = []
        notices: list[tuple[object, Callable]] = []
        token, notice_token = _CHECKS.set(checks), _NOTICES.set(notices)
        try:
            out = fn(*args, **kwargs)
        finally:
            _CHECKS.reset(token)
            _NOTICES.reset(notice_token)
        flags = jnp.stack([f for f, _ in checks]) if checks else jnp.zeros((0,), bool)
        return out, (flags, tuple(m for _, m in checks)), (tuple(v for v, _ in notices), tuple(a for _, a in notices))

    return run


def raise_failed(out, flags, messages: tuple[str, ...]):
    """``out`` if no flag is set; the first failed check's message as ``equinox.EquinoxRuntimeError``
    when the flags have values (eagerly, and under an eager ``grad``), the same error attached to
    ``out`` (``eqx.branched_error_if``) when they are abstract (inside a caller's ``jit``/``vmap``)."""
    if not messages:
        return out
    if isinstance(flags, Tracer):
        try:
            flags = np.array([bool(f) for f in flags])  # a tracer that carries values (an eager grad)
        except jax.errors.ConcretizationTypeError:  # abstract: inside a caller's jit or vmap
            return eqx.branched_error_if(out, jnp.any(flags), jnp.argmax(flags), messages)
    failed = np.flatnonzero(np.asarray(flags))
    if failed.size:
        raise eqx.EquinoxRuntimeError(messages[int(failed[0])])
    return out


def compiled(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``eqx.filter_jit(fn)``: arrays traced, everything else static, one program per structure; its
    value checks (:func:`check`) returned as flags and raised after the call, its notices
    (:func:`notice`) given after that (module docstring).

    Numpy integer and bool scalars among the top-level arguments are turned into Python values
    first, so that ``steps=np.int64(4)`` is static like ``steps=4`` (``eqx.filter_jit`` traces every
    numpy value).
    """
    jitted = eqx.filter_jit(_flagged(fn))

    @functools.wraps(fn)
    def call(*args, **kwargs):
        out, (flags, messages), (values, advice) = jitted(
            *map(_static, args), **{k: _static(v) for k, v in kwargs.items()}
        )  # pyright: ignore[reportCallIssue]
        out = raise_failed(out, flags, messages)
        for value, advise in zip(values, advice, strict=True):
            _advise(value, advise)
        return out

    return cast(Callable[_P, _R], call)


def is_concrete(x) -> bool:
    """True when `x` holds actual values (not a tracer inside jit/vmap/grad)."""
    return not isinstance(x, Tracer)


def as_array(name: str, x) -> jax.Array:
    """``jnp.asarray(x)``; what is not an array of numbers (a string, None, a dict…) raises
    ``TypeError`` naming ``name`` rather than JAX's conversion error."""
    try:
        return jnp.asarray(x)
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must be an array of numbers, got {type(x).__name__} {x!r:.60}.") from None


def check_finite(name: str, x) -> None:
    """Raise `ValueError` naming `name` if a concrete array has nan/inf entries."""
    if is_concrete(x) and not bool(np.isfinite(np.asarray(x)).all()):
        raise ValueError(f"`{name}` contains non-finite values (nan/inf).")


def finite(name: str, x):
    """``x`` with a check, inside compiled code (:func:`check`), that its entries are finite; the
    error names ``name``."""
    return check(x, ~jnp.all(jnp.isfinite(x)), f"`{name}` contains non-finite values (nan/inf).")


def finite_params(model):
    """``model`` with a check, inside compiled code (:func:`check`), that its floating parameters are finite."""
    leaves = jax.tree.leaves(eqx.filter(model, eqx.is_inexact_array))
    ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in leaves])) if leaves else jnp.array(True)
    return check(model, ~ok, "`model` parameters contain non-finite values (nan/inf).")


def check_positive(name: str, value, *, allow_zero: bool = False) -> None:
    v = float(value)
    if not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"`{name}` must be finite and {bound}, got {value!r}.")


def check_save_every(save_every, steps: int, steps_name: str = "steps") -> int:
    """``save_every`` as an int: a positive integer dividing ``steps`` (ValueError naming it otherwise)."""
    if not isinstance(save_every, numbers.Integral) or isinstance(save_every, bool) or save_every < 1:
        raise ValueError(f"`save_every` must be a positive integer, got {save_every!r}.")
    if int(steps) % int(save_every):
        raise ValueError(f"`save_every` ({save_every}) must divide {steps_name} ({steps}).")
    return int(save_every)


def static_int(name: str, value) -> int:
    """A positive Python int from ``value`` (numpy integers too); a traced value gets the fix in its error."""
    if isinstance(value, Tracer):
        raise ValueError(
            f"`{name}` must be a static Python int, got a traced value: under jax.jit mark it static "
            f"(jax.jit(forward, static_argnames={name!r})) or use eqx.filter_jit, which does."
        )
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"`{name}` must be a positive int, got {value!r}.")
    return int(value)
