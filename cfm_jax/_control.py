"""A general (non-kernel) contextual field: V(x, μ) = c(s) · W1(μ, ν) · e.

The control of the propagation-of-chaos experiments (``docs/chaos.md``); a field built from a
distance, so it sits above ``cfm_jax._wasserstein`` in the layers, not in ``fields/``. Its
dependence on μ is W1-Lipschitz (|V(x, μ) − V(x, μ')| ≤ |c| W1(μ, μ')) but *not* of the kernel form
F(∫ k(x, y) dμ(y)), so the empirical error is W1(μ_n, μ) ~ n^{-1/d} rather than the parametric
n^{-1/2} of attention. With ν the population law (its reference sample), the population system
stays put (W1(ν, ν) = 0) while an n-point context drifts by ~W1(μ_n, ν) along e.

W1 is the debiased Sinkhorn divergence with the Euclidean cost (``cfm_jax._wasserstein``) at a
*fixed* ε (set from ν's own scale at construction, so V is one functional of μ) and the self term
OT_ε(ν, ν) precomputed; in d = 1 the exact sorted formula is used instead.

:meth:`W1ControlField.create` checks its values — ν's points and weights, a finite non-zero
``direction`` and a finite ``relative_epsilon`` > 0 — through ``cfm_jax._validation.check``: a bad one
raises ``equinox.EquinoxRuntimeError`` naming it, eagerly and for a control built under ``jax.jit`` alike.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._arguments import check_positive, python_scalar, static_int
from ._fields.base import AbstractField
from ._measures import EmpiricalMeasure, as_measure
from ._validation import is_concrete
from ._wasserstein import positive_finite, require, self_transport_cost, sinkhorn_w1, sorted_w1


class W1ControlField(AbstractField):
    """V(x, μ; θ) = θ["c"] · W1(μ, ν) · e (θ["c"] a scalar per layer; 1 when absent).

    Build with :meth:`create`. Attributes: ``nu_points (m, d)``, ``nu_weights (m,)``,
    ``direction (d,)`` (unit), ``epsilon`` and ``offset`` (OT_ε(ν, ν)) for the Sinkhorn path.
    """

    nu_points: Float[Array, "m d"]
    nu_weights: Float[Array, " m"]
    direction: Float[Array, " d"]
    epsilon: Array
    offset: Array
    max_iterations: int = eqx.field(static=True, converter=python_scalar, default=2000)
    threshold: float = eqx.field(static=True, converter=python_scalar, default=1e-3)
    batch_size: int | None = eqx.field(static=True, converter=python_scalar, default=None)

    @classmethod
    def create(
        cls,
        nu,
        direction=None,
        *,
        relative_epsilon: float = 0.01,
        max_iterations: int | np.integer = 2000,
        threshold: float = 1e-3,
        batch_size: int | None = None,
    ) -> W1ControlField:
        r"""Control field for the fixed measure ``nu`` (an :class:`EmpiricalMeasure` or ``(m, d)``).

        ``direction`` defaults to $e_1$ and is normalised; ε = ``relative_epsilon`` $· (2 \operatorname{Var} ν)^{1/2}$
        (Var ν the total variance of ν). The values of ``nu``, ``direction`` and ``relative_epsilon``
        are checked, a failed check naming the argument.
        """
        return control_field(
            nu,
            direction,
            relative_epsilon=relative_epsilon,
            max_iterations=max_iterations,
            threshold=threshold,
            batch_size=batch_size,
        )

    def distance(self, measure: EmpiricalMeasure) -> Array:
        """W1(μ, ν) as used by the field (scalar)."""
        x, a = measure.points, measure.weights
        if x.shape[-1] == 1:
            return sorted_w1(x, a, self.nu_points, self.nu_weights)
        return sinkhorn_w1(
            x,
            a,
            self.nu_points,
            self.nu_weights,
            epsilon=self.epsilon,
            batch_size=self.batch_size,
            max_iterations=self.max_iterations,
            threshold=self.threshold,
            offset_yy=self.offset,
        )

    def __call__(self, x, measure, params):
        c = params["c"] if "c" in params else 1.0
        v = c * self.distance(measure) * self.direction
        return jnp.broadcast_to(v, x.shape).astype(x.dtype)


def control_field(
    nu,
    direction=None,
    *,
    relative_epsilon: float = 0.01,
    max_iterations: int | np.integer = 2000,
    threshold: float = 1e-3,
    batch_size: int | None = None,
    checked: bool = True,
) -> W1ControlField:
    """:meth:`W1ControlField.create`; ``checked=False`` leaves out the in-program checks of traced
    values, for a sweep that builds the field inside its own program from a reference sample it drew
    itself (concrete values are always checked)."""
    if not isinstance(nu, EmpiricalMeasure):
        try:
            nu = as_measure(nu)
        except ValueError as e:
            raise ValueError(f"`nu`: {e}") from None
    if checked or is_concrete(nu.points):
        nu = nu.checked("nu")
    d = nu.dim
    dtype = nu.points.dtype
    e = jnp.zeros((d,), dtype).at[0].set(1.0) if direction is None else jnp.asarray(direction, dtype)
    if e.shape != (d,):
        raise ValueError(f"`direction` must have shape ({d},), got {e.shape}.")
    norm = jnp.linalg.norm(e)
    ok = jnp.isfinite(norm) & (norm > 0)
    if checked or is_concrete(ok):
        e = require(e, ok, "`direction` must be a finite, non-zero vector.")
    if checked or is_concrete(relative_epsilon):
        relative_epsilon = positive_finite("relative_epsilon", relative_epsilon)
    max_iterations = static_int("max_iterations", max_iterations)
    check_positive("threshold", threshold)
    y, b = nu.points, nu.weights
    var = b @ jnp.sum((y - b @ y) ** 2, -1)
    eps = jax.lax.stop_gradient(relative_epsilon * jnp.sqrt(2 * var))
    if d == 1:
        offset = jnp.zeros((), dtype)
    else:
        offset = self_transport_cost(
            y, b, eps, batch_size=batch_size, max_iterations=max_iterations, threshold=threshold
        )
    return W1ControlField(
        nu_points=y,
        nu_weights=b,
        direction=e / norm,
        epsilon=eps,
        offset=jax.lax.stop_gradient(offset),
        max_iterations=max_iterations,
        threshold=threshold,
        batch_size=batch_size,
    )


__all__ = ["W1ControlField"]
