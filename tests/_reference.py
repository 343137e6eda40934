"""Reference outputs and gradients of every strategy and every SaveAt, float64 (tests/data/reference.json).

``python tests/_reference.py`` rewrites the file from the current code; ``test_reference`` checks the
current code against the stored values, so a refactor of the solve that changes a number fails.
"""

import json
import pathlib

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from _problems import problem

import cfm_jax
from cfm_jax import Backsolve, ContinuousAdjoint, DiscreteAdjoint, Recompute, SaveAt, StoreEvery

PATH = pathlib.Path(__file__).parent / "data" / "reference.json"

STRATEGIES = {
    "discrete": DiscreteAdjoint(),
    "discrete_every2": DiscreteAdjoint(memory=StoreEvery(2)),
    "discrete_recompute": DiscreteAdjoint(memory=Recompute()),
    "continuous": ContinuousAdjoint(),
    "continuous_backsolve": ContinuousAdjoint(memory=Backsolve()),
    "autodiff": diffrax.RecursiveCheckpointAdjoint(),
}
SAVEATS = {"final": SaveAt(), "layers": SaveAt(layers=True), "steps": SaveAt(steps=True)}


def _loss(sol):
    out = jnp.sum(jnp.sin(sol.x1)) + jnp.sum(sol.context.weights * jnp.cos(sol.context.points[:, 0]))
    if sol.xs is not None:
        out = out + jnp.sum(jnp.tanh(sol.xs) ** 2) + 0.1 * jnp.sum(sol.contexts.points**3)
    return out


def _linear_path(model):
    """A piecewise-linear path with L + 1 nodes built from the transformer's parameters."""
    params = {k: jnp.concatenate([v, v[:1] * 0.5], 0) for k, v in model.stacked_params().items()}
    return cfm_jax.PiecewiseLinearCFM(model.field, params, model.dim)


def cases():
    """``name -> (model, x0, context, forward options)`` for every strategy × SaveAt × path."""
    model, x0, ctx, _ = problem(3, d=2, n=5, B=2, heads=2, mlp=3, layers=2)
    out = {}
    for sname, adjoint in STRATEGIES.items():
        for vname, saveat in SAVEATS.items():
            out[f"{sname}/{vname}/constant"] = (model, x0, ctx, dict(adjoint=adjoint, saveat=saveat, steps=4))
        out[f"{sname}/final/linear"] = (_linear_path(model), x0, ctx, dict(adjoint=adjoint, steps=4))
    out["heun/continuous/constant"] = (
        model,
        x0,
        ctx,
        dict(solver=diffrax.Heun(), adjoint=ContinuousAdjoint(), steps=4, saveat=SaveAt(layers=True)),
    )
    out["heun/autodiff/constant"] = (model, x0, ctx, dict(solver=diffrax.Heun(), steps=4))
    return out


def compute(model, x0, ctx, options):
    """Forward outputs and gradients of ``_loss`` in (θ, x0, z0, w), flattened to lists."""

    def f(inputs):
        m, x, z, w = inputs
        return _loss(cfm_jax.forward(m, x, cfm_jax.EmpiricalMeasure.unchecked(z, w), **options))

    inputs = (model, x0, ctx.points, ctx.weights)
    value, grads = eqx.filter_value_and_grad(f)(inputs)
    sol = cfm_jax.forward(model, x0, ctx, **options)
    leaves = jax.tree.leaves(grads)
    flat = lambda t: [float(v) for a in jax.tree.leaves(t) for v in jnp.ravel(a)]  # noqa: E731
    return {
        "value": float(value),
        "x1": flat(sol.x1),
        "z1": flat(sol.context.points),
        "xs": flat(sol.xs),
        "grads": flat(leaves),
    }


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    data = {name: compute(*case) for name, case in cases().items()}
    PATH.write_text(json.dumps(data, indent=0) + "\n")
    print(f"wrote {len(data)} cases to {PATH}")
