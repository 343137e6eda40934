"""Static argument checks: types and options, refused in Python when a call is traced, with a
``ValueError`` or ``TypeError`` naming the argument (values are the one value check's,
:mod:`cfm_jax._validation`)."""

from __future__ import annotations

import numbers

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from ._validation import check, is_concrete


def as_array(name: str, x) -> jax.Array:
    """``jnp.asarray(x)``; what is not an array of numbers (a string, None, a dict…) raises
    ``TypeError`` naming ``name`` rather than JAX's conversion error."""
    try:
        return jnp.asarray(x)
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must be an array of numbers, got {type(x).__name__} {x!r:.60}.") from None


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


def python_scalar(value):
    """A NumPy scalar (``np.int64(4)``, ``np.float64(0.5)``) as the Python number it holds; anything
    else unchanged. The converter of the static numeric fields: equinox warns when an array is set
    as static, and counts a NumPy scalar as one, so a user's ``np.int64`` would warn."""
    return value.item() if isinstance(value, np.generic) else value


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


def real_number(name: str, value, *, positive: bool = False):
    """``value``, a real scalar (a traced one too): ``ValueError`` naming ``name`` for anything else;
    its value finite (and > 0 with ``positive``) checked by the one value check and returned with it,
    so that under a caller's jit the check travels with the value."""
    concrete = is_concrete(value)
    try:  # a concrete value in NumPy: no eager program per call, no tracer made of a constant in a jit
        a = np.asarray(value) if concrete else value
    except (TypeError, ValueError):
        a = np.asarray(None)
    if np.ndim(a) or np.dtype(a.dtype).kind not in "iuf":
        raise ValueError(f"`{name}` must be a real number{' > 0' if positive else ''}, got {value!r:.60}.")
    xp = np if concrete else jnp
    ok = xp.isfinite(a) & (a > 0) if positive else xp.isfinite(a)
    message = f"`{name}` must be finite and > 0." if positive else f"`{name}` must be finite, got a non-finite value."
    return check(value, ~ok, message)


#: the ways a solve fails that diffrax names from 0.6.2 on (diffrax's own message raised for each);
#: any other unsuccessful result (an implicit solver's, a later diffrax's) has one message of its own
_SOLVE_FAILURES = (diffrax.RESULTS.max_steps_reached, diffrax.RESULTS.dt_min_reached, diffrax.RESULTS.event_occurred)


def check_solved(x, result, prefix: str = ""):
    """``x`` with a check (:func:`check`) that the solve reporting ``result`` (``diffrax.RESULTS``)
    succeeded: one check per way diffrax names a failure, raising diffrax's message after ``prefix``."""
    result = jax.lax.stop_gradient(result)  # an integer code, not differentiated
    other = result != diffrax.RESULTS.successful
    for item in _SOLVE_FAILURES:
        x = check(x, result == item, prefix + str(diffrax.RESULTS[item]))
        other = other & (result != item)
    return check(x, other, prefix + "The solve did not succeed: `throw=False` returns its `result`, which says why.")


def check_finite(name: str, x) -> None:
    """:func:`finite` now on a concrete array (a constructor given values); a traced one is left to its entry point."""
    if is_concrete(x):
        check(x, ~np.isfinite(np.asarray(x)).all(), f"`{name}` contains non-finite values (nan/inf).")


def finite(name: str, x):
    """``x`` with a check (:func:`check`) that its entries are finite, the error naming ``name``."""
    return check(x, ~jnp.all(jnp.isfinite(x)), f"`{name}` contains non-finite values (nan/inf).")


def finite_params(model):
    """``model`` with a check, inside compiled code (:func:`check`), that its floating parameters are finite."""
    leaves = jax.tree.leaves(eqx.filter(model, eqx.is_inexact_array))
    ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in leaves])) if leaves else jnp.array(True)
    return check(model, ~ok, "`model` parameters contain non-finite values (nan/inf).")
