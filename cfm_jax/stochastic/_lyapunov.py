"""Numerical top Lyapunov exponent of the stochastic flow, to check λ₁ = ½[(d−3)κ'(1) − (d−1)κ(1)].

Two estimators (``method=`` of :func:`estimate_lyapunov`), each a ``lax.scan`` over steps vmapped over
independent realisations:

* ``"benettin"`` (tangent method): push a tangent vector v through the Jacobian of every
  layer with ``jax.jvp`` (same layer key → same MLP weights), renormalise it each step and
  average log‖v‖. Works for the discrete model (and the features SDE); with attention on the
  tangent lives on the whole N-token configuration.
* ``"twin"`` (twin trajectories): a copy of the system at distance δ is driven by the *same*
  noise (for the exact SDE the field is sampled jointly at both configurations), its
  separation is measured and reset to δ after every step.

The estimate is the mean over realisations of (1/(T − t₀)) Σ log growth, with a Student-t CI.
The step-size bias is O(Δt) (the scheme's weak order): keep κ(1)Δt small. The vmapped estimator is
one compiled program (``eqx.filter_jit``) reused by every call with the same model structure, token
shape, number of realisations and options.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float, PRNGKeyArray

from .. import _random
from .._random import as_key
from .._validation import compiled
from ..stats import mean_ci
from ._model import AbstractSphereModel, _check_tokens, normalise

#: Estimator of the top exponent: tangent vectors via jvp, or twin trajectories.
LyapunovMethod = Literal["benettin", "twin"]


class LyapunovEstimate(NamedTuple):
    """Mean over realisations, CI half-width and the per-realisation estimates ``(R,)``."""

    estimate: float
    ci_half_width: float
    samples: np.ndarray


def _tangent(key, x):
    g = _random.normal(key, x.shape, x.dtype)
    g = g - jnp.sum(g * x, axis=-1, keepdims=True) * x
    return g / jnp.linalg.norm(g)


def _burn_steps(model, burn_in):
    if not 0.0 <= float(burn_in) < 1.0:
        raise ValueError(f"`burn_in` must be in [0, 1), got {burn_in!r}.")
    n0 = int(round(burn_in * model.num_steps))
    return n0, (model.num_steps - n0) * model.dt


def _benettin(model, x0, key, *, burn_in: float = 0.0):
    """One realisation of the tangent-method estimate from tokens ``x0: (N, d)``."""
    n0, span = _burn_steps(model, burn_in)
    k0, kp = jax.random.split(key)
    keys = jax.random.split(kp, model.num_steps)

    def body(carry, inp):
        x, v, acc = carry
        i, k = inp
        x1, v1 = jax.jvp(lambda y: model.step(y, k), (x,), (v,))
        nv = jnp.linalg.norm(v1)
        return (x1, v1 / nv, acc + jnp.where(i >= n0, jnp.log(nv), 0.0)), None

    init = (x0, _tangent(k0, x0), jnp.zeros((), x0.dtype))
    (_, _, acc), _ = jax.lax.scan(body, init, (jnp.arange(model.num_steps), keys))
    return acc / span


def _twin(model, x0, key, *, delta: float = 1e-6, burn_in: float = 0.0):
    """One realisation of the twin-trajectory estimate (``model.step_systems`` shares the noise)."""
    n0, span = _burn_steps(model, burn_in)
    k0, kp = jax.random.split(key)
    keys = jax.random.split(kp, model.num_steps)
    y0 = normalise(x0 + delta * _tangent(k0, x0))

    def body(carry, inp):
        x, y, d0, acc = carry
        i, k = inp
        x, y = model.step_systems(jnp.stack([x, y]), k)
        d1 = jnp.linalg.norm(y - x)
        acc = acc + jnp.where(i >= n0, jnp.log(d1 / d0), 0.0)
        y = normalise(x + (y - x) * (delta / d1))
        return (x, y, jnp.linalg.norm(y - x), acc), None

    init = (x0, y0, jnp.linalg.norm(y0 - x0), jnp.zeros((), x0.dtype))
    (_, _, _, acc), _ = jax.lax.scan(body, init, (jnp.arange(model.num_steps), keys))
    return acc / span


@compiled
def _samples(model, x0, keys, method: LyapunovMethod, delta: float, burn_in: float):
    """One estimate per key ``(R,)``: the compiled, vmapped estimator behind :func:`estimate_lyapunov`."""
    x0 = _check_tokens(x0)
    if method == "benettin":
        return jax.vmap(lambda k: _benettin(model, x0, k, burn_in=burn_in))(keys)
    return jax.vmap(lambda k: _twin(model, x0, k, delta=delta, burn_in=burn_in))(keys)


def estimate_lyapunov(
    model: AbstractSphereModel,
    key: PRNGKeyArray,
    x0: Float[ArrayLike, "N d"],
    *,
    method: LyapunovMethod = "benettin",
    realisations: int = 128,
    delta: float = 1e-6,
    burn_in: float = 0.0,
    level: float = 0.95,
) -> LyapunovEstimate:
    """Top Lyapunov exponent of ``model`` (discrete or SDE) over ``realisations`` runs.

    Args:
        method: ``"benettin"`` (tangent vectors via jvp) or ``"twin"`` (twin trajectories).
        x0: the start ``(N, d)`` shared by all realisations (N = 1: the noise flow alone).
        delta: twin separation (needs float64 for values below ~1e-3).
        burn_in: fraction of the steps discarded (transient to synchronisation with attention).
        level: confidence level of the Student-t interval.

    The estimator is compiled once per model structure, token shape, ``realisations``, ``method``,
    ``delta`` and ``burn_in``; later calls (other keys, tokens or model parameters) reuse it.
    """
    key = as_key(key, "key")
    if not isinstance(model, AbstractSphereModel):
        raise ValueError(f"`model` must be a StochasticTransformer or a SphereSDE, got {type(model).__name__}.")
    if method not in ("benettin", "twin"):
        raise ValueError(f"`method` must be 'benettin' or 'twin', got {method!r}.")
    if isinstance(realisations, bool) or int(realisations) != realisations or int(realisations) < 2:
        raise ValueError(f"`realisations` must be an integer >= 2, got {realisations!r}.")
    if method == "twin" and not (np.isfinite(float(delta)) and float(delta) > 0):
        raise ValueError(f"`delta` must be finite and > 0, got {delta!r}.")
    _burn_steps(model, burn_in)
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"`level` must be in (0, 1), got {level!r}.")
    keys = jax.random.split(key, int(realisations))
    samples = _samples(model, x0, keys, method, float(delta), float(burn_in))
    samples = np.asarray(samples, dtype=np.float64)
    mean, half = mean_ci(samples, level)
    return LyapunovEstimate(mean, half, samples)
