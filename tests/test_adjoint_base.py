"""The strategy plumbing: stacked system products, passive probe rows, the weight gradient."""

import jax
import jax.numpy as jnp
from _problems import problem, rel

from cfm_jax._adjoint import system_vjp
from cfm_jax._adjoint.base import weight_gradient


def test_probe_rows_are_passive_in_the_system_products():
    """Adding probe rows changes neither the targets' and particles' products nor the measure and
    parameter terms; probes only receive their own dx and the measure term at their positions."""
    model, x0, ctx, _ = problem(3)
    th, z, w = model.layer_params(1), ctx.points, ctx.weights
    kp, kb, kz = jax.random.split(jax.random.key(2), 3)
    p, b = jax.random.normal(kp, x0.shape), jax.random.normal(kb, z.shape)
    probes = jax.random.normal(kz, (4, 3))
    none = system_vjp(model.field, th, x0, z, w, jnp.zeros((0, 3)), p, b, jnp.zeros((0, 3)))
    some = system_vjp(model.field, th, x0, z, w, probes, p, b, jax.random.normal(kz, (4, 3)))
    B, n = x0.shape[0], z.shape[0]
    assert rel(some.dx[: B + n], none.dx) <= 1e-13 and rel(some.dz, none.dz) <= 1e-13
    assert rel(some.dw, none.dw) <= 1e-13 and rel(some.dparams, none.dparams) <= 1e-13
    assert some.dtargets is not None and some.phi is not None
    assert some.dtargets.shape == (4, 3) and some.phi.shape == (4,)
    # the measure term at a probe placed on a particle is the particle's test-field term dz_j / w_j
    on = system_vjp(model.field, th, x0, z, w, z[:2], p, b, jnp.zeros((2, 3)))
    assert rel(on.dtargets, on.dz[:2] / w[:2, None]) <= 1e-12
    assert rel(on.phi, on.dw[:2]) <= 1e-12  # ∂/∂w_j is the first variation at the atom


def test_weight_gradient_adds_the_direct_cotangent():
    dw = jnp.array([0.2, -0.4, 1.5])
    assert jnp.array_equal(weight_gradient(dw, None), dw)
    assert jnp.allclose(weight_gradient(dw, jnp.ones(3)), dw + 1)


def test_a_sweep_from_the_final_state_keeps_the_context_moving_when_the_solution_drops_it():
    """``ContinuousAdjoint(memory=Backsolve())`` integrates back from the final state: under
    ``SaveAt(context=False)`` its forward still moves the context at the last step (``carried``), so
    its gradient is the one of the solve that keeps the context."""
    import equinox as eqx

    import cfm_jax
    from cfm_jax._flow import FlowSpec

    model, x0, ctx, _ = problem(4)
    adjoint = cfm_jax.ContinuousAdjoint(memory=cfm_jax.Backsolve())
    assert adjoint.carried(ctx.weights, FlowSpec.of(model, saveat=cfm_jax.SaveAt(context=False))).last is None

    def loss(params, kept):
        sol = cfm_jax.forward(
            eqx.combine(params, static), x0, ctx, saveat=cfm_jax.SaveAt(context=kept), adjoint=adjoint
        )
        return jnp.sum(sol.x1**2)

    params, static = eqx.partition(model, eqx.is_inexact_array)
    assert rel(jax.grad(loss)(params, False), jax.grad(loss)(params, True)) <= 1e-12
