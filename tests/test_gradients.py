"""loss_and_grad, adjoint_trajectories (p_s, a_i(s), probes, φ_s, ∂L/∂w) and functional_gradient."""

from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _problems import problem as _problem, rel as _rel, residual_network

import cfm_jax
from cfm_jax._gradients import token_covectors

AUTODIFF = diffrax.RecursiveCheckpointAdjoint()


@pytest.mark.parametrize(
    "adjoint", [cfm_jax.DiscreteAdjoint(), cfm_jax.ContinuousAdjoint()], ids=["discrete", "continuous"]
)
def test_probe_gradients_at_particles_equal_particle_adjoints(adjoint):
    model, x0, ctx, y = _problem(13)
    kw = dict(adjoint=adjoint)
    if isinstance(adjoint, cfm_jax.ContinuousAdjoint):
        kw.update(solver=diffrax.Bosh3(), steps=8)
    sol = cfm_jax.adjoint_trajectories(model, x0, ctx, y, probes=ctx.points, **kw)  # same shapes: one compile
    zs = sol.contexts.points
    assert zs.shape == (sol.ts.shape[0], 7, 3) and sol.contexts.weights.shape == zs.shape[:2]
    for k in (0, 2, sol.ts.shape[0] - 1):
        probed = cfm_jax.adjoint_trajectories(model, x0, ctx, y, probes=zs[k], **kw)
        assert probed.probe_grads is not None
        assert probed.probe_grads.shape == (sol.ts.shape[0], 7, 3)
        assert float(jnp.max(jnp.abs(probed.probe_grads[k] - sol.a[k]))) <= 1e-10


def test_probe_values_are_first_variation_and_integrate_to_gradients():
    """φ_0(y) − Σ_i w_i φ_0(z_i) = d/dε L((1−ε)μ + ε δ_y), and ∇φ_s = probe_grads."""
    model, x0, ctx, y = _problem(14)
    ys = jax.random.normal(jax.random.key(3), (3, 3))
    sol = cfm_jax.adjoint_trajectories(model, x0, ctx, y, probes=jnp.concatenate([ys, ctx.points]))
    assert sol.probe_values is not None and sol.probe_grads is not None
    phi0 = sol.probe_values[0]

    def loss_eps(eps, yy):
        z = jnp.concatenate([ctx.points, yy[None]])
        w = jnp.concatenate([(1 - eps) * ctx.weights, eps[None]])
        x1 = residual_network(model, x0, cfm_jax.EmpiricalMeasure(z, w))[0]
        return 0.5 * jnp.sum((x1 - y) ** 2) / 2

    first_variation = jax.jit(jax.grad(loss_eps))
    for j in range(3):
        first_var = first_variation(jnp.asarray(1e-30), ys[j])
        assert abs(float(first_var - (phi0[j] - ctx.weights @ phi0[3:]))) <= 1e-9 * (1 + abs(float(first_var)))
    # finite differences of φ_s in the probe location give ∇φ_s
    k, h = 2, 1e-6
    e = jnp.eye(3)
    pts = jnp.concatenate([ys, ctx.points])

    def vals(pts):
        probe_values = cfm_jax.adjoint_trajectories(model, x0, ctx, y, probes=pts).probe_values
        assert probe_values is not None
        return probe_values[k]

    fd = jnp.stack([(vals(pts + h * e[i]) - vals(pts - h * e[i])) / (2 * h) for i in range(3)], -1)
    assert _rel(sol.probe_grads[k], fd) <= 1e-7


def test_jit_vmap_user_loss_and_functional_gradient():
    model, x0, ctx, y = _problem(15)
    f = jax.jit(lambda a, c, t: cfm_jax.loss_and_grad(model, a, c, t))
    l0, g0 = cfm_jax.loss_and_grad(model, x0, ctx, y)
    l1, g1 = f(x0, ctx, y)
    assert abs(float(l1 - l0)) < 1e-14 and _rel(g1, g0) < 1e-13
    # vmap over samples (token, context, target): per-sample losses average to the batch loss
    zb = jnp.stack([ctx.points, ctx.points])
    lv, gv = jax.vmap(lambda a, z, t: cfm_jax.loss_and_grad(model, a, cfm_jax.EmpiricalMeasure(z, ctx.weights), t))(
        x0, zb, y
    )
    assert lv.shape == (2,) and abs(float(lv.mean() - l0)) < 1e-13
    assert _rel(jax.tree.map(lambda a: a.mean(0), gv), g0) < 1e-12
    # a user loss, against jax.grad through the residual network
    user = lambda x1, t: jnp.sum(jnp.cos(x1 * t)) + jnp.sum(x1**4)  # noqa: E731
    lu, gu = cfm_jax.loss_and_grad(model, x0, ctx, y, loss=user)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    ga = jax.jit(jax.grad(lambda p: user(residual_network(eqx.combine(p, static), x0, ctx)[0], y)))(params)
    assert _rel(gu, ga) < 1e-10
    fg = cfm_jax.functional_gradient(model, g0)
    assert isinstance(fg, cfm_jax.Transformer)
    assert _rel(fg.Q, model.num_layers * g0.Q) == 0.0 and fg.W1 is not None


def test_bad_inputs_raise_clear_errors():
    model, x0, ctx, y = _problem(0)
    with pytest.raises(ValueError, match="`adjoint`"):
        cfm_jax.loss_and_grad(model, x0, ctx, y, adjoint="magic")
    with pytest.raises(ValueError, match="hand adjoint"):
        cfm_jax.adjoint_trajectories(model, x0, ctx, y, adjoint=AUTODIFF)  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="`y`"):
        cfm_jax.loss_and_grad(model, x0, ctx, y[:1])
    with pytest.raises(ValueError, match="`steps`"):
        cfm_jax.loss_and_grad(model, x0, ctx, y, steps=5)
    with pytest.raises(ValueError, match="`solver`"):
        cfm_jax.loss_and_grad(model, x0, ctx, y, solver="Heun")
    with pytest.raises(ValueError, match="`probes`"):
        cfm_jax.adjoint_trajectories(model, x0, ctx, y, probes=jnp.zeros((2, 4)))
    with pytest.raises(ValueError, match="`x0`"):
        cfm_jax.loss_and_grad(model, jnp.zeros((2, 4)), ctx, y)
    with pytest.raises(ValueError, match="`loss`"):
        cfm_jax.loss_and_grad(model, x0, ctx, y, loss="l2")  # pyright: ignore[reportArgumentType]  # bad on purpose


def test_no_target_tokens_are_refused_naming_them():
    """B = 0 targets: the default loss (a batch mean) is 0/0, so every entry point refuses them by name
    instead of returning a NaN loss; a loss of the caller's own is the caller's."""
    model, x0, ctx, y = _problem(0)
    none = jnp.zeros((0, x0.shape[-1]), x0.dtype)
    for entry in (cfm_jax.loss_and_grad, cfm_jax.adjoint_trajectories, cfm_jax.token_adjoint):
        with pytest.raises(ValueError, match="`x0` and `y` hold no target tokens"):
            entry(model, none, ctx, none)
    with pytest.raises(ValueError, match="`x1` has no tokens"):
        cfm_jax.mean_squared_loss(none, none)
    with pytest.raises(ValueError, match="`xs` holds no target tokens"):
        token_covectors(model, jnp.zeros((5, 0, 3)), jnp.zeros((5, 7, 3)), ctx.weights, none)
    total, grads = cfm_jax.loss_and_grad(model, none, ctx, none, loss=lambda x1, t: jnp.sum((x1 - t) ** 2))
    assert total == 0.0 and all(np.all(g == 0) for g in jax.tree.leaves(eqx.filter(grads, eqx.is_inexact_array)))


def test_complex_or_nan_targets_are_refused_naming_y():
    """A complex ``y`` is refused by name for the default loss (½‖x1 − y‖² would be complex, and
    jax.grad's "grad requires real-valued outputs" names nothing); a custom loss that is not a real
    scalar names ``loss`` (and ``y`` when it is complex); a NaN ``y`` is refused whatever the loss,
    eagerly and under jit, and throw=False leaves that check out."""
    model, x0, ctx, y = _problem(0)
    for entry in (cfm_jax.loss_and_grad, cfm_jax.adjoint_trajectories, cfm_jax.token_adjoint):
        with pytest.raises(ValueError, match="`y` must be real"):
            entry(model, x0, ctx, y + 0j)
    complex_loss = lambda x1, t: jnp.sum(x1 - t)  # noqa: E731
    with pytest.raises(ValueError, match=r"`loss\(x1, y\)` must return a real scalar.*`y` is complex"):
        cfm_jax.loss_and_grad(model, x0, ctx, y + 0j, loss=complex_loss)
    with pytest.raises(ValueError, match=r"`loss\(x1, y\)` must return a real scalar, got shape \(2,\)"):
        cfm_jax.adjoint_trajectories(model, x0, ctx, y, loss=lambda x1, t: jnp.sum(x1 - t, -1))
    custom = lambda x1, t: jnp.sum(jnp.abs(x1 - t["y"]))  # noqa: E731  # y any pytree
    bad = {"y": y.at[1, 0].set(jnp.nan)}
    for entry in (cfm_jax.loss_and_grad, cfm_jax.adjoint_trajectories, cfm_jax.token_adjoint):
        with pytest.raises(eqx.EquinoxRuntimeError, match="`y` contains non-finite"):
            entry(model, x0, ctx, bad, loss=custom)
    with pytest.raises((eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError), match="`y` contains non-finite"):
        jax.block_until_ready(jax.jit(lambda t: cfm_jax.loss_and_grad(model, x0, ctx, t, loss=custom)[0])(bad))
    assert np.isnan(np.asarray(cfm_jax.loss_and_grad(model, x0, ctx, bad, loss=custom, throw=False)[0]))
    value, _ = cfm_jax.loss_and_grad(model, x0, ctx, {"y": y}, loss=custom)
    assert np.isfinite(np.asarray(value))


def test_the_default_loss_is_half_the_mean_squared_error():
    """``loss_and_grad``'s loss is ½‖x1 − y‖² averaged over the tokens (its docstring, docs/gradients.md
    and the README's example say so): half of ``jnp.mean(jnp.sum((x1 - y) ** 2, -1))``."""
    model, x0, ctx, y = _problem(0)
    x1 = cfm_jax.forward(model, x0, ctx).x1
    value, _ = cfm_jax.loss_and_grad(model, x0, ctx, y)
    np.testing.assert_allclose(value, 0.5 * jnp.mean(jnp.sum((x1 - y) ** 2, -1)), rtol=1e-13)


def test_weight_gradient_is_the_centred_first_variation():
    """∂L/∂w_j = φ_0(z_j) (probes at the particles), Σ_j w_j ∂L/∂w_j = 0 (softmax attention is
    invariant to scaling all weights), and jax.grad in w through forward agrees with both."""
    model, x0, ctx, y = _problem(16)
    sol = cfm_jax.adjoint_trajectories(model, x0, ctx, y, probes=ctx.points)
    assert sol.probe_values is not None
    assert float(jnp.max(jnp.abs(sol.weight_grads - sol.probe_values[0]))) <= 1e-12
    assert abs(float(ctx.weights @ sol.weight_grads)) <= 1e-13
    loss = lambda w: cfm_jax.mean_squared_loss(  # noqa: E731
        cfm_jax.forward(model, x0, cfm_jax.EmpiricalMeasure.unchecked(ctx.points, w)).x1, y
    )
    gw = jax.grad(loss)(ctx.weights)
    gw_auto = jax.grad(
        lambda w: cfm_jax.mean_squared_loss(
            cfm_jax.forward(model, x0, cfm_jax.EmpiricalMeasure.unchecked(ctx.points, w), adjoint=AUTODIFF).x1, y
        )
    )(ctx.weights)
    assert _rel(gw, gw_auto) <= 1e-10 and _rel(gw, sol.weight_grads) <= 1e-10


@pytest.mark.slow  # every gradient program at two context sizes
def test_zero_weight_padding_atoms_change_nothing():
    """A context padded with zero-weight atoms gives the same tokens, gradients and probe values; the
    padded atoms' weight gradients are the one-sided derivative φ_0 at their point (the origin), the
    value the unpadded problem's probe there reads."""
    model, x0, ctx, y = _problem(18)
    padded = ctx.pad_to(11)
    probes = jnp.concatenate([ctx.points[:2], jnp.zeros((1, ctx.points.shape[1]), ctx.points.dtype)])
    a = cfm_jax.adjoint_trajectories(model, x0, ctx, y, probes=probes)
    b = cfm_jax.adjoint_trajectories(model, x0, padded, y, probes=probes)
    assert _rel(b.grads, a.grads) <= 1e-12 and _rel(b.probe_values, a.probe_values) <= 1e-12
    assert _rel(b.a[:, :7], a.a) <= 1e-12 and _rel(b.weight_grads[:7], a.weight_grads) <= 1e-12
    assert a.probe_values is not None
    at_origin = a.probe_values[int(jnp.argmin(jnp.abs(a.ts))), -1]  # φ_0 at the pad point
    np.testing.assert_allclose(b.weight_grads[7:], jnp.full(4, at_origin), rtol=1e-10)
    for adjoint in (cfm_jax.ContinuousAdjoint(), AUTODIFF):
        _, g0 = cfm_jax.loss_and_grad(model, x0, ctx, y, adjoint=adjoint)
        _, g1 = cfm_jax.loss_and_grad(model, x0, padded, y, adjoint=adjoint)
        assert _rel(g1, g0) <= 1e-12
    with pytest.raises(ValueError, match="`size`"):
        ctx.pad_to(3)


def test_functional_gradient_does_not_depend_on_how_depth_is_cut():
    """δL/δθ(s) is a function of depth: an L-layer model with 2 Euler steps per layer is the same
    flow as the 2L-layer model repeating each layer, and its functional gradient on layer l equals
    the mean of the 2L-layer one on the two halves (the plain partials differ by the factor L)."""
    model, x0, ctx, y = _problem(20, layers=3)
    doubled = jax.tree.map(lambda a: jnp.repeat(a, 2, axis=0) if eqx.is_inexact_array(a) else a, model)
    _, g = cfm_jax.loss_and_grad(model, x0, ctx, y, steps=6)
    _, g2 = cfm_jax.loss_and_grad(doubled, x0, ctx, y)
    fg, fg2 = cfm_jax.functional_gradient(model, g), cfm_jax.functional_gradient(doubled, g2)
    halves = jax.tree.map(lambda a: 0.5 * (a[0::2] + a[1::2]), eqx.filter(fg2, eqx.is_inexact_array))
    assert _rel(halves, eqx.filter(fg, eqx.is_inexact_array)) <= 1e-12
    assert (
        _rel(
            jax.tree.map(lambda a: a[0::2] + a[1::2], eqx.filter(g2, eqx.is_inexact_array)),
            eqx.filter(g, eqx.is_inexact_array),
        )
        <= 1e-12
    )


def test_value_and_grad_was_removed():
    """The deprecated alias of loss_and_grad (it shadowed jax.value_and_grad) is gone after its release."""
    assert "value_and_grad" not in cfm_jax.__all__
    with pytest.raises(AttributeError):
        cfm_jax.value_and_grad  # noqa: B018


def test_adjoint_trajectories_honour_the_memory_policy():
    """Trajectories through DiscreteAdjoint(Recompute()) or StoreEvery(2) (states recomputed in the
    backward sweep) equal those through StoreAll(); ContinuousAdjoint(Backsolve()) keeps no layer
    states and is refused with an error naming the policy to use."""
    model, x0, ctx, y = _problem(6)
    probes = cfm_jax.ball_probes(jax.random.key(3), 4, 3, radius=1.0)
    ref = cfm_jax.adjoint_trajectories(model, x0, ctx, y, probes=probes, steps=8)
    for memory in (cfm_jax.Recompute(), cfm_jax.StoreEvery(2)):
        got = cfm_jax.adjoint_trajectories(
            model, x0, ctx, y, probes=probes, steps=8, adjoint=cfm_jax.DiscreteAdjoint(memory=memory)
        )
        for name in ("xs", "contexts", "ps", "a", "probe_grads", "probe_values", "weight_grads"):
            for g, r in zip(jax.tree.leaves(getattr(got, name)), jax.tree.leaves(getattr(ref, name)), strict=True):
                np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-14, err_msg=name)
    with pytest.raises(ValueError, match="StoreEvery"):
        cfm_jax.adjoint_trajectories(model, x0, ctx, y, adjoint=cfm_jax.ContinuousAdjoint(memory=cfm_jax.Backsolve()))


@pytest.mark.parametrize("wrap", ["jax.jit", "eqx.filter_jit"])
def test_targets_are_checked_inside_jit(wrap):
    """A non-finite y reaching the gradient API under a caller's jit raises an error naming `y` (the eager
    check cannot see a tracer) in every output computed from it; throw=False leaves the check out."""
    model, x0, ctx, y = _problem(1)
    jit = jax.jit if wrap == "jax.jit" else eqx.filter_jit
    errors = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError)
    bad = y.at[0, 1].set(jnp.nan)
    outputs = {  # each computed from y
        "loss_and_grad": lambda t: cfm_jax.loss_and_grad(model, x0, ctx, t)[1],
        "adjoint_trajectories": lambda t: cfm_jax.adjoint_trajectories(model, x0, ctx, t).ps,
        "token_adjoint": lambda t: cfm_jax.token_adjoint(model, x0, ctx, t)[1],
    }
    for name, output in outputs.items():
        with pytest.raises(errors, match="`y` contains non-finite"):
            jax.block_until_ready(jit(output)(bad))
    unchecked = jit(lambda t: cfm_jax.loss_and_grad(model, x0, ctx, t, throw=False)[0])
    assert np.isnan(np.asarray(unchecked(bad)))


@pytest.mark.slow  # adaptive solves and their gradients under three strategies
def test_a_failed_adaptive_solve_is_never_a_finite_gradient():
    """An adaptive solve capped at max_steps = 3 per layer (Tsit5, PID controller): at a tight
    tolerance it fails, which forward reports in ``result`` with finite tokens, and throw=False
    returns a NaN loss and NaN gradients rather than those numbers; at a loose one (the same
    programs: the tolerances are traced) the loss is forward's and every gradient finite. (throw=True
    raises where forward does; not compiled here, its program takes as long again.)"""
    model = cfm_jax.Transformer.init(jax.random.key(0), 2, heads=1, layers=1, dtype=jnp.float64)
    x0, z = jax.random.normal(jax.random.key(1), (1, 2)), jax.random.normal(jax.random.key(2), (3, 2))
    y = jnp.zeros_like(x0)

    def options(tol) -> dict[str, Any]:
        controller = diffrax.PIDController(rtol=tol, atol=tol)
        return dict(solver=diffrax.Tsit5(), stepsize_controller=controller, max_steps=3, throw=False)

    tight, loose = jnp.asarray(1e-12), jnp.asarray(1e-1)
    failed = cfm_jax.forward(model, x0, z, **options(tight))
    assert failed.result == diffrax.RESULTS.max_steps_reached and np.isfinite(np.asarray(failed.x1)).all()
    value, grads = cfm_jax.loss_and_grad(model, x0, z, y, **options(tight))
    leaves = jax.tree.leaves(eqx.filter(grads, eqx.is_inexact_array))
    assert np.isnan(np.asarray(value)) and leaves and all(np.isnan(np.asarray(g)).all() for g in leaves)
    solved = cfm_jax.forward(model, x0, z, **options(loose))
    assert solved.result == diffrax.RESULTS.successful
    value, grads = cfm_jax.loss_and_grad(model, x0, z, y, **options(loose))
    np.testing.assert_allclose(value, cfm_jax.mean_squared_loss(solved.x1, y), rtol=1e-14)
    assert all(np.isfinite(np.asarray(g)).all() for g in jax.tree.leaves(grads))


def test_token_adjoint_is_the_particle_adjoints_token_row():
    """For atoms, the token-only sweep (context held on its trajectory) gives the p of the full
    adjoint, at the layers and at every step, and from stored layer states (token_covectors)."""
    model, x0, ctx, y = _problem(2)
    full = cfm_jax.adjoint_trajectories(model, x0, ctx, y, steps=8)
    sol, ps = cfm_jax.token_adjoint(model, x0, ctx, y, steps=8, saveat=cfm_jax.SaveAt(steps=True))
    np.testing.assert_allclose(ps, full.ps, rtol=1e-11, atol=1e-14)
    assert sol.xs is not None
    np.testing.assert_allclose(sol.xs, full.xs, rtol=1e-13)
    sol_l, ps_l = cfm_jax.token_adjoint(model, x0, ctx, y)  # one step per layer, saved at the layers
    np.testing.assert_allclose(ps_l, cfm_jax.adjoint_trajectories(model, x0, ctx, y).ps, rtol=1e-11, atol=1e-14)
    assert sol_l.xs is not None and sol_l.contexts is not None
    from cfm_jax._gradients import token_covectors

    stored = token_covectors(model, sol_l.xs, sol_l.contexts.points, ctx.weights, y)
    np.testing.assert_allclose(stored, ps_l, rtol=1e-12, atol=1e-15)
    single, p_single = cfm_jax.token_adjoint(model, x0[0], ctx, y[0])
    assert single.x1.shape == (3,) and p_single.shape == (model.num_layers + 1, 3)
    with pytest.raises(ValueError, match="`context`: a GaussianMeasure"):
        cfm_jax.adjoint_trajectories(model, x0, cfm_jax.GaussianMeasure(jnp.zeros(3), jnp.eye(3)), y)
    with pytest.raises(ValueError, match="`solver` must be diffrax.Euler"):
        cfm_jax.token_adjoint(model, x0, ctx, y, solver=diffrax.Heun())


def test_adjoint_solution_names_its_context_trajectory_as_flow_solution_does():
    """``contexts`` is the forward's context trajectory (points and weights); ``zs`` a deprecated alias."""
    model, x0, ctx, y = _problem(3)
    sol = cfm_jax.adjoint_trajectories(model, x0, ctx, y)
    flow = cfm_jax.forward(model, x0, ctx, saveat=cfm_jax.SaveAt(steps=True))
    assert flow.contexts is not None
    assert jnp.allclose(sol.contexts.points, flow.contexts.points, rtol=0, atol=1e-12)
    assert jnp.array_equal(sol.contexts.weights, flow.contexts.weights)


def test_adjoint_trajectories_reports_the_solves_result():
    """A forward that reaches ``max_steps`` is raised by default and reported in ``result`` with
    ``throw=False``; a successful one reports success."""
    import diffrax

    key_m, key_x, key_z, key_y = jax.random.split(jax.random.key(4), 4)
    model = cfm_jax.Transformer.init(key_m, dim=3, heads=1, mlp_width=4, layers=2)
    x0, z, y = (jax.random.normal(k, s) for k, s in ((key_x, (2, 3)), (key_z, (6, 3)), (key_y, (2, 3))))
    adjoint = cfm_jax.ContinuousAdjoint(solver=diffrax.Tsit5())
    options: dict[str, Any] = dict(solver=diffrax.Tsit5(), adjoint=adjoint)
    # one max_steps (static) and traced tolerances: the raising and the succeeding run share a program
    tight: dict[str, Any] = dict(
        stepsize_controller=diffrax.PIDController(rtol=jnp.asarray(1e-12), atol=1e-12), max_steps=16
    )
    loose: dict[str, Any] = dict(
        stepsize_controller=diffrax.PIDController(rtol=jnp.asarray(1e-2), atol=1e-2), max_steps=16
    )
    with pytest.raises(eqx.EquinoxRuntimeError, match="maximum number of solver steps"):
        cfm_jax.adjoint_trajectories(model, x0, z, y, **options, **tight)
    sol = cfm_jax.adjoint_trajectories(model, x0, z, y, throw=False, **options, **tight)
    assert sol.result == diffrax.RESULTS.max_steps_reached
    sol = cfm_jax.adjoint_trajectories(model, x0, z, y, **options, **loose)
    assert sol.result == diffrax.RESULTS.successful


def test_adjoint_trajectories_reports_a_failed_backward_solve():
    """A forward that succeeds and an adaptive backward (``ContinuousAdjoint``'s own tight controller)
    that reaches ``max_steps``: the backward's failure is raised by default and reported in ``result``
    with ``throw=False`` (the forward's success does not hide it); a loose backward reports success."""
    key_m, key_x, key_z, key_y = jax.random.split(jax.random.key(3), 4)
    model = cfm_jax.Transformer.init(key_m, dim=3, heads=1, mlp_width=4, layers=2)
    x0, z, y = (jax.random.normal(k, s) for k, s in ((key_x, (2, 3)), (key_z, (6, 3)), (key_y, (2, 3))))

    def run(backward_tol, throw):
        adjoint = cfm_jax.ContinuousAdjoint(
            solver=diffrax.Tsit5(),
            stepsize_controller=diffrax.PIDController(rtol=backward_tol, atol=backward_tol),
        )
        controller = diffrax.PIDController(rtol=1e-3, atol=1e-3)
        options: dict[str, Any] = dict(solver=diffrax.Tsit5(), stepsize_controller=controller, max_steps=8)
        return cfm_jax.adjoint_trajectories(model, x0, z, y, adjoint=adjoint, throw=throw, **options)

    tight, loose = jnp.asarray(1e-12), jnp.asarray(1e-2)  # traced: one program for both
    assert cfm_jax.forward(
        model, x0, z, solver=diffrax.Tsit5(), stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-3),
        max_steps=8,
    ).result == diffrax.RESULTS.successful  # fmt: skip
    assert run(tight, throw=False).result == diffrax.RESULTS.max_steps_reached
    with pytest.raises(eqx.EquinoxRuntimeError, match="maximum number of solver steps"):
        run(tight, throw=True)
    sol = run(loose, throw=False)
    assert sol.result == diffrax.RESULTS.successful and np.isfinite(np.asarray(sol.ps)).all()


#: every way forward is differentiated, with the solve options under which it is exact: the hand
#: adjoints, autodiff through the loop; the continuous adjoint with a 5th-order solver (its error
#: against the scheme's derivative is then far below the tolerance)
WEIGHT_STRATEGIES = {
    "discrete": (cfm_jax.DiscreteAdjoint(), {}),
    "continuous": (cfm_jax.ContinuousAdjoint(), {"solver": diffrax.Tsit5(), "steps": 16}),
    "recursive_checkpoint": (AUTODIFF, {}),
    "direct": (diffrax.DirectAdjoint(), {}),
}
#: the attention paths: dense XLA, query blocks with streamed keys (a leading block of zero weights),
#: and the fused kernel (its VJP gives ∂/∂log w, completed at the zero weights by the field)
WEIGHT_FIELDS = {
    "dense": lambda m: m,
    "streamed": lambda m: m.with_chunking(2, 2),
    "pallas": lambda m: m.with_kernel(cfm_jax.PallasAttention(block_q=16, block_k=16)),
}


@pytest.mark.parametrize("strategy", WEIGHT_STRATEGIES)
@pytest.mark.parametrize("path", WEIGHT_FIELDS)
def test_weight_gradients_at_zero_weights_are_the_one_sided_derivative(strategy, path):
    """∂L/∂w at a weight of 0 is finite and is the one-sided derivative (e^{u·z_j − lse} s_j, the limit
    of α_j s_j / w_j, computed without dividing), by every strategy and attention path, for an unchecked
    context with zero weights and for one padded by ``pad_to`` (``eqx.filter_grad`` over the whole
    measure: no NaN leaf, the padded atoms' points get 0). Against second-order one-sided finite
    differences of the same solve, at the positive weights too (autodiff once gave NaN, the hand
    adjoints 0, at the zero ones)."""
    if path == "pallas" and strategy in ("continuous", "direct"):
        pytest.skip("the fused kernel is exercised through the discrete adjoint and autodiff")
    adjoint, options = WEIGHT_STRATEGIES[strategy]
    _, x0, ctx, y = _problem(5, d=3, n=5, B=2, layers=2)
    # the default scales: O(1) logits, so that second-order differences of step 1e-6 resolve 1e-6
    model = cfm_jax.Transformer.init(jax.random.key(5), 3, heads=2, mlp_width=4, layers=2, dtype=jnp.float64)
    model = WEIGHT_FIELDS[path](model)

    def loss(measure):  # throw=False: the perturbed weights do not sum to one
        x1 = cfm_jax.forward(model, x0, measure, adjoint=adjoint, throw=False, **options).x1
        return jnp.sum(jnp.sin(x1) * y)

    def one_sided(measure, j, eps=1e-6):
        at = lambda t: float(loss(measure.with_weights(measure.weights.at[j].add(t))))  # noqa: E731
        return (-at(2 * eps) + 4 * at(eps) - 3 * at(0.0)) / (2 * eps)

    patterns = {
        "trailing": jnp.array([0.5, 0.3, 0.2, 0.0, 0.0]),
        "leading": jnp.array([0.0, 0.0, 0.5, 0.3, 0.2]),
    }
    contexts = {name: cfm_jax.EmpiricalMeasure.unchecked(ctx.points, w) for name, w in patterns.items()}
    contexts["padded"] = cfm_jax.EmpiricalMeasure(ctx.points[:3], jnp.array([0.5, 0.3, 0.2])).pad_to(5)
    for name, measure in contexts.items():
        grads = eqx.filter_grad(loss)(measure)
        leaves = jax.tree.leaves(grads)
        assert all(np.isfinite(np.asarray(g)).all() for g in leaves), (name, grads)
        fd = np.array([one_sided(measure, j) for j in range(5)])
        zero = np.asarray(measure.weights) == 0
        assert np.abs(fd[zero]).min() > 1e-3  # the derivative at a zero weight is not 0
        np.testing.assert_allclose(grads.weights, fd, rtol=1e-6, atol=1e-8 * np.abs(fd).max(), err_msg=name)
        if name == "padded":
            assert not np.any(np.asarray(grads.points)[3:])  # a massless atom moves nothing


def test_loss_and_grad_at_a_gaussian_context_warns_once_and_leaks_no_tracer(monkeypatch):
    """The exact limit's heavy-tail notice is given from the prepared problem, outside the gradient
    taken of the solve: loss_and_grad on a GaussianMeasure returns finite gradients and warns (no
    tracer of the linearisation escapes into the notice)."""
    import cfm_jax._regime as regime_module

    d = 6
    mu = cfm_jax.GaussianMeasure(jnp.zeros(d), jnp.eye(d))
    heavy = cfm_jax.Transformer.init(jax.random.key(0), d, layers=2)
    x0 = jax.random.normal(jax.random.key(1), (3, d))
    monkeypatch.setattr(regime_module, "_WARNED", False)
    with pytest.warns(cfm_jax.HeavyTailWarning):
        loss, grads = cfm_jax.loss_and_grad(heavy, x0, mu, jnp.zeros((3, d)))
    assert np.isfinite(float(loss)) and all(np.isfinite(g).all() for g in jax.tree.leaves(grads))
