"""Eulerian adjoints (SPEC §2): closed-form local products, the exact adjoint of the Euler
scheme, the continuous adjoint ODE and probe points. The public entry points are in
:mod:`cfm_jax.gradients` (``value_and_grad``, ``adjoint_trajectories``)."""

from .continuous import ContinuousAdjoint, continuous_adjoint
from .discrete import DiscreteAdjoint, euler_adjoint
from .local import (
    LocalVJP,
    dtheta_transpose,
    dx_transpose,
    generic_local_vjp,
    has_closed_form,
    local_vjp,
    measure_term,
)
from .probes import ball_probes, grid_probes, probe_gradients

__all__ = [
    "ContinuousAdjoint",
    "DiscreteAdjoint",
    "LocalVJP",
    "ball_probes",
    "continuous_adjoint",
    "dtheta_transpose",
    "dx_transpose",
    "euler_adjoint",
    "generic_local_vjp",
    "grid_probes",
    "has_closed_form",
    "local_vjp",
    "measure_term",
    "probe_gradients",
]
