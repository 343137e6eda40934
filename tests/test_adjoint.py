"""Hand-derived Eulerian adjoints vs autodiff, finite differences and each other (float64)."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax.adjoint import local_vjp


def _flat(tree):
    return jnp.concatenate([jnp.ravel(a) for a in jax.tree.leaves(tree)])


def _rel(a, b):
    a, b = _flat(a), _flat(b)
    return float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b))


def _problem(seed, d=3, n=7, B=2, heads=2, mlp=5, layers=4):
    km, kx, kz, kw, ky = jax.random.split(jax.random.key(seed), 5)
    model = cfm_jax.Transformer.init(km, d, heads=heads, mlp_width=mlp, layers=layers, qk_scale=1.5, v_scale=1.5)
    # non-zero biases so that every parameter has a non-trivial gradient
    model = eqx.tree_at(lambda m: (m.b1, m.b2), model, (0.3 * jnp.ones_like(model.b1), -0.2 * jnp.ones_like(model.b2)))
    x0 = jax.random.normal(kx, (B, d))
    w = jax.random.uniform(kw, (n,), minval=0.2, maxval=2.0)
    ctx = cfm_jax.EmpiricalMeasure(jax.random.normal(kz, (n, d)), w / w.sum())
    y = jax.random.normal(ky, (B, d))
    return model, x0, ctx, y


@pytest.mark.parametrize(
    "seed,steps,adjoint", [(0, None, None), (1, 8, diffrax.DirectAdjoint()), (2, None, None)]
)
def test_discrete_adjoint_equals_autodiff(seed, steps, adjoint):
    """Several random models (H=2, MLP, non-uniform weights, B=2); 1 and 2 Euler steps per layer."""
    model, x0, ctx, y = _problem(seed)
    l_h, g_h = cfm_jax.value_and_grad(model, x0, ctx, y, steps=steps)
    l_a, g_a = cfm_jax.value_and_grad(model, x0, ctx, y, steps=steps, method="autodiff", adjoint=adjoint)
    assert type(g_h) is cfm_jax.Transformer and g_h.W1.shape == model.W1.shape
    assert abs(float(l_h - l_a)) <= 1e-12 * abs(float(l_a))
    for name in ("Q", "K", "V", "W1", "b1", "W2", "b2"):
        assert _rel(getattr(g_h, name), getattr(g_a, name)) <= 1e-10, name


def test_discrete_adjoint_matches_central_finite_differences():
    model, x0, ctx, y = _problem(3)
    _, g = cfm_jax.value_and_grad(model, x0, ctx, y)
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def loss(p):
        x1 = cfm_jax.residual_forward(eqx.combine(p, static), x0, ctx)[0]
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
        x1 = cfm_jax.residual_forward(model, x0, cfm_jax.EmpiricalMeasure(z, ctx.weights))[0]
        return 0.5 * jnp.sum((x1 - y) ** 2) / 2

    gz = jax.jit(jax.grad(loss))(ctx.points)
    assert _rel(ctx.weights[:, None] * sol.a[0], gz) <= 1e-10
    # p_0 = ∂L/∂x_0
    gx = jax.jit(jax.grad(lambda x: 0.5 * jnp.sum((cfm_jax.residual_forward(model, x, ctx)[0] - y) ** 2) / 2))(x0)
    assert _rel(sol.ps[0], gx) <= 1e-10
    assert sol.ss.shape == (model.num_layers + 1,) and sol.a.shape == (5, 7, 3)
    assert float(jnp.abs(sol.a[-1]).max()) == 0.0


def test_generic_vjp_path_equals_closed_form():
    model, x0, ctx, y = _problem(5)
    _, g_c = cfm_jax.value_and_grad(model, x0, ctx, y)
    _, g_g = cfm_jax.value_and_grad(model, x0, ctx, y, closed_form=False)
    assert _rel(g_g, g_c) <= 1e-10
    # the local products themselves, including probe targets and passive rows
    th = model.layer_params(1)
    kq, kc, kt = jax.random.split(jax.random.key(9), 3)
    q, c = jax.random.normal(kq, (6, 3)), jax.random.normal(kc, (6, 3))
    act = jnp.array([1.0, 1, 0, 1, 0, 1])
    t = jax.random.normal(kt, (4, 3))
    lv = eqx.filter_jit(local_vjp)
    a = lv(model.field, th, ctx, q, c, active=act, targets=t)
    b = lv(model.field, th, ctx, q, c, active=act, targets=t, closed_form=False)
    for name in ("velocity", "dx", "dmu", "dtargets", "phi"):
        assert _rel(getattr(a, name), getattr(b, name)) <= 1e-10, name
    assert _rel(a.dparams, b.dparams) <= 1e-10


class _KernelField(cfm_jax.AbstractField):
    """A user field without closed forms: V(x, μ) = Σ_j w_j tanh(W (z_j − x)) e^{−|x−z_j|²/2}."""

    def __call__(self, x, measure, params):
        diff = measure.points[None, :, :] - x[:, None, :]
        k = jnp.exp(-0.5 * jnp.sum(diff**2, -1)) * measure.weights
        return jnp.einsum("qn,qnd->qd", k, jnp.tanh(diff @ params["W"].T)) + params["c"]


def test_user_field_gets_an_adjoint():
    _, x0, ctx, y = _problem(6)
    kw, kc = jax.random.split(jax.random.key(11))
    model = cfm_jax.CFM(_KernelField(), {"W": jax.random.normal(kw, (3, 3, 3)), "c": jax.random.normal(kc, (3, 3))}, 3)
    _, g_h = cfm_jax.value_and_grad(model, x0, ctx, y)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    g_a = jax.jit(
        jax.grad(lambda p: 0.5 * jnp.sum((cfm_jax.residual_forward(eqx.combine(p, static), x0, ctx)[0] - y) ** 2) / 2)
    )(params)
    assert type(g_h) is cfm_jax.CFM
    assert _rel(g_h.params, g_a.params) <= 1e-10


def test_piecewise_linear_path_discrete_adjoint():
    _, x0, ctx, y = _problem(12)
    kq, kk, kv = jax.random.split(jax.random.key(12), 3)
    params = {n: 0.6 * jax.random.normal(k, (4, 1, 3, 3)) for n, k in zip("QKV", (kq, kk, kv))}
    model = cfm_jax.PiecewiseLinearCFM(cfm_jax.AttentionField(), params, 3)
    _, g_h = cfm_jax.value_and_grad(model, x0, ctx, y, steps=6)
    _, g_a = cfm_jax.value_and_grad(model, x0, ctx, y, steps=6, method="autodiff")
    assert _rel(g_h.params, g_a.params) <= 1e-10


def test_chunked_and_dense_adjoints_agree():
    model, x0, ctx, y = _problem(8)
    _, g_d = cfm_jax.value_and_grad(model.with_chunking(None), x0, ctx, y)
    _, g_c = cfm_jax.value_and_grad(model.with_chunking(3), x0, ctx, y)
    assert _rel(g_c, g_d) <= 1e-12


@pytest.mark.parametrize("checkpoint", ["layers", 2, "recompute"])
def test_checkpoint_modes_agree(checkpoint):
    model, x0, ctx, y = _problem(9)
    _, g0 = cfm_jax.value_and_grad(model, x0, ctx, y, steps=8)
    _, g1 = cfm_jax.value_and_grad(model, x0, ctx, y, steps=8, checkpoint=checkpoint)
    assert _rel(g1, g0) <= 1e-13


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
        _, g = cfm_jax.value_and_grad(model, x0, ctx, y, method="continuous_adjoint", solver=solver, steps=int(s))
        errs.append(_rel(g, ref))
    return np.array(errs), -np.polyfit(np.log(steps), np.log(errs), 1)[0]


def test_continuous_adjoint_converges_at_solver_order(continuous_problem):
    errs, slope = _order(continuous_problem, diffrax.Heun(), np.array([8, 16, 32]))
    assert 1.7 <= slope <= 2.5 and errs[-1] < 2e-2, (errs, slope)


@pytest.mark.slow
@pytest.mark.parametrize("solver,order", [(diffrax.Heun(), 2), (diffrax.Ralston(), 2), (diffrax.Bosh3(), 3)])
def test_continuous_adjoint_order_fits(continuous_problem, solver, order):
    errs, slope = _order(continuous_problem, solver, np.array([4, 6, 8, 12, 16]))
    assert order - 0.4 <= slope <= order + 0.8, (errs, slope)


@pytest.mark.slow
def test_discrete_adjoint_is_first_order_in_the_continuous_gradient(continuous_problem):
    model, x0, ctx, y, ref = continuous_problem
    errs = [_rel(cfm_jax.value_and_grad(model, x0, ctx, y, steps=s)[1], ref) for s in (16, 64)]
    assert 0.7 <= np.log(errs[0] / errs[1]) / np.log(4) <= 1.3


@pytest.mark.slow
def test_continuous_adjoint_adaptive(continuous_problem):
    model, x0, ctx, y, ref = continuous_problem
    errs = []
    for tol in (1e-4, 1e-7):
        tol = jnp.asarray(tol)  # traced tolerances: one compilation
        ctrl = diffrax.PIDController(rtol=tol, atol=tol)
        _, g = cfm_jax.value_and_grad(
            model, x0, ctx, y, method="continuous_adjoint", solver=diffrax.Tsit5(), steps=2, stepsize_controller=ctrl
        )
        errs.append(_rel(g, ref))
    assert errs[1] < errs[0] / 30 and errs[1] < 1e-6, errs


@pytest.mark.slow
def test_continuous_backsolve_converges(continuous_problem):
    model, x0, ctx, y, ref = continuous_problem
    _, gb = cfm_jax.value_and_grad(
        model, x0, ctx, y, method="continuous_adjoint", solver=diffrax.Bosh3(), steps=16, checkpoint="recompute"
    )
    assert _rel(gb, ref) < 1e-3


@pytest.mark.parametrize("method", ["discrete_adjoint", "continuous_adjoint"])
def test_probe_gradients_at_particles_equal_particle_adjoints(method):
    model, x0, ctx, y = _problem(13)
    kw = dict(method=method)
    if method == "continuous_adjoint":
        kw.update(solver=diffrax.Bosh3(), steps=8)
    sol = cfm_jax.adjoint_trajectories(model, x0, ctx, y, probes=ctx.points, **kw)  # same shapes: one compile
    for k in (0, 2, sol.ss.shape[0] - 1):
        probed = cfm_jax.adjoint_trajectories(model, x0, ctx, y, probes=sol.zs[k], **kw)
        assert probed.probe_grads.shape == (sol.ss.shape[0], 7, 3)
        assert float(jnp.max(jnp.abs(probed.probe_grads[k] - sol.a[k]))) <= 1e-10


def test_probe_values_are_first_variation_and_integrate_to_gradients():
    """φ_0(y) − Σ_i w_i φ_0(z_i) = d/dε L((1−ε)μ + ε δ_y), and ∇φ_s = probe_grads."""
    model, x0, ctx, y = _problem(14)
    ys = jax.random.normal(jax.random.key(3), (3, 3))
    sol = cfm_jax.adjoint_trajectories(model, x0, ctx, y, probes=jnp.concatenate([ys, ctx.points]))
    phi0 = sol.probe_values[0]

    def loss_eps(eps, yy):
        z = jnp.concatenate([ctx.points, yy[None]])
        w = jnp.concatenate([(1 - eps) * ctx.weights, eps[None]])
        x1 = cfm_jax.residual_forward(model, x0, cfm_jax.EmpiricalMeasure(z, w))[0]
        return 0.5 * jnp.sum((x1 - y) ** 2) / 2

    first_variation = jax.jit(jax.grad(loss_eps))
    for j in range(3):
        first_var = first_variation(jnp.asarray(1e-30), ys[j])
        assert abs(float(first_var - (phi0[j] - ctx.weights @ phi0[3:]))) <= 1e-9 * (1 + abs(float(first_var)))
    # finite differences of φ_s in the probe location give ∇φ_s
    k, h = 2, 1e-6
    e = jnp.eye(3)
    pts = jnp.concatenate([ys, ctx.points])
    vals = lambda pts: cfm_jax.adjoint_trajectories(model, x0, ctx, y, probes=pts).probe_values[k]  # noqa: E731
    fd = jnp.stack([(vals(pts + h * e[i]) - vals(pts - h * e[i])) / (2 * h) for i in range(3)], -1)
    assert _rel(sol.probe_grads[k], fd) <= 1e-7


def test_jit_vmap_user_loss_and_functional_gradient():
    model, x0, ctx, y = _problem(15)
    f = jax.jit(lambda a, c, t: cfm_jax.value_and_grad(model, a, c, t))
    l0, g0 = cfm_jax.value_and_grad(model, x0, ctx, y)
    l1, g1 = f(x0, ctx, y)
    assert abs(float(l1 - l0)) < 1e-14 and _rel(g1, g0) < 1e-13
    # vmap over samples (token, context, target): per-sample losses average to the batch loss
    zb = jnp.stack([ctx.points, ctx.points])
    lv, gv = jax.vmap(lambda a, z, t: cfm_jax.value_and_grad(model, a, cfm_jax.EmpiricalMeasure(z, ctx.weights), t))(
        x0, zb, y
    )
    assert lv.shape == (2,) and abs(float(lv.mean() - l0)) < 1e-13
    assert _rel(jax.tree.map(lambda a: a.mean(0), gv), g0) < 1e-12
    # a user loss, against jax.grad through the residual network
    user = lambda x1, t: jnp.sum(jnp.cos(x1 * t)) + jnp.sum(x1**4)  # noqa: E731
    lu, gu = cfm_jax.value_and_grad(model, x0, ctx, y, loss=user)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    ga = jax.jit(jax.grad(lambda p: user(cfm_jax.residual_forward(eqx.combine(p, static), x0, ctx)[0], y)))(params)
    assert _rel(gu, ga) < 1e-10
    fg = cfm_jax.functional_gradient(model, g0)
    assert _rel(fg.Q, model.num_layers * g0.Q) == 0.0 and fg.W1 is not None


def test_float32_large_logits_stay_finite():
    model, x0, ctx, y = _problem(17)
    model = model.astype(jnp.float32)
    model = eqx.tree_at(lambda m: m.Q, model, model.Q * 100.0)  # logits ~ 1e4
    x0, y = x0.astype(jnp.float32), y.astype(jnp.float32)
    ctx = cfm_jax.EmpiricalMeasure(ctx.points.astype(jnp.float32), ctx.weights.astype(jnp.float32))
    _, g = cfm_jax.value_and_grad(model, x0, ctx, y)
    assert g.Q.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(_flat(eqx.filter(g, eqx.is_array)))))


def test_bad_inputs_raise_clear_errors():
    model, x0, ctx, y = _problem(0)
    with pytest.raises(ValueError, match="method"):
        cfm_jax.value_and_grad(model, x0, ctx, y, method="magic")
    with pytest.raises(ValueError, match="BacksolveAdjoint.*continuous_adjoint"):
        cfm_jax.value_and_grad(model, x0, ctx, y, method="autodiff", adjoint=diffrax.BacksolveAdjoint())
    with pytest.raises(ValueError, match="`y`"):
        cfm_jax.value_and_grad(model, x0, ctx, y[:1])
    with pytest.raises(ValueError, match="`steps`"):
        cfm_jax.value_and_grad(model, x0, ctx, y, steps=5)
    with pytest.raises(ValueError, match="`solver`"):
        cfm_jax.value_and_grad(model, x0, ctx, y, solver=diffrax.Heun())
    with pytest.raises(ValueError, match="`checkpoint`"):
        cfm_jax.value_and_grad(model, x0, ctx, y, checkpoint=3)
    with pytest.raises(ValueError, match="`adjoint`"):
        cfm_jax.value_and_grad(model, x0, ctx, y, adjoint=diffrax.DirectAdjoint())
    with pytest.raises(ValueError, match="`probes`"):
        cfm_jax.adjoint_trajectories(model, x0, ctx, y, probes=jnp.zeros((2, 4)))
    with pytest.raises(ValueError, match="`x0`"):
        cfm_jax.value_and_grad(model, jnp.zeros((2, 4)), ctx, y)
    with pytest.raises(ValueError, match="`loss`"):
        cfm_jax.value_and_grad(model, x0, ctx, y, loss="l2")
