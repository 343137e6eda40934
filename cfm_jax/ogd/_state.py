"""The OGD state (parameters and optimiser state of every trajectory, the step) and its checks."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array

from .._gaussian_limit import GaussianMeasure
from .._paths import AbstractCFM


class OGDState(eqx.Module):
    """Trainable parameters and optimiser state of each trajectory, and the step k.

    ``params[t]`` is ``eqx.filter(model_t, eqx.is_inexact_array)``; ``context_sizes[t]`` the
    number of context points trajectory t uses (None: the whole sample context). The last
    trajectory is the reference of the recorded deviations.
    """

    params: tuple
    opt_states: tuple
    step: Array
    context_sizes: tuple = eqx.field(static=True)

    def model(self, like: AbstractCFM, t: int = -1) -> AbstractCFM:
        """Trajectory ``t`` as a model (static parts taken from ``like``)."""
        return eqx.combine(self.params[t], eqx.filter(like, eqx.is_inexact_array, inverse=True))


class OGDResult(eqx.Module):
    r"""Output of :func:`run_ogd`.

    Attributes:
        state: the final :class:`OGDState`.
        losses: ``(K, T)`` loss of every trajectory at every step (before its update).
        deviations: ``(K, T − 1)`` $‖θ_{k+1}^{(t)} − \hat θ_{k+1}‖_{L^∞}$ after every update.
        ref_norms: ``(K,)`` $‖\hat θ_{k+1}‖_{L^∞}$ (the size of the region visited).
        ref_params: ``(K, ...)`` reference parameters after every update, or None.
    """

    state: OGDState
    losses: Array
    deviations: Array
    ref_norms: Array
    ref_params: object = None

    @property
    def sup_deviation(self) -> Array:
        """(T − 1,) sup_k of the deviations over this run."""
        return jnp.max(self.deviations, axis=0)


def check_model(model):
    if not isinstance(model, AbstractCFM):
        raise ValueError(f"`model` must be a cfm_jax model (AbstractCFM), got {type(model).__name__}.")


def check_population(population, model):
    """None or a GaussianMeasure of the model's dimension (the exact infinite-context law)."""
    if population is None:
        return
    if not isinstance(population, GaussianMeasure):
        raise ValueError(
            "`population` must be None or a cfm_jax.GaussianMeasure (the law of the contexts, whose "
            f"infinite-context loss is exact), got {type(population).__name__}."
        )
    if population.dim != model.dim:
        raise ValueError(f"`population` has dimension {population.dim} but the model has d = {model.dim}.")


def check_optimizer(optimizer):
    if not isinstance(optimizer, optax.GradientTransformation):
        raise ValueError(
            "`optimizer` must be an optax GradientTransformation (e.g. `ridge_sgd(eta, lam)`), "
            f"got {type(optimizer).__name__}."
        )


def check_sizes(context_sizes):
    sizes = tuple(context_sizes)
    if not sizes:
        raise ValueError("`context_sizes` must name at least one trajectory.")
    for n in sizes:
        if n is not None and (not isinstance(n, (int, np.integer)) or n < 1):
            raise ValueError(f"`context_sizes` entries must be positive ints or None, got {n!r}.")
    return tuple(None if n is None else int(n) for n in sizes)


def init_state(model: AbstractCFM, optimizer: optax.GradientTransformation, context_sizes=(None,)) -> OGDState:
    """All trajectories start at ``model``'s parameters with a fresh optimiser state."""
    check_model(model)
    check_optimizer(optimizer)
    sizes = check_sizes(context_sizes)
    params = eqx.filter(model, eqx.is_inexact_array)
    opt = optimizer.init(params)
    T = len(sizes)
    return OGDState((params,) * T, (opt,) * T, jnp.asarray(0, jnp.int32), sizes)


def check_state(state, model, optimizer):
    if not isinstance(state, OGDState):
        raise ValueError(f"`state` must be an OGDState, got {type(state).__name__}.")
    ref = eqx.filter(model, eqx.is_inexact_array)
    ref_struct = jax.tree.structure(ref)
    ref_shapes = [a.shape for a in jax.tree.leaves(ref)]
    opt_struct = jax.tree.structure(jax.eval_shape(optimizer.init, ref))
    for t, (p, o) in enumerate(zip(state.params, state.opt_states)):
        if jax.tree.structure(p) != ref_struct or [a.shape for a in jax.tree.leaves(p)] != ref_shapes:
            raise ValueError(f"`state.params[{t}]` does not match the model's parameter structure/shapes.")
        if jax.tree.structure(o) != opt_struct:
            raise ValueError(f"`state.opt_states[{t}]` does not match the optimiser's state structure.")


__all__ = [
    "OGDResult",
    "OGDState",
    "check_model",
    "check_optimizer",
    "check_population",
    "check_sizes",
    "check_state",
    "init_state",
]
