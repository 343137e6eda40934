"""The second paper's synchronisation theorem: the attention term ε of its Assumption 2.

Along the noiseless attention flow ẋ_i = P_{x_i} A_i(x) (A the attention drift), Assumption 2
asks dE_β/dt ≤ ε E_β for the paper's energy E_β = ½∬(e^β − e^{β<x,y>}) (``energy_deficit``).
Then (with λ̄' = ``NoiseKernel.energy_rate``) E[E_β(μ_t)] ≤ exp((ε + λ̄')t) E[E_β(μ_0)].

For Q = K = V = I (QᵀK = βI in the paper's normalisation) the flow is a gradient-like flow that
increases ∬e^{β<x,y>}: dE_β/dt = −β Σ_i (N/Z_i)|P_{x_i} Σ_j e^{β<x_i,x_j>} x_j|²/N² ≤ 0, so ε = 0.
In repulsive regimes (V = −I) ε > 0. :func:`attention_epsilon` returns the largest ratio
(dE_β/dt)/E_β observed at many configurations along noiseless flows: a *lower* estimate of the
smallest valid ε (the supremum may sit at configurations the search does not visit).
dE_β/dt is computed exactly (a ``jax.jvp`` of E_β along the velocity), not by differences.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from .. import _random
from .._arguments import check_positive
from .._random import as_key
from .._validation import compiled
from ._energies import energy_deficit
from ._model import SphereAttention, _finite_params, normalise


def attention_velocity(attention: SphereAttention, x: Float[Array, "N d"]) -> Float[Array, "N d"]:
    """$P_{x_i} A_i(x)$: the noiseless flow's velocity on the sphere."""
    a = attention(x)
    return a - jnp.sum(a * x, axis=-1, keepdims=True) * x


def energy_growth_ratio(attention: SphereAttention, x: Float[Array, "N d"], beta: float) -> tuple[Array, Array]:
    """``(dE_β/dt, E_β)`` at ``x`` along the noiseless attention flow (exact derivative via jvp)."""
    v = attention_velocity(attention, x)
    e, de = jax.jvp(lambda y: energy_deficit(y, beta), (x,), (v,))
    return de, e


@compiled
def _ratios(attention: SphereAttention, x0, beta: float, dt: float, steps: int, min_energy: float):
    """(dE_β/dt)/E_β along ``steps`` retracted Euler steps of the noiseless flow from each start
    ``x0: (S, n, d)``, ``(S, steps)`` (−inf where E_β <= ``min_energy``); compiled once per shape."""
    attention = _finite_params(attention, "attention")

    def one(x):
        def body(x, _):
            de, e = energy_growth_ratio(attention, x, beta)
            ratio = jnp.where(e > min_energy, de / jnp.where(e > min_energy, e, 1.0), -jnp.inf)
            return normalise(x + dt * attention_velocity(attention, x)), ratio

        return jax.lax.scan(body, x, None, length=steps)[1]

    return jax.vmap(one)(x0)


class EpsilonEstimate(NamedTuple):
    """Largest observed (dE_β/dt)/E_β (a lower estimate of ε) and the number of configurations used."""

    epsilon: float
    configurations: int


def attention_epsilon(
    key: PRNGKeyArray,
    attention: SphereAttention,
    n: int,
    d: int,
    *,
    beta: float | None = None,
    starts: int = 128,
    steps: int = 50,
    horizon: float = 5.0,
    min_energy: float = 1e-10,
    dtype=None,
) -> EpsilonEstimate:
    """Lower estimate of Assumption 2's ε for ``attention`` with ``n`` tokens on $S^{d−1}$.

    ``starts`` initial configurations (half uniform on the sphere, half concentrated around a
    random point at random log-uniform spreads 1e-3…1) are each followed for ``steps`` Euler
    steps (retracted to the sphere) of the noiseless flow over ``horizon``; the ratio
    $(dE_β/dt)/E_β$ is evaluated at every visited configuration with $E_β$ > ``min_energy``.
    ``beta`` defaults to ``attention.beta`` (the paper takes the energy's β from the attention).
    ``beta`` must be finite and > 0 (at β = 0 the energy is identically 0), ``horizon`` finite and
    > 0 (a negative one would follow the flow backwards), ``min_energy`` finite and >= 0; a
    ValueError when no visited configuration has $E_β$ > ``min_energy`` (no ratio to take).
    Non-finite attention matrices raise an error naming ``attention`` from inside the compiled search.
    """
    key = as_key(key, "key")
    if not isinstance(attention, SphereAttention):
        raise ValueError(f"`attention` must be a SphereAttention, got {type(attention).__name__}.")
    check_positive("beta", attention.beta if beta is None else beta)
    check_positive("horizon", horizon)
    check_positive("min_energy", min_energy, allow_zero=True)
    if int(n) < 2 or int(d) < 2:
        raise ValueError(f"`n` and `d` must be >= 2, got {n!r}, {d!r}.")
    if int(starts) < 1 or int(steps) < 1:
        raise ValueError(f"`starts` and `steps` must be >= 1, got {starts!r}, {steps!r}.")
    beta = attention.beta if beta is None else float(beta)
    dtype = dtype or jnp.result_type(float)
    dt = float(horizon) / int(steps)
    ku, kc, ks, kv = jax.random.split(key, 4)
    half = int(starts) // 2
    uniform = normalise(_random.normal(ku, (int(starts) - half, int(n), int(d)), dtype))
    centre = normalise(_random.normal(kc, (half, 1, int(d)), dtype))
    spread = 10.0 ** _random.uniform(ks, (half, 1, 1), dtype, -3.0, 0.0)
    clustered = normalise(centre + spread * _random.normal(kv, (half, int(n), int(d)), dtype))
    x0 = jnp.concatenate([uniform, clustered], axis=0)
    ratios = np.asarray(_ratios(attention, x0, beta, dt, int(steps), float(min_energy)), dtype=np.float64)
    used = int(np.isfinite(ratios).sum())
    if used == 0:
        raise ValueError(
            f"no visited configuration has E_β > `min_energy` ({min_energy}): lower `min_energy` or raise `beta`."
        )
    return EpsilonEstimate(float(ratios.max()), used)
