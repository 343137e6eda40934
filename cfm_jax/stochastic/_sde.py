"""The limit SDE on the sphere (docs/theory.md), L → ∞ at any width:

    dx_i = P_{x_i} A_i(x) dt + P_{x_i} ∘ W(dt, x_i),   E[W^a(t,x) W^b(s,y)] = (t∧s) κ(<x,y>) δ_ab.

Scheme ("add the increment, then normalise"): x ← 𝒩(x + Δt A(x) + ΔW(x)). Expanding 𝒩 to
second order gives the drift P_x A − ½(d−1)κ(1) x, i.e. exactly the Itô correction of the
Stratonovich equation, so no explicit correction term is added (strong order ½, weak order 1).

ΔW is sampled exactly at the token positions (``noise="exact"``: ΔW = C(x)^{1/2} ΔB, O(N³)) or
by random features (``noise="features"``: the random MLP of width m, O(N m d)).

Two integrators, same scheme: :func:`simulate` (a ``lax.scan``, used everywhere) and
:func:`solve_diffrax` (``diffrax.diffeqsolve`` with a shared ``UnsafeBrownianPath`` or
``VirtualBrownianTree`` as control, a ``ControlTerm`` whose vector field is the lineax operator
ΔB ↦ C(x)^{1/2} ΔB, and diffrax's Euler step composed with the retraction to the sphere).
:func:`integrate_increments` drives the scan with given Brownian increments: it reproduces the
diffrax solve to round-off on the same path, and couples schemes of different step sizes.
Both are compiled (``cfm_jax.compiled``) and check the tokens' values inside the program, as
:func:`simulate` does.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
from jaxtyping import Array, Float, PRNGKeyArray

from .. import _random
from .._arguments import check_save_every, finite
from .._random import as_key
from .._validation import compiled
from ._kernels import NoiseKernel
from ._model import (
    AbstractSphereModel,
    SphereAttention,
    _check_model_arguments,
    _check_tokens,
    _finite_params,
    normalise,
)
from ._noise import _mlp_noise, _sample_mlp, field_factor

#: Sampler of the common field at the token positions: exact ($C^{1/2} ΔB$) or random features.
NoiseSampler = Literal["exact", "features"]


class SphereSDE(AbstractSphereModel):
    """Limit SDE with common Gaussian-field noise, discretised with ``steps`` steps on [0, T].

    Args:
        kernel: the noise covariance κ (:class:`NoiseKernel`).
        steps: number of time steps (Δt = horizon / steps).
        horizon: T.
        attention: :class:`SphereAttention` (default none).
        noise: (:data:`NoiseSampler`) ``"exact"`` (eigendecomposition sampler) or ``"features"``
            (random MLP, ``width``).
        width: random-feature width for ``noise="features"``.
    """

    kernel: NoiseKernel
    attention: SphereAttention
    steps: int = eqx.field(static=True)
    horizon: float = eqx.field(static=True)
    noise: NoiseSampler = eqx.field(static=True)
    width: int = eqx.field(static=True)

    def __init__(
        self,
        kernel: NoiseKernel | None = None,
        steps: int = 100,
        horizon: float = 1.0,
        attention: SphereAttention | None = None,
        noise: NoiseSampler = "exact",
        width: int = 1024,
    ):
        self.kernel = NoiseKernel() if kernel is None else kernel
        self.attention = SphereAttention() if attention is None else attention
        _check_model_arguments(self.kernel, self.attention, "steps", steps, horizon)
        if noise not in ("exact", "features"):
            raise ValueError(f"`noise` must be 'exact' or 'features', got {noise!r}.")
        if int(width) < 1:
            raise ValueError(f"`width` must be >= 1, got {width!r}.")
        self.steps, self.horizon, self.noise, self.width = int(steps), float(horizon), noise, int(width)

    @property
    def num_steps(self) -> int:
        return self.steps

    @property
    def dt(self) -> float:
        return self.horizon / self.steps

    def drift(self, xs: Float[Array, "S N d"]) -> Float[Array, "S N d"]:
        return jax.vmap(self.attention)(xs)

    def step_systems(self, xs: Float[Array, "S N d"], key: PRNGKeyArray) -> Float[Array, "S N d"]:
        """One step for S systems driven by the same field (sampled jointly at all S·N points)."""
        key = as_key(key, "key")
        S, N, d = xs.shape
        if self.noise == "features":
            w = _sample_mlp(key, self.kernel, d, self.width, xs.dtype)
            dW = math.sqrt(self.dt) * _mlp_noise(w, xs, self.kernel.activation)
        else:
            dB = math.sqrt(self.dt) * jax.random.normal(key, (S * N, d), xs.dtype)
            dW = (field_factor(xs.reshape(S * N, d), self.kernel) @ dB).reshape(S, N, d)
        return self.step_increment_systems(xs, dW, exact=False)

    def step_increment_systems(self, xs, dB, *, exact: bool = True):
        """$𝒩(x + Δt A(x) + ΔW)$ with $ΔW = C^{1/2} ΔB$ (``exact``) or $ΔW = ΔB$ as given."""
        S, N, d = xs.shape
        dW = (field_factor(xs.reshape(S * N, d), self.kernel) @ dB.reshape(S * N, d)).reshape(xs.shape) if exact else dB
        drift = self.drift(xs) * self.dt if self.attention.active else 0.0
        return normalise(xs + drift + dW)


def brownian_increments(key: PRNGKeyArray, steps: int, shape, horizon: float, dtype=None):
    """``(steps,) + shape`` i.i.d. N(0, horizon/steps) increments of a Brownian matrix."""
    key = as_key(key, "key")
    if isinstance(steps, bool) or int(steps) != steps or int(steps) < 1:
        raise ValueError(f"`steps` must be an integer >= 1, got {steps!r}.")
    if not (math.isfinite(float(horizon)) and float(horizon) > 0):
        raise ValueError(f"`horizon` must be finite and > 0, got {horizon!r}.")
    dtype = dtype or jnp.result_type(float)
    return math.sqrt(horizon / steps) * _random.normal(key, (steps,) + tuple(shape), dtype)


@compiled
def integrate_increments(sde: SphereSDE, x0, dB: Float[Array, "K N d"], *, save_every: int | None = None):
    """Exact-noise scheme driven by given Brownian increments ``dB`` (one per step).

    ``K`` must be a multiple of ``sde.steps``: consecutive increments are summed, so a coarse
    scheme and a fine one driven by the same ``dB`` are strongly coupled. Returns the final
    state ``(N, d)`` or, with ``save_every``, the states ``(steps/save_every + 1, N, d)``.
    Compiled; the values of ``x0``, ``dB`` and ``sde`` are checked, a failed check naming the argument.
    """
    if not isinstance(sde, SphereSDE):
        raise ValueError(f"`sde` must be a SphereSDE, got {type(sde).__name__}.")
    x0 = _check_tokens(x0)
    dB = jnp.asarray(dB)
    K = dB.shape[0] if dB.ndim else 0
    if dB.shape[1:] != x0.shape or K == 0 or K % sde.steps:
        raise ValueError(f"`dB` must have shape (k·{sde.steps}, {x0.shape[0]}, {x0.shape[1]}), got {dB.shape}.")
    sde, dB = _finite_params(sde, "sde"), finite("dB", dB)
    dB = dB.astype(x0.dtype).reshape(sde.steps, K // sde.steps, *x0.shape).sum(1)
    body = lambda x, b: (sde.step_increment_systems(x[None], b[None])[0], None)  # noqa: E731
    if save_every is None:
        return jax.lax.scan(body, x0, dB)[0]
    k = check_save_every(save_every, sde.steps, "`steps`")

    def outer(x, bb):
        x = jax.lax.scan(body, x, bb)[0]
        return x, x

    xs = jax.lax.scan(outer, x0, dB.reshape(sde.steps // k, k, *x0.shape))[1]
    return jnp.concatenate([x0[None], xs], axis=0)


class _SphereEuler(diffrax.AbstractItoSolver):
    """diffrax's Euler step followed by the radial retraction 𝒩 (diffrax has no manifold support).

    Composition, not a subclass of the concrete ``diffrax.Euler``: an Itô Euler step of the ambient
    terms then the retraction, which supplies the radial Itô correction (module docstring).
    """

    term_structure: ClassVar = diffrax.AbstractTerm
    interpolation_cls: ClassVar = diffrax.LocalLinearInterpolation
    euler: diffrax.Euler = diffrax.Euler()

    def order(self, terms):
        return self.euler.order(terms)

    def strong_order(self, terms):
        return self.euler.strong_order(terms)

    def init(self, terms, t0, t1, y0, args):
        return self.euler.init(terms, t0, t1, y0, args)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        y1, err, _, state, result = self.euler.step(terms, t0, t1, y0, args, solver_state, made_jump)
        y1 = normalise(y1)
        return y1, err, dict(y0=y0, y1=y1), state, result

    def func(self, terms, t0, y0, args):
        return self.euler.func(terms, t0, y0, args)


def brownian_path(
    key: PRNGKeyArray,
    sde: SphereSDE,
    shape,
    *,
    path_type: type[diffrax.UnsafeBrownianPath] | type[diffrax.VirtualBrownianTree] = diffrax.UnsafeBrownianPath,
    dtype=None,
):
    """The shared Brownian matrix ``B: [0, T] → R^{N×d}`` as a diffrax path of class ``path_type``.

    ``path_type``: ``diffrax.UnsafeBrownianPath`` (fast, fixed steps) or
    ``diffrax.VirtualBrownianTree`` (on [0, T] with tolerance Δt/8; reproducible at any query).
    """
    key = as_key(key, "key")
    dtype = dtype or jnp.result_type(float)
    struct = jax.ShapeDtypeStruct(tuple(shape), dtype)
    if path_type is diffrax.UnsafeBrownianPath:
        return diffrax.UnsafeBrownianPath(shape=struct, key=key)
    if path_type is diffrax.VirtualBrownianTree:
        return diffrax.VirtualBrownianTree(0.0, sde.horizon, tol=sde.dt / 8, shape=struct, key=key)
    raise ValueError(
        f"`path_type` must be diffrax.UnsafeBrownianPath or diffrax.VirtualBrownianTree, got {path_type!r}."
    )


@compiled
def solve_diffrax(sde: SphereSDE, x0, path, *, save_every: int | None = None):
    """The same scheme as :func:`simulate` through ``diffrax.diffeqsolve`` (exact noise only).

    ``path``: a diffrax Brownian path of shape ``(N, d)`` (see :func:`brownian_path`).
    Returns the final state ``(N, d)`` or the states every ``save_every`` steps. Compiled; the
    values of ``x0`` and ``sde`` are checked inside the program.
    """
    if not isinstance(sde, SphereSDE):
        raise ValueError(f"`sde` must be a SphereSDE, got {type(sde).__name__}.")
    if sde.noise != "exact":
        raise ValueError("`solve_diffrax` needs `noise='exact'` (the field is a Brownian control).")
    x0 = _check_tokens(x0)
    if not isinstance(path, diffrax.AbstractBrownianPath):
        raise ValueError(f"`path` must be a diffrax Brownian path (see `brownian_path`), got {type(path).__name__}.")
    # the shape of the path's increments, by evaluating it abstractly (no attribute probing)
    path_shape = tuple(jax.eval_shape(lambda: path.evaluate(0.0, sde.dt)).shape)
    if path_shape != x0.shape:
        raise ValueError(f"`path` must have the shape of `x0` {x0.shape} (N, d), got {path_shape}.")
    sde = _finite_params(sde, "sde")
    struct = jax.ShapeDtypeStruct(x0.shape, x0.dtype)

    def diffusion(t, y, args):
        F = field_factor(y, sde.kernel)
        return lx.FunctionLinearOperator(lambda b: F @ b, struct)

    noise = diffrax.ControlTerm(diffusion, path)
    if sde.attention.active:
        term = diffrax.MultiTerm(diffrax.ODETerm(lambda t, y, args: sde.attention(y)), noise)
    else:
        term = noise
    if save_every is None:
        saveat = diffrax.SaveAt(t1=True)
    else:
        check_save_every(save_every, sde.steps, "`steps`")
        saveat = diffrax.SaveAt(ts=jnp.linspace(0.0, sde.horizon, sde.steps // int(save_every) + 1))
    sol = diffrax.diffeqsolve(
        term,
        _SphereEuler(),
        0.0,
        sde.horizon,
        sde.dt,
        x0,
        saveat=saveat,
        stepsize_controller=diffrax.ConstantStepSize(),
        max_steps=sde.steps,
        adjoint=diffrax.DirectAdjoint(),
    )
    ys = sol.ys
    assert ys is not None
    return ys[-1] if save_every is None else ys
