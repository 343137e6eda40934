"""Input checks shared by the public API: clear errors at the boundary, not NaNs inside XLA."""

from __future__ import annotations

import numbers

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer


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
