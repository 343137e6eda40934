"""The flow: Euler is the residual network, invariances of the context, solver orders, jit and vmap."""

from typing import Any

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _problems import residual_network

import cfm_jax
from cfm_jax import EmpiricalMeasure, SaveAt, forward, split_atom


def _naive_velocity(model, l, q, z, w):
    """V(q, μ; θ_l) written out head by head with an explicit softmax (independent path)."""
    out = np.zeros_like(q)
    for h in range(model.num_heads):
        Q, K, V = (np.asarray(a[l, h]) for a in (model.Q, model.K, model.V))
        for i in range(q.shape[0]):
            logits = (Q @ q[i]) @ (K @ z.T)
            a = w * np.exp(logits - logits.max())
            a /= a.sum()
            out[i] += V @ (a @ z)
    if model.W1 is not None:
        W1, b1, W2, b2 = (np.asarray(a[l]) for a in (model.W1, model.b1, model.W2, model.b2))
        out += np.asarray(model.activation(jnp.asarray(q @ W1.T + b1))) @ W2.T + b2
    return out


def test_euler_one_step_per_layer_is_the_residual_network(small_problem):
    model, x0, ctx = small_problem
    x, z, w = (np.asarray(a, np.float64) for a in (x0, ctx.points, ctx.weights))
    L = model.num_layers
    for l in range(L):
        vx = _naive_velocity(model, l, x, z, w)
        vz = _naive_velocity(model, l, z, z, w)
        x, z = x + vx / L, z + vz / L
    sol = forward(model, x0, ctx)
    np.testing.assert_allclose(sol.x1, x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sol.context.points, z, rtol=0, atol=1e-12)
    x1_scan, z1_scan = residual_network(model, x0, ctx)
    np.testing.assert_allclose(sol.x1, x1_scan, rtol=0, atol=1e-13)


def test_single_token_and_saveat(small_problem):
    model, x0, ctx = small_problem
    batch = forward(model, x0, ctx, saveat=SaveAt(layers=True))
    single = forward(model, x0[1], ctx)
    assert single.x1.shape == (3,)
    np.testing.assert_allclose(single.x1, batch.x1[1], atol=1e-13)
    assert batch.ts is not None and batch.xs is not None and batch.contexts is not None
    assert batch.ts.shape == (model.num_layers + 1,)
    np.testing.assert_allclose(batch.ts, np.arange(model.num_layers + 1) / model.num_layers, atol=1e-14)
    np.testing.assert_allclose(batch.xs[-1], batch.x1, atol=0)
    np.testing.assert_allclose(batch.contexts.points[0], ctx.points, atol=0)
    steps = forward(model, x0, ctx, steps=3 * model.num_layers, saveat=SaveAt(steps=True))
    assert steps.ts is not None and steps.xs is not None
    assert steps.xs.shape == (3 * model.num_layers + 1, 2, 3)
    np.testing.assert_allclose(steps.ts[::3], batch.ts, atol=1e-14)


def test_context_permutation_invariance(small_problem):
    model, x0, ctx = small_problem
    perm = jax.random.permutation(jax.random.key(5), ctx.size)
    a = forward(model, x0, ctx)
    b = forward(model, x0, EmpiricalMeasure(ctx.points[perm], ctx.weights[perm]))
    np.testing.assert_allclose(a.x1, b.x1, atol=1e-13)
    np.testing.assert_allclose(a.context.points[perm], b.context.points, atol=1e-13)


def test_splitting_an_atom_changes_nothing(small_problem):
    model, x0, ctx = small_problem
    a = forward(model, x0, ctx)
    split = split_atom(ctx, 3, fraction=0.3)
    b = forward(model, x0, split)
    np.testing.assert_allclose(a.x1, b.x1, atol=1e-13)
    np.testing.assert_allclose(b.context.points[3], b.context.points[-1], atol=1e-13)  # the two copies move together
    np.testing.assert_allclose(a.context.points, b.context.points[:-1], atol=1e-13)


def test_uniform_weights_equal_unweighted(small_problem):
    model, x0, ctx = small_problem
    n = ctx.size
    a = forward(model, x0, ctx.points)
    b = forward(model, x0, EmpiricalMeasure(ctx.points, jnp.full((n,), 1.0 / n)))
    np.testing.assert_allclose(a.x1, b.x1, atol=1e-14)


def test_weighted_measure_matches_repeated_points(small_problem):
    """w = (1/2, 1/4, 1/4) equals the uniform measure on (z0, z0, z1, z2)."""
    model, x0, _ = small_problem
    z = jax.random.normal(jax.random.key(8), (3, 3))
    weighted = EmpiricalMeasure(z, jnp.array([0.5, 0.25, 0.25]))
    repeated = EmpiricalMeasure(jnp.concatenate([z[:1], z]))
    np.testing.assert_allclose(forward(model, x0, weighted).x1, forward(model, x0, repeated).x1, atol=1e-13)


@pytest.fixture(scope="module")
def exact_x1(small_problem):
    """The exact flow, to ~1e-13: Tsit5 with 64 steps per layer (the field is smooth within a layer)."""
    model, x0, ctx = small_problem
    return forward(model, x0, ctx, solver=diffrax.Tsit5(), steps=64 * model.num_layers).x1


def _fitted_order(small_problem, exact, solver, ks):
    model, x0, ctx = small_problem
    errs = [
        float(jnp.abs(forward(model, x0, ctx, solver=solver, steps=int(k) * model.num_layers).x1 - exact).max())
        for k in ks
    ]
    return np.polyfit(np.log(ks), np.log(errs), 1)[0], errs


@pytest.mark.parametrize(
    "solver,order,ks",
    [(diffrax.Euler(), 1, [4, 8, 16]), (diffrax.Heun(), 2, [2, 4, 8]), (diffrax.Bosh3(), 3, [2, 4, 8])],
    ids=["euler", "heun", "bosh3"],
)
def test_solvers_converge_at_their_order(small_problem, exact_x1, solver, order, ks):
    slope, errs = _fitted_order(small_problem, exact_x1, solver, np.array(ks))
    assert -(order + 0.4) < slope < -(order - 0.25), (slope, errs)


def test_adaptive_solver(small_problem, exact_x1):
    model, x0, ctx = small_problem
    exact = exact_x1
    sol = forward(
        model,
        x0,
        ctx,
        solver=diffrax.Tsit5(),
        stepsize_controller=diffrax.PIDController(rtol=1e-9, atol=1e-9),
        saveat=SaveAt(layers=True),
    )
    np.testing.assert_allclose(sol.x1, exact, atol=1e-7)
    assert int(sol.stats["num_steps"]) >= model.num_layers


def test_piecewise_linear_path_and_user_field():
    """A user field plugs into the solver; a constant-in-s linear path reproduces the constant one."""

    class Linear(cfm_jax.AbstractField):
        def __call__(self, x, measure, params):
            return x @ params["A"].T + measure.mean @ params["B"].T

    d, L = 3, 4
    A = 0.3 * jax.random.normal(jax.random.key(9), (d, d))
    B = 0.3 * jax.random.normal(jax.random.key(10), (d, d))
    const = cfm_jax.PiecewiseConstantCFM(Linear(), {"A": jnp.stack([A] * L), "B": jnp.stack([B] * L)}, dim=d)
    lin = cfm_jax.PiecewiseLinearCFM(Linear(), {"A": jnp.stack([A] * (L + 1)), "B": jnp.stack([B] * (L + 1))}, dim=d)
    x0 = jnp.ones((1, d))
    z = jax.random.normal(jax.random.key(11), (5, d))
    exact_const = forward(const, x0, z, solver=diffrax.Tsit5(), steps=8 * L).x1
    exact_lin = forward(lin, x0, z, solver=diffrax.Tsit5(), steps=8 * L).x1
    np.testing.assert_allclose(exact_const, exact_lin, atol=1e-12)
    # Linear system: x and the context mean obey a closed-form ODE; compare with expm.
    from jax.scipy.linalg import expm

    Mbig = jnp.block([[A, B], [jnp.zeros((d, d)), A + B]])
    y1 = expm(Mbig) @ jnp.concatenate([x0[0], z.mean(0)])
    np.testing.assert_allclose(exact_const[0], y1[:d], atol=1e-10)


def test_jit_and_vmap_over_samples(small_model):
    kx, kz = jax.random.split(jax.random.key(12))
    x0 = jax.random.normal(kx, (5, 2, 3))
    zs = jax.random.normal(kz, (5, 6, 3))
    batched = jax.jit(jax.vmap(lambda x, z: forward(small_model, x, z).x1))(x0, zs)
    for i in (0, 4):
        np.testing.assert_allclose(batched[i], forward(small_model, x0[i], zs[i]).x1, atol=1e-13)


@pytest.mark.parametrize("t0, t1", [(0.0, 0.25), (0.75, 0.5)])
def test_layer_grid_steps_where_diffrax_step_to_does(t0, t1):
    """The layer grid's controller is StepTo without StepTo's checks: the same steps, forwards and
    backwards (the backsolve direction), to the last bit."""
    from cfm_jax._flow.loop import _Grid

    term = diffrax.ODETerm(lambda t, y, a: -a * y + jnp.sin(3 * t))
    grid = t0 + (t1 - t0) * jnp.arange(6, dtype=jnp.float64) / 5
    grid = grid.at[0].set(t0).at[-1].set(t1)
    run = lambda c: diffrax.diffeqsolve(  # noqa: E731
        term, diffrax.Bosh3(), t0, t1, None, jnp.ones(3), 1.3, stepsize_controller=c, saveat=diffrax.SaveAt(steps=True)
    )
    ours, theirs = run(_Grid(grid)), run(diffrax.StepTo(ts=grid))
    np.testing.assert_array_equal(ours.ts, theirs.ts)
    np.testing.assert_array_equal(ours.ys, theirs.ys)
    assert int(ours.stats["num_steps"]) == 5


def test_autodiff_through_diffrax_holds_no_host_callback_without_checks(small_problem):
    """throw=False leaves no callback in a diffrax adjoint's program either (a program with one is
    never stored by the persistent compilation cache), and throw=True keeps the value checks."""
    model, x0, ctx = small_problem
    y = jnp.zeros_like(x0)
    for adjoint in (diffrax.RecursiveCheckpointAdjoint(), diffrax.DirectAdjoint()):

        def grads(m, throw, adjoint=adjoint):
            return cfm_jax.loss_and_grad(m, x0, ctx, y, adjoint=adjoint, throw=throw)

        assert "callback" not in jax.jit(lambda m: grads(m, False)).lower(model).as_text()
        assert "callback" in jax.jit(lambda m: grads(m, True)).lower(model).as_text()


def _euler_states(model, x0, ctx, steps_per_layer=1):
    """Every state ``(x, z)`` of explicit Euler with ``steps_per_layer`` steps a layer, written out in
    NumPy from :func:`_naive_velocity`: entry i is the state after i steps (entry 0 the start)."""
    x, z, w = (np.asarray(a, np.float64) for a in (x0, ctx.points, ctx.weights))
    h = 1 / (model.num_layers * steps_per_layer)
    states = [(x, z)]
    for l in range(model.num_layers):
        for _ in range(steps_per_layer):
            vx, vz = _naive_velocity(model, l, x, z, w), _naive_velocity(model, l, z, z, w)
            x, z = x + h * vx, z + h * vz
            states.append((x, z))
    return states


def _spec(model, steps_per_layer=1, saveat=SaveAt()):
    from cfm_jax._flow import FlowSpec

    return FlowSpec(diffrax.Euler(), None, saveat, steps_per_layer * model.num_layers)


def test_advance_runs_exactly_the_first_layers(small_problem):
    """advance(…, k) is the state after layers 0, …, k − 1 and no other, for every k in [0, L] (traced:
    one program), with one and with two Euler steps a layer: the residual updates written out apart."""
    from cfm_jax._flow import EmpiricalContext, advance

    model, x0, ctx = small_problem
    L = model.num_layers
    for per_layer in (1, 2):
        spec = _spec(model, per_layer)
        run = jax.jit(lambda k, spec=spec: advance(model, EmpiricalContext(ctx.weights), (x0, ctx.points), spec, k))
        states = _euler_states(model, x0, ctx, per_layer)
        for k in range(L + 1):
            x, z = run(k)
            want_x, want_z = states[k * per_layer]
            np.testing.assert_allclose(x, want_x, rtol=0, atol=1e-12, err_msg=f"{per_layer} steps a layer, k = {k}")
            np.testing.assert_allclose(z, want_z, rtol=0, atol=1e-12, err_msg=f"{per_layer} steps a layer, k = {k}")


def test_state_before_is_the_state_at_the_start_of_a_step_or_layer(small_problem):
    """state_before(y0, ys, j) from a loop's emitted states is the state at the start of layer j
    (``ends``) or of step j (``steps``, merged over layers), for every j (traced), the last being the
    final state; written-out Euler states are the reference."""
    from cfm_jax._flow import Emit, EmpiricalContext, loop, merge_leading, state_before

    model, x0, ctx = small_problem
    L, y0 = model.num_layers, (x0, ctx.points)
    context = EmpiricalContext(ctx.weights)
    before = jax.jit(state_before)
    emits: tuple[tuple[Emit, int], ...] = (("ends", 1), ("steps", 2))
    for emit, per_layer in emits:
        out = loop(model, context, y0, _spec(model, per_layer), emit=emit)
        assert out.ys is not None
        ys = out.ys if emit == "ends" else jax.tree.map(merge_leading, out.ys)
        states = _euler_states(model, x0, ctx, per_layer)
        assert ys[0].shape[0] == L * per_layer == len(states) - 1
        for j in range(L * per_layer + 1):
            x, z = before(y0, ys, j)
            np.testing.assert_allclose(x, states[j][0], rtol=0, atol=1e-12, err_msg=f"{emit}, j = {j}")
            np.testing.assert_allclose(z, states[j][1], rtol=0, atol=1e-12, err_msg=f"{emit}, j = {j}")


def test_the_first_failed_layer_is_the_solves_result():
    """Per-layer results reduce to the first failure, whichever follow it (and to success when every
    layer succeeded): a later failure, or a success after a failure, must not hide it."""
    from cfm_jax._flow.loop import first_failure

    R = diffrax.RESULTS
    ok, steps, singular = R.successful, R.max_steps_reached, R.singular

    for items, want in (
        ((ok, ok, ok), ok),
        ((ok, steps, ok, singular), steps),
        ((ok, singular, ok, steps), singular),
        ((steps, steps), steps),
        ((ok, ok, singular), singular),
    ):
        stacked = jax.tree.map(lambda *v: jnp.stack(v), *items)
        assert bool(first_failure(stacked) == want), (items, want)


def test_without_the_context_the_last_step_moves_the_tokens_alone(small_problem):
    """``SaveAt(context=False)``: the carried context's last step (and that one only) leaves the context
    where it was, the tokens at every step are the written-out residual network's, and the solution
    holds no context; a solver that is not the residual network keeps every step (the same tokens)."""
    from cfm_jax._flow import EmpiricalContext, loop

    model, x0, ctx = small_problem
    for per_layer in (1, 2):
        states = _euler_states(model, x0, ctx, per_layer)
        spec = _spec(model, per_layer, SaveAt(steps=True, context=False))
        carried = EmpiricalContext(ctx.weights).ending(spec)
        assert carried.last == per_layer * model.num_layers - 1
        out = jax.jit(lambda: loop(model, carried, (x0, ctx.points), spec, emit="steps"))()
        xs, zs = (a.reshape((-1,) + a.shape[2:]) for a in out.ys)
        for i, (x, z) in enumerate(states[1:]):
            np.testing.assert_allclose(xs[i], x, rtol=0, atol=1e-12, err_msg=f"{per_layer} a layer, step {i}")
            z_want = states[-2][1] if i == len(states) - 2 else z  # the last step: the context stays
            np.testing.assert_allclose(zs[i], z_want, rtol=0, atol=1e-12, err_msg=f"{per_layer} a layer, step {i}")
        assert EmpiricalContext(ctx.weights).ending(_spec(model, per_layer)).last is None  # context kept
    kept = forward(model, x0, ctx, saveat=SaveAt(layers=True))
    options: dict[str, Any]
    for options in ({}, {"steps": 2 * model.num_layers}, {"solver": diffrax.Heun()}):
        want = kept if not options else forward(model, x0, ctx, saveat=SaveAt(layers=True), **options)
        sol = forward(model, x0, ctx, saveat=SaveAt(layers=True, context=False), **options)
        assert sol.context is None and sol.contexts is None
        assert sol.xs is not None and want.xs is not None
        np.testing.assert_allclose(sol.xs, want.xs, rtol=0, atol=1e-13, err_msg=str(options))
        np.testing.assert_allclose(sol.x1, want.x1, rtol=0, atol=1e-13, err_msg=str(options))
