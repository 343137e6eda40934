"""The discrete stochastic transformer on the sphere (docs/theory.md): post-norm attention + random MLP.

One layer, Δt = T/L, tokens x_i ∈ S^{d−1}:

    x_i ← 𝒩(x_i + Δt · A_i(x))                    (attention: SA, USA or none)
    x_i ← 𝒩(x_i + √Δt · ξ_ℓ(x_i)),   ξ_ℓ(x) = m^{-1/2} A_ℓ σ(B_ℓ x + c_ℓ)

with fresh Gaussian (A_ℓ, B_ℓ, c_ℓ) in every layer shared by all tokens (the common noise).
All models here expose ``step(x, key)``, ``num_steps``, ``dt`` and ``horizon`` so that
:func:`simulate` (a ``lax.scan``) and the Lyapunov estimators treat the discrete model and the
limit SDE alike. The layer key is the only source of randomness: calling ``step`` twice with the
same key uses the same MLP weights, which is how systems of different sizes share one noise.

:func:`simulate` and :func:`simulate_many` are compiled (``eqx.filter_jit``): the model's arrays and
the tokens are traced, its Python settings and ``save_every`` are static, and a repeated call with
the same shapes reuses the program. Shapes raise ``ValueError`` when traced; the tokens' values
(finite, on the unit sphere) and the model's parameters (finite) are checked inside the program
(the library's one value check, ``cfm_jax._validation``), so the checks hold under a caller's
``jax.jit`` and ``vmap`` too (a sweep's own program wrapped in ``cfm_jax.compiled`` keeps them as
data, with no host callback).
"""

from __future__ import annotations

import abc
import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from .._arguments import as_array, check_save_every, python_scalar
from .._fields.attention import attention_means
from .._random import as_key
from .._validation import check, compiled
from ._kernels import NoiseKernel
from ._noise import _mlp_noise, _sample_mlp

_SPHERE_ATOL = 1e-5

#: Attention sublayer: softmax ("SA"), unnormalised ("USA") or none.
AttentionKind = Literal["SA", "USA", "none"]


def normalise(x: Float[Array, "... d"]) -> Float[Array, "... d"]:
    """Radial projection 𝒩(y) = y/‖y‖ of each row."""
    return x / jnp.linalg.norm(x, axis=-1, keepdims=True)


def random_tokens(key: PRNGKeyArray, n: int, d: int, dtype=None) -> Float[Array, "n d"]:
    """``n`` i.i.d. uniform points on $S^{d−1}$."""
    key = as_key(key, "key")
    if isinstance(n, bool) or int(n) != n or int(n) < 1 or isinstance(d, bool) or int(d) != d or int(d) < 1:
        raise ValueError(f"`n` and `d` must be integers >= 1, got {n!r}, {d!r}.")
    return normalise(jax.random.normal(key, (n, d), dtype or jnp.result_type(float)))


class SphereAttention(eqx.Module):
    """Attention drift $A_i(x)$ (docs/stochastic.md).

    ``kind`` (:data:`AttentionKind`):
    ``"SA"`` (softmax) $A_i = Σ_j e^{β⟨Q x_i, K x_j⟩} V x_j / Σ_k e^{β⟨Q x_i, K x_k⟩}$,
    ``"USA"`` (unnormalised) $A_i = (1/N) Σ_j e^{β⟨Q x_i, K x_j⟩} V x_j$, or ``"none"``.
    ``Q, K, V``: ``(d, d)`` or None (identity). SA reuses the core's log-sum-exp attention means.
    The paper's attention scaled by s ∈ {1, 0, −1} is ``V = s·I`` (s = 0: ``kind="none"``).
    """

    kind: AttentionKind = eqx.field(static=True, default="none")
    beta: float = eqx.field(static=True, converter=python_scalar, default=1.0)
    Q: Array | None = None
    K: Array | None = None
    V: Array | None = None

    def __check_init__(self):
        if self.kind not in ("SA", "USA", "none"):
            raise ValueError(f"`attention` must be 'SA', 'USA' or 'none', got {self.kind!r}.")
        if not (math.isfinite(self.beta) and self.beta >= 0):
            raise ValueError(f"`beta` must be finite and >= 0, got {self.beta!r}.")
        for name, M in (("Q", self.Q), ("K", self.K), ("V", self.V)):
            if M is not None and (np.ndim(M) != 2 or np.shape(M)[0] != np.shape(M)[1]):
                raise ValueError(f"`{name}` must be a square (d, d) matrix, got shape {np.shape(M)}.")

    @property
    def active(self) -> bool:
        return self.kind != "none"

    def __call__(self, x: Float[Array, "N d"]) -> Float[Array, "N d"]:
        if self.kind == "none":
            return jnp.zeros_like(x)
        d = x.shape[-1]
        eye = jnp.eye(d, dtype=x.dtype)
        Q = eye if self.Q is None else self.Q.astype(x.dtype)
        K = eye if self.K is None else self.K.astype(x.dtype)
        V = eye if self.V is None else self.V.astype(x.dtype)
        M = self.beta * Q.T @ K  # logit of (i, j) = x_i · M x_j
        if self.kind == "SA":
            n = x.shape[0]
            logw = jnp.full((n,), -math.log(n), x.dtype)
            return attention_means(x, x, logw, M[None])[0] @ V.T
        # USA: unnormalised; logits are at most β‖Q‖‖K‖ on the sphere, no overflow for sane β.
        weights = jnp.exp(x @ M @ x.T) / x.shape[0]
        return weights @ (x @ V.T)


def _check_model_arguments(kernel, attention, steps_name: str, steps, horizon) -> None:
    """ValueError naming the argument unless ``kernel``/``attention`` have the right types,
    ``steps`` >= 1 and ``horizon`` is finite and > 0 (shared by the discrete model and the SDE)."""
    if not isinstance(kernel, NoiseKernel):
        raise ValueError(f"`kernel` must be a NoiseKernel, got {type(kernel).__name__}.")
    if not isinstance(attention, SphereAttention):
        raise ValueError(f"`attention` must be a SphereAttention, got {type(attention).__name__}.")
    if int(steps) < 1:
        raise ValueError(f"`{steps_name}` must be >= 1, got {steps!r}.")
    if not (math.isfinite(float(horizon)) and float(horizon) > 0):
        raise ValueError(f"`horizon` must be finite and > 0, got {horizon!r}.")


class AbstractSphereModel(eqx.Module):
    """A stochastic model of N tokens on the sphere stepped by :func:`simulate` and the Lyapunov
    estimators: ``num_steps`` steps of size ``dt`` over ``[0, horizon]``, each drawing its randomness
    from one key. Systems stepped together by ``step_systems`` share that randomness (the common
    noise), which is how systems of different sizes, or twin copies, are coupled."""

    horizon: eqx.AbstractVar[float]

    @property
    @abc.abstractmethod
    def num_steps(self) -> int:
        """The number of steps (layers of the discrete model)."""

    @property
    @abc.abstractmethod
    def dt(self) -> float:
        """The step size ``horizon / num_steps``."""

    @abc.abstractmethod
    def step_systems(self, xs: Float[Array, "S N d"], key: PRNGKeyArray) -> Float[Array, "S N d"]:
        key = as_key(key, "key")
        """One step for S systems driven by the same randomness (``key``)."""

    def step(self, x: Float[Array, "N d"], key: PRNGKeyArray) -> Float[Array, "N d"]:
        """One step of one system: ``step_systems`` with S = 1."""
        return self.step_systems(x[None], key)[0]


class StochasticTransformer(AbstractSphereModel):
    """Discrete post-norm transformer with random-MLP common noise (docs/stochastic.md).

    Args:
        kernel: activation and weight scales of the random MLP (:class:`NoiseKernel`; with
            ``NoiseKernel.paper`` this is the second paper's model, output bias $b_W$ included).
        width: MLP width m.
        layers: depth L (Δt = horizon / L).
        horizon: T.
        attention: :class:`SphereAttention` (default: none).
    """

    kernel: NoiseKernel
    attention: SphereAttention
    width: int = eqx.field(static=True)
    layers: int = eqx.field(static=True)
    horizon: float = eqx.field(static=True)

    def __init__(
        self,
        kernel: NoiseKernel | None = None,
        width: int = 64,
        layers: int = 100,
        horizon: float = 1.0,
        attention: SphereAttention | None = None,
    ):
        self.kernel = NoiseKernel() if kernel is None else kernel
        self.attention = SphereAttention() if attention is None else attention
        _check_model_arguments(self.kernel, self.attention, "layers", layers, horizon)
        if int(width) < 1:
            raise ValueError(f"`width` must be >= 1, got {width!r}.")
        self.width, self.layers, self.horizon = int(width), int(layers), float(horizon)

    @property
    def num_steps(self) -> int:
        return self.layers

    @property
    def dt(self) -> float:
        return self.horizon / self.layers

    def step_systems(self, xs: Float[Array, "S N d"], key: PRNGKeyArray) -> Float[Array, "S N d"]:
        """One layer (attention sublayer then MLP sublayer, each followed by 𝒩) for S systems sharing
        the same MLP weights (the same common noise)."""
        if self.attention.active:
            xs = normalise(xs + self.dt * jax.vmap(self.attention)(xs))
        w = _sample_mlp(key, self.kernel, xs.shape[-1], self.width, xs.dtype)
        return normalise(xs + math.sqrt(self.dt) * _mlp_noise(w, xs, self.kernel.activation))


def _check_tokens(x0, d: int | None = None) -> Array:
    """Tokens ``(N, d)`` on the unit sphere: shapes raise ``ValueError`` naming ``x0``; the values
    (finite, unit rows) are checked by the one value check."""
    x0 = as_array("x0", x0)
    if x0.ndim != 2 or x0.shape[0] < 1 or x0.shape[1] < 2:
        raise ValueError(f"`x0` must have shape (N, d) with N >= 1, d >= 2, got {x0.shape}.")
    if d is not None and x0.shape[1] != d:
        raise ValueError(f"`x0` must have d = {d} columns, got {x0.shape[1]}.")
    if not jnp.issubdtype(x0.dtype, jnp.floating):
        raise ValueError(f"`x0` must be a floating array, got dtype {x0.dtype}.")
    x0 = check(x0, ~jnp.all(jnp.isfinite(x0)), "`x0` contains non-finite values (nan/inf).")
    off = jnp.max(jnp.abs(jnp.linalg.norm(x0, axis=-1) - 1))
    return check(x0, off > _SPHERE_ATOL, "`x0` rows must be unit vectors (tokens on the sphere); use `normalise`.")


def _run(model, x0: Float[Array, "N d"], key: PRNGKeyArray, save_every: int | None):
    """The scan behind :func:`simulate` (inputs already checked)."""
    n = model.num_steps
    keys = jax.random.split(key, n)
    body = lambda x, k: (model.step(x, k), None)  # noqa: E731
    if save_every is None:
        x1, _ = jax.lax.scan(body, x0, keys)
        return jnp.asarray(model.horizon, x0.dtype), x1
    k = save_every

    def outer(x, kk):
        x, _ = jax.lax.scan(body, x, kk)
        return x, x

    _, xs = jax.lax.scan(outer, x0, keys.reshape(n // k, k, *keys.shape[1:]))
    xs = jnp.concatenate([x0[None], xs], axis=0)
    ts = jnp.arange(n // k + 1, dtype=x0.dtype) * (k * model.dt)
    return ts, xs


def _checked_model(model):
    if not isinstance(model, AbstractSphereModel):
        raise ValueError(
            f"`model` must be a StochasticTransformer, a SphereSDE or another AbstractSphereModel, got "
            f"{type(model).__name__}."
        )
    return _finite_params(model)


def _finite_params(module, name: str = "model"):
    """``module`` with its floating arrays checked finite inside compiled code, the error naming
    ``name`` (no arrays: nothing to check)."""
    leaves = jax.tree.leaves(eqx.filter(module, eqx.is_inexact_array))
    if not leaves:
        return module
    ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in leaves]))
    return check(module, ~ok, f"`{name}` parameters contain non-finite values (nan/inf).")


@compiled
def simulate(model, x0: Float[Array, "N d"], key: PRNGKeyArray, *, save_every: int | None = None):
    """Run ``model`` (discrete or SDE) from ``x0`` over its ``num_steps`` steps with one key.

    Returns ``(ts, xs)``: with ``save_every=k`` (must divide ``num_steps``), the times
    ``(S + 1,)`` and states ``(S + 1, N, d)`` every k steps (including t = 0); with None only
    the final state ``(N, d)`` is returned as ``(T, x_T)``. Compiled; jit/vmap-able (vmap over
    ``key`` for realisations; see :func:`simulate_many`); the values of ``x0`` and the model are
    checked (module docstring).
    """
    key = as_key(key, "key")
    model = _checked_model(model)
    x0 = _check_tokens(x0)
    if save_every is not None:
        save_every = check_save_every(save_every, model.num_steps, "the number of steps")
    return _run(model, x0, key, save_every)


@compiled
def simulate_many(model, x0, keys, *, save_every: int | None = None):
    """:func:`simulate` vmapped over a batch of keys ``(R,)``: states gain a leading ``R`` axis.

    ``x0`` may be ``(N, d)`` (shared) or ``(R, N, d)`` (one start per realisation). Compiled.
    """
    keys = as_key(keys, "keys", batch=True)
    x0 = as_array("x0", x0)
    if jnp.ndim(keys) < 1 or len(keys) < 1:
        raise ValueError(f"`keys` must be a non-empty batch of PRNG keys (R,), got shape {jnp.shape(keys)}.")
    model = _checked_model(model)
    in_x = 0 if x0.ndim == 3 else None
    if in_x == 0 and x0.shape[0] != len(keys):
        raise ValueError(f"`x0` has {x0.shape[0]} starts but `keys` has {len(keys)} keys.")
    flat = _check_tokens(x0 if in_x is None else x0.reshape(-1, x0.shape[-1]))
    x0 = flat.reshape(x0.shape)
    if save_every is not None:
        save_every = check_save_every(save_every, model.num_steps, "the number of steps")
    ts, xs = jax.vmap(lambda x, k: _run(model, x, k, save_every), in_axes=(in_x, 0))(x0, keys)
    return ts[0], xs
