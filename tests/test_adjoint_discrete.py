"""DiscreteAdjoint, the exact adjoint of explicit Euler, against autodiff and finite differences (float64)."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from _problems import flat as _flat, problem as _problem, rel as _rel, residual_network

import cfm_jax

AUTODIFF = diffrax.RecursiveCheckpointAdjoint()


@pytest.mark.parametrize(
    "seed,steps,adjoint", [(0, None, AUTODIFF), (1, 8, diffrax.DirectAdjoint()), (2, None, AUTODIFF)]
)
def test_discrete_adjoint_equals_autodiff(seed, steps, adjoint):
    """Several random models (H=2, MLP, non-uniform weights, B=2); 1 and 2 Euler steps per layer."""
    model, x0, ctx, y = _problem(seed)
    l_h, g_h = cfm_jax.loss_and_grad(model, x0, ctx, y, steps=steps)
    l_a, g_a = cfm_jax.loss_and_grad(model, x0, ctx, y, steps=steps, adjoint=adjoint)
    assert type(g_h) is cfm_jax.Transformer and g_h.W1 is not None and model.W1 is not None  # the MLP is on
    assert g_h.W1.shape == model.W1.shape
    assert abs(float(l_h - l_a)) <= 1e-12 * abs(float(l_a))
    for name in ("Q", "K", "V", "W1", "b1", "W2", "b2"):
        assert _rel(getattr(g_h, name), getattr(g_a, name)) <= 1e-10, name


def test_discrete_adjoint_matches_central_finite_differences():
    model, x0, ctx, y = _problem(3)
    _, g = cfm_jax.loss_and_grad(model, x0, ctx, y)
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def loss(p):
        x1 = residual_network(eqx.combine(p, static), x0, ctx)[0]
        return 0.5 * jnp.sum((x1 - y) ** 2) / x0.shape[0]

    loss = jax.jit(loss)

    keys = jax.random.split(jax.random.key(7), 4)
    leaves, treedef = jax.tree.flatten(params)
    eps = 1e-5
    for key in keys:
        dirs = [jax.random.normal(k, a.shape) for k, a in zip(jax.random.split(key, len(leaves)), leaves)]
        v = jax.tree.unflatten(treedef, dirs)
        plus = jax.tree.map(lambda a, b: a + eps * b, params, v)
        minus = jax.tree.map(lambda a, b: a - eps * b, params, v)
        fd = (loss(plus) - loss(minus)) / (2 * eps)
        hand = jnp.dot(_flat(eqx.filter(g, eqx.is_inexact_array)), _flat(v))
        assert abs(float(hand - fd)) <= 1e-6 * abs(float(fd)), (float(hand), float(fd))


def test_context_gradient_is_weighted_particle_adjoint():
    """∂L/∂z_i(0) = w_i a_i(0) (a_i is the gradient of the test field)."""
    model, x0, ctx, y = _problem(4)
    sol = cfm_jax.adjoint_trajectories(model, x0, ctx, y)

    def loss(z):
        x1 = residual_network(model, x0, cfm_jax.EmpiricalMeasure(z, ctx.weights))[0]
        return 0.5 * jnp.sum((x1 - y) ** 2) / 2

    gz = jax.jit(jax.grad(loss))(ctx.points)
    assert _rel(ctx.weights[:, None] * sol.a[0], gz) <= 1e-10
    # p_0 = ∂L/∂x_0
    gx = jax.jit(jax.grad(lambda x: 0.5 * jnp.sum((residual_network(model, x, ctx)[0] - y) ** 2) / 2))(x0)
    assert _rel(sol.ps[0], gx) <= 1e-10
    assert sol.ts.shape == (model.num_layers + 1,) and sol.a.shape == (5, 7, 3)
    # the terminal condition a(1) = ∂L/∂z(1) / w is zero for a loss of the tokens only
    assert float(jnp.abs(sol.a[-1]).max()) == 0.0


class _KernelField(cfm_jax.AbstractField):
    """A user field without closed forms: V(x, μ) = Σ_j w_j tanh(W (z_j − x)) e^{−|x−z_j|²/2}."""

    def __call__(self, x, measure, params):
        diff = measure.points[None, :, :] - x[:, None, :]
        k = jnp.exp(-0.5 * jnp.sum(diff**2, -1)) * measure.weights
        return jnp.einsum("qn,qnd->qd", k, jnp.tanh(diff @ params["W"].T)) + params["c"]


def test_user_field_gets_an_adjoint():
    _, x0, ctx, y = _problem(6)
    kw, kc = jax.random.split(jax.random.key(11))
    model = cfm_jax.PiecewiseConstantCFM(
        _KernelField(), {"W": jax.random.normal(kw, (3, 3, 3)), "c": jax.random.normal(kc, (3, 3))}, 3
    )
    _, g_h = cfm_jax.loss_and_grad(model, x0, ctx, y)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    g_a = jax.jit(
        jax.grad(lambda p: 0.5 * jnp.sum((residual_network(eqx.combine(p, static), x0, ctx)[0] - y) ** 2) / 2)
    )(params)
    assert type(g_h) is cfm_jax.PiecewiseConstantCFM
    assert _rel(g_h.params, g_a.params) <= 1e-10


def test_piecewise_linear_path_discrete_adjoint():
    _, x0, ctx, y = _problem(12)
    kq, kk, kv = jax.random.split(jax.random.key(12), 3)
    params = {n: 0.6 * jax.random.normal(k, (4, 1, 3, 3)) for n, k in zip("QKV", (kq, kk, kv))}
    model = cfm_jax.PiecewiseLinearCFM(cfm_jax.AttentionField(), params, 3)
    _, g_h = cfm_jax.loss_and_grad(model, x0, ctx, y, steps=6)
    _, g_a = cfm_jax.loss_and_grad(model, x0, ctx, y, steps=6, adjoint=AUTODIFF)
    assert _rel(g_h.params, g_a.params) <= 1e-10


def test_chunked_and_dense_adjoints_agree():
    model, x0, ctx, y = _problem(8)
    _, g_d = cfm_jax.loss_and_grad(model.with_chunking(None), x0, ctx, y)
    _, g_c = cfm_jax.loss_and_grad(model.with_chunking(3), x0, ctx, y)
    assert _rel(g_c, g_d) <= 1e-12


def test_float32_large_logits_stay_finite():
    model, x0, ctx, y = _problem(17)
    model = model.astype(jnp.float32)
    model = eqx.tree_at(lambda m: m.Q, model, model.Q * 100.0)  # logits ~ 1e4
    x0, y = x0.astype(jnp.float32), y.astype(jnp.float32)
    ctx = cfm_jax.EmpiricalMeasure(ctx.points.astype(jnp.float32), ctx.weights.astype(jnp.float32))
    _, g = cfm_jax.loss_and_grad(model, x0, ctx, y)
    assert g.Q.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(_flat(eqx.filter(g, eqx.is_array)))))


@pytest.mark.parametrize("memory", [cfm_jax.StoreAll(), cfm_jax.StoreEvery(2), cfm_jax.Recompute()])
@pytest.mark.parametrize("steps", [None, 8])
def test_without_the_context_the_sweep_skips_its_rows_at_the_last_step_and_the_gradient_is_the_same(memory, steps):
    """``SaveAt(context=False)``: the forward's last step moves the tokens alone and the sweep reads the
    token rows alone there (a second branch in the program), and every gradient (θ, tokens, atoms,
    weights) of a loss on the saved token path is the one of the solve that keeps the context."""
    model, x0, ctx, _ = _problem(3)
    adjoint = cfm_jax.DiscreteAdjoint(memory=memory)

    def loss(model, x0, points, weights, kept):
        sol = cfm_jax.forward(
            model,
            x0,
            cfm_jax.EmpiricalMeasure(points, weights),
            saveat=cfm_jax.SaveAt(layers=True, context=kept),
            adjoint=adjoint,
            steps=steps,
        )
        assert sol.xs is not None
        return jnp.sum(jnp.sin(sol.xs)) + jnp.sum(sol.x1**2)

    grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3)), static_argnums=4)
    args = (model, x0, ctx.points, ctx.weights)
    want, got = grad(*args, True), grad(*args, False)
    assert _rel(got, want) <= 1e-12
    assert _rel(got[2], want[2]) <= 1e-12 and _rel(got[3], want[3]) <= 1e-12  # the atoms and weights apart
    conds = [str(jax.make_jaxpr(grad, static_argnums=4)(*args, kept)).count("cond[") for kept in (True, False)]
    assert conds[1] >= conds[0] + 2  # the forward's last step and the sweep's, each a branch of its own
