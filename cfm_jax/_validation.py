"""Input checks shared by the public API: clear errors at the boundary, not NaNs inside XLA.

Values are checked inside compiled code with ``eqx.error_if``. What a user sees when one fails:

- eagerly or under ``eqx.filter_jit`` (every public entry point is compiled with it,
  :func:`compiled`): ``equinox.EquinoxRuntimeError`` with the message, which names the argument;
- under a plain ``jax.jit`` (no Equinox wrapper around the call to re-raise it): the same message
  inside ``jax.errors.JaxRuntimeError: INTERNAL: CpuCallback error …``, after JAX's own frames,
  ending with Equinox's advice to wrap the program in ``eqx.filter_jit``. JAX also logs the failed
  callback's traceback before raising; that log only repeats the exception that follows, so it is
  filtered out for Equinox's checks (:class:`_RepeatedCheckLog`, as ``eqx.filter_jit`` does for the
  duration of its calls).
"""

from __future__ import annotations

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


def compiled(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``eqx.filter_jit(fn)``: arrays traced, everything else static, one program per structure.

    Numpy integer and bool scalars among the top-level arguments are turned into Python values
    first, so that ``steps=np.int64(4)`` is static like ``steps=4`` (``eqx.filter_jit`` traces every
    numpy value).
    """
    jitted = eqx.filter_jit(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return jitted(*map(_static, args), **{k: _static(v) for k, v in kwargs.items()})  # pyright: ignore[reportCallIssue]

    return cast(Callable[_P, _R], call)


def is_concrete(x) -> bool:
    """True when `x` holds actual values (not a tracer inside jit/vmap/grad)."""
    return not isinstance(x, Tracer)


def check_finite(name: str, x) -> None:
    """Raise `ValueError` naming `name` if a concrete array has nan/inf entries."""
    if is_concrete(x) and not bool(np.isfinite(np.asarray(x)).all()):
        raise ValueError(f"`{name}` contains non-finite values (nan/inf).")


def finite(name: str, x):
    """``x`` with a check, inside compiled code (``eqx.error_if``), that its entries are finite; the
    error names ``name``."""
    return eqx.error_if(x, ~jnp.all(jnp.isfinite(x)), f"`{name}` contains non-finite values (nan/inf).")


def finite_params(model):
    """``model`` with a check, inside compiled code, that its floating parameters are finite."""
    leaves = jax.tree.leaves(eqx.filter(model, eqx.is_inexact_array))
    ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in leaves])) if leaves else jnp.array(True)
    return eqx.error_if(model, ~ok, "`model` parameters contain non-finite values (nan/inf).")


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
