"""ContinuousAdjoint: the adjoint ODE converges to the exact continuous gradient at its solver's order."""

from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _problems import problem as _problem, rel as _rel

import cfm_jax
from cfm_jax import Backsolve, ContinuousAdjoint


def _rk4_loss(model, x0, ctx, y, per_layer):
    """½‖x_1 − y‖²/B through a hand-written classical RK4 (per_layer steps per layer)."""
    h = 1.0 / (model.num_layers * per_layer)
    w = ctx.weights

    def vel(th, st):
        x, z = st
        v = model.velocity(jnp.concatenate([x, z]), cfm_jax.EmpiricalMeasure(z, w), th)
        return v[: x.shape[0]], v[x.shape[0] :]

    def step(st, l):
        th = model.layer_params(l)
        add = lambda a, b, c: jax.tree.map(lambda u, v: u + c * v, a, b)  # noqa: E731
        k1 = vel(th, st)
        k2 = vel(th, add(st, k1, h / 2))
        k3 = vel(th, add(st, k2, h / 2))
        k4 = vel(th, add(st, k3, h))
        inc = jax.tree.map(lambda a, b, c, d: (a + 2 * b + 2 * c + d) / 6, k1, k2, k3, k4)
        return add(st, inc, h), None

    layers = jnp.repeat(jnp.arange(model.num_layers), per_layer)
    (x1, _), _ = jax.lax.scan(step, (x0, ctx.points), layers)
    return 0.5 * jnp.sum((x1 - y) ** 2) / x0.shape[0]


@pytest.fixture(scope="module")
def continuous_problem():
    """A 2-layer problem and its exact continuous gradient: jax.grad through a fine hand RK4."""
    model, x0, ctx, y = _problem(10, layers=2)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    ref = jax.jit(jax.grad(lambda p: _rk4_loss(eqx.combine(p, static), x0, ctx, y, 64)))(params)
    return model, x0, ctx, y, ref


def _order(continuous_problem, solver, steps):
    model, x0, ctx, y, ref = continuous_problem
    errs = []
    for s in steps:
        _, g = cfm_jax.loss_and_grad(model, x0, ctx, y, adjoint=ContinuousAdjoint(), solver=solver, steps=int(s))
        errs.append(_rel(g, ref))
    return np.array(errs), -np.polyfit(np.log(steps), np.log(errs), 1)[0]


def test_continuous_adjoint_converges_at_solver_order(continuous_problem):
    errs, slope = _order(continuous_problem, diffrax.Heun(), np.array([12, 24]))
    assert 1.7 <= slope <= 2.5 and errs[-1] < 2e-2, (errs, slope)


@pytest.mark.slow
@pytest.mark.parametrize("solver,order", [(diffrax.Heun(), 2), (diffrax.Ralston(), 2), (diffrax.Bosh3(), 3)])
def test_continuous_adjoint_order_fits(continuous_problem, solver, order):
    errs, slope = _order(continuous_problem, solver, np.array([4, 6, 8, 12, 16]))
    assert order - 0.4 <= slope <= order + 0.8, (errs, slope)


@pytest.mark.slow
def test_discrete_adjoint_is_first_order_in_the_continuous_gradient(continuous_problem):
    model, x0, ctx, y, ref = continuous_problem
    errs = [_rel(cfm_jax.loss_and_grad(model, x0, ctx, y, steps=s)[1], ref) for s in (16, 64)]
    assert 0.7 <= np.log(errs[0] / errs[1]) / np.log(4) <= 1.3


@pytest.mark.slow
def test_continuous_adjoint_adaptive(continuous_problem):
    model, x0, ctx, y, ref = continuous_problem
    errs = []
    for tol in (1e-4, 1e-7):
        tol = jnp.asarray(tol)  # traced tolerances: one compilation
        ctrl = diffrax.PIDController(rtol=tol, atol=tol)
        _, g = cfm_jax.loss_and_grad(
            model, x0, ctx, y, adjoint=ContinuousAdjoint(), solver=diffrax.Tsit5(), steps=2, stepsize_controller=ctrl
        )
        errs.append(_rel(g, ref))
    assert errs[1] < errs[0] / 30 and errs[1] < 1e-6, errs


@pytest.mark.slow
def test_continuous_backsolve_converges(continuous_problem):
    model, x0, ctx, y, ref = continuous_problem
    _, gb = cfm_jax.loss_and_grad(
        model, x0, ctx, y, adjoint=ContinuousAdjoint(memory=Backsolve()), solver=diffrax.Bosh3(), steps=16
    )
    assert _rel(gb, ref) < 1e-3


@pytest.mark.slow  # a convergence order over several step sizes
def test_saved_layer_cotangents_converge_at_the_solver_order():
    """A loss of the SaveAt(layers=True) trajectory (cotangents injected at the layer boundaries):
    the continuous adjoint's gradient in (θ, x0, z0, w) converges to the continuous one at Heun's order 2."""
    model, x0, ctx, _ = _problem(11, layers=2)

    def grad(adjoint, solver, steps):
        def f(inputs):
            m, x, z, w = inputs
            sol = cfm_jax.forward(
                m,
                x,
                cfm_jax.EmpiricalMeasure.unchecked(z, w),
                solver=solver,
                steps=steps,
                saveat=cfm_jax.SaveAt(layers=True),
                adjoint=adjoint,
            )
            assert sol.xs is not None and sol.contexts is not None  # saved at the layers
            return jnp.sum(jnp.tanh(sol.xs) ** 2) + 0.1 * jnp.sum(sol.contexts.points[1:] ** 3)

        return eqx.filter_jit(eqx.filter_grad(f))((model, x0, ctx.points, ctx.weights))

    ref = grad(diffrax.RecursiveCheckpointAdjoint(), diffrax.Bosh3(), 2 * 64)
    steps = np.array([32, 64])  # past the pre-asymptotic range of this (strongly coupled) problem
    errs = [_rel(grad(ContinuousAdjoint(), diffrax.Heun(), int(s)), ref) for s in steps]
    slope = -np.polyfit(np.log(steps), np.log(errs), 1)[0]
    assert 1.7 <= slope <= 2.5, (errs, slope)


@pytest.mark.slow  # one program per step count
def test_piecewise_linear_path_at_awkward_step_counts():
    """On a piecewise-linear path (kinks at the L = 3 nodes) the continuous adjoint converges at Heun's
    order over step counts that are odd multiples of L (no step straddles a node); a count that is not
    a multiple of L, or fewer steps than layers, is refused naming `steps`."""
    model, x0, ctx, y = _problem(11, layers=3)
    params = {k: jnp.concatenate([v, 0.5 * v[:1]], 0) for k, v in model.stacked_params().items()}
    path = cfm_jax.PiecewiseLinearCFM(model.field, params, model.dim)
    fine: dict[str, Any] = dict(solver=diffrax.Tsit5(), steps=3 * 64, adjoint=diffrax.RecursiveCheckpointAdjoint())
    _, ref = cfm_jax.loss_and_grad(path, x0, ctx, y, **fine)
    steps = np.array([9, 15, 27, 45])  # 1 step per layer (3) is pre-asymptotic
    errs = [
        _rel(
            cfm_jax.loss_and_grad(path, x0, ctx, y, solver=diffrax.Heun(), steps=int(s), adjoint=ContinuousAdjoint())[
                1
            ],
            ref,
        )
        for s in steps
    ]
    order = -np.polyfit(np.log(steps), np.log(errs), 1)[0]
    assert 1.7 <= order <= 2.5, (errs, order)
    for bad in (4, 2):
        with pytest.raises(ValueError, match="`steps`"):
            cfm_jax.forward(path, x0, ctx, solver=diffrax.Heun(), steps=bad, adjoint=ContinuousAdjoint())


def test_a_backward_solve_that_fails_is_raised_however_the_gradient_is_taken():
    """An adaptive backward solve that reaches ``max_steps`` is raised with diffrax's message, whether
    the gradient is taken under ``jax.jit`` (of a loss linear in the output: only the backward carries
    the check) or in ``cfm_jax.compiled``; a looser tolerance gives finite gradients (the check is not
    always on)."""
    import diffrax

    key_m, key_x, key_z = jax.random.split(jax.random.key(3), 3)
    model = cfm_jax.Transformer.init(key_m, dim=3, heads=1, mlp_width=4, layers=2)
    x0, z = jax.random.normal(key_x, (2, 3)), jax.random.normal(key_z, (6, 3))

    def loss(m, rtol):
        adjoint = cfm_jax.ContinuousAdjoint(
            solver=diffrax.Tsit5(), stepsize_controller=diffrax.PIDController(rtol=rtol, atol=rtol)
        )
        controller = diffrax.PIDController(rtol=1e-3, atol=1e-3)
        sol = cfm_jax.forward(
            m, x0, z, solver=diffrax.Tsit5(), stepsize_controller=controller, max_steps=8, adjoint=adjoint
        )
        return jnp.sum(sol.x1)  # linear: the backward alone carries the check

    # the tolerances are traced: each way compiles one program for both runs
    for way in (lambda f: jax.jit(jax.grad(f)), lambda f: cfm_jax.compiled(jax.grad(f))):
        grad = way(loss)
        with pytest.raises(Exception, match="backward solve failed: The maximum number of solver steps"):
            jax.block_until_ready(grad(model, jnp.asarray(1e-12)))
        grads = grad(model, jnp.asarray(1e-2))
        assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(eqx.filter(grads, eqx.is_inexact_array)))
