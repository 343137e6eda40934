"""What the parts of ``cfm-jax sync`` share: the ``--realisations`` option, a slope's text, and the
small compiled programs every part uses. The verdict rules of their claim lines are
:mod:`cfm_experiments.verdicts.sync`'s.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from cfm_jax.stats import Interval
from cfm_jax.stochastic import random_tokens

from ..declarations.sync import REALISATIONS


def interval_text(value: float, lo: float, hi: float, digits: int = 2) -> str:
    """``-0.60 [-0.66, -0.54]``, or the value alone when there is no interval."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{value:.{digits}f} (no interval)"
    return format(Interval(value, lo, hi), f".{digits}f")


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def random_starts(key, runs: int, n: int, d: int):
    """``(runs, n, d)``: one start of ``n`` i.i.d. uniform tokens on S^{d−1} per run (key split ``runs`` ways)."""
    return jax.vmap(lambda k: random_tokens(k, n, d))(jax.random.split(key, runs))


@jax.jit
def sup_rms(xs, ref):
    """``(R,)``: the sup over the saved times of the RMS token distance between ``xs`` and ``ref``,
    both ``(R, S, N, d)`` (runs, saved times, tokens, dimension)."""
    return jnp.max(jnp.sqrt(jnp.mean(jnp.sum((xs - ref) ** 2, -1), -1)), axis=1)


__all__ = [
    "REALISATIONS",
    "interval_text",
    "random_starts",
    "sup_rms",
]
