"""The velocity-field interface: V(query points, context measure, one layer's parameters)."""

from __future__ import annotations

import abc
from collections.abc import Mapping

import equinox as eqx
from jaxtyping import Array, Float

from ..measures import EmpiricalMeasure

LayerParams = Mapping[str, Array]
"""One layer's parameters θ(s) as a mapping name -> array (e.g. ``{"Q": (H, d, d), ...}``)."""


class AbstractField(eqx.Module):
    """A velocity field V(x, μ; θ).

    Subclasses implement ``__call__(x, measure, params) -> velocities`` with
    ``x: (q, d)`` query points, ``measure`` an :class:`EmpiricalMeasure` with points ``(n, d)``
    and ``params`` one layer's parameters (a mapping); the result has shape ``(q, d)``.
    Any such module plugs into :func:`cfm_jax.forward` through :class:`cfm_jax.CFM`.
    """

    @abc.abstractmethod
    def __call__(
        self, x: Float[Array, "q d"], measure: EmpiricalMeasure, params: LayerParams
    ) -> Float[Array, "q d"]:
        raise NotImplementedError

    def __add__(self, other: "AbstractField") -> "SumField":
        return SumField((self, other))


class SumField(AbstractField):
    """V = Σ_k V_k; each summand reads the parameters it needs from the same layer mapping."""

    fields: tuple[AbstractField, ...]

    def __init__(self, fields):
        flat = []
        for f in fields:
            flat.extend(f.fields if isinstance(f, SumField) else (f,))
        self.fields = tuple(flat)

    def __call__(self, x, measure, params):
        out = self.fields[0](x, measure, params)
        for f in self.fields[1:]:
            out = out + f(x, measure, params)
        return out
