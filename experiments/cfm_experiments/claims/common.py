"""What the claims parts share: their common options, the configuration of one row, row selection, and
the sizes grouped into compiled programs."""

from __future__ import annotations

import functools
import numbers

import jax.numpy as jnp

from cfm_jax import compiled
from cfm_jax.chaos import size_buckets

from ..declarations.claims import LAYERS, NS, SEEDS


def buckets(sizes, shared_up_to: int) -> list[list[int]]:
    """The sizes grouped for one compiled program each: :func:`cfm_jax.chaos.size_buckets` (a group
    spans at most a factor 4), every size of a group reaching above ``shared_up_to`` alone (there a
    size's own cost dominates what sharing a padded program saves)."""
    out: list[list[int]] = []
    for b in size_buckets(sizes):
        out += [b] if b[-1] <= shared_up_to else [[n] for n in b]
    return out


def checked_jit(fn, static_argnames: tuple[str, ...] = ()):
    """``jax.jit(fn, static_argnames=...)`` whose library value checks are data the program returns
    (``cfm_jax.compiled``: no host callback, so the persistent cache stores it, and a failed check is
    raised after the call). Python numbers outside ``static_argnames`` are traced as ``jax.jit``
    traces them (weakly typed arrays), so one program serves every value, not one per number."""
    program = compiled(fn)

    def traced(name, value):
        if name in static_argnames or isinstance(value, bool) or not isinstance(value, numbers.Number):
            return value
        return jnp.asarray(value)  # a Python number: weakly typed, as jax.jit makes it

    def arguments(args, kwargs):
        return tuple(traced("", a) for a in args), {k: traced(k, v) for k, v in kwargs.items()}

    @functools.wraps(fn)
    def call(*args, **kwargs):
        args, kwargs = arguments(args, kwargs)
        return program(*args, **kwargs)

    def lower(*args, **kwargs):  # the program a call runs (its checks as data)
        args, kwargs = arguments(args, kwargs)
        return program.lower(*args, **kwargs)  # pyright: ignore[reportFunctionMemberAccess]

    call.lower = lower  # pyright: ignore[reportAttributeAccessIssue]
    return call


def base_config(seed: int, **kw) -> dict:
    """One row's configuration: a Gaussian context of scale 1, d = 4, one head, no MLP, ‖Q‖‖K‖ = 1,
    ‖V‖ = 1, with ``kw`` on top (``ns`` as a list)."""
    cfg: dict = dict(law="gaussian", dim=4, heads=1, width=0, layers=4, scale=1.0, qk=1.0, v=1.0, seed=seed)
    cfg.update(kw)
    cfg["ns"] = [int(n) for n in cfg["ns"]]
    return cfg


def select(rows: list[dict], **match) -> list[dict]:
    """The rows whose configuration has every ``key=value`` of ``match``."""
    return [r for r in rows if all(r["config"].get(k) == v for k, v in match.items())]


def dim_of(row) -> int:
    return int(row["config"]["dim"])


__all__ = ["LAYERS", "NS", "SEEDS", "base_config", "buckets", "checked_jit", "dim_of", "select"]
