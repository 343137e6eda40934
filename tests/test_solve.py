"""forward(adjoint=...): jax.grad of any function of the outputs runs the hand adjoint, and equals
autodiff through diffrax (float64, ≤ 1e-10 relative) for every output and every input."""

import re

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _problems import problem, rel, residual_network

import cfm_jax
from cfm_jax import ContinuousAdjoint, DiscreteAdjoint, Recompute, SaveAt, StoreAll, StoreEvery, Transformer, forward

AUTODIFF = diffrax.RecursiveCheckpointAdjoint()


def _measure(z, w):
    return cfm_jax.EmpiricalMeasure.unchecked(z, w)


def loss_x1(sol):
    return jnp.sum(jnp.sin(sol.x1) * jnp.arange(1, sol.x1.size + 1).reshape(sol.x1.shape))


def loss_context(sol):
    """A loss of the final context measure: Σ_j w_j f(z_j) (sees w directly and through the flow)."""
    return jnp.sum(sol.context.weights * jnp.cos(sol.context.points @ jnp.array([1.0, -0.5, 0.3])))


def loss_layers(sol):
    """A penalty on the saved intermediate states (tokens and context)."""
    return jnp.sum(jnp.tanh(sol.xs) ** 2) + 0.1 * jnp.sum(sol.contexts.points[1:-1] ** 3)


def _objective(loss, adjoint, saveat=SaveAt(), steps=None):
    def f(inputs):
        model, x0, z0, w = inputs
        return loss(cfm_jax.forward(model, x0, _measure(z0, w), adjoint=adjoint, saveat=saveat, steps=steps))

    return eqx.filter_jit(eqx.filter_grad(f))


CASES = [
    ("x1", loss_x1, SaveAt(), None),
    ("context", loss_context, SaveAt(), None),
    ("layers", loss_layers, SaveAt(layers=True), 8),
    pytest.param("steps", loss_layers, SaveAt(steps=True), 8, marks=pytest.mark.slow),  # three memories' programs
]


@pytest.mark.parametrize("name,loss,saveat,steps", CASES, ids=["x1", "context", "layers", "steps"])
def test_jax_grad_through_the_hand_adjoint_equals_autodiff(name, loss, saveat, steps):
    """Gradients with respect to θ, x0, z0 and w together, for losses of x1, of (z1, w), of saved
    states (two Euler steps per layer for the saved trajectories)."""
    model, x0, ctx, _ = problem(0 if name != "steps" else 1)
    inputs = (model, x0, ctx.points, ctx.weights)
    ref = _objective(loss, AUTODIFF, saveat, steps)(inputs)
    memories = [StoreAll()] if name in ("x1", "context") else [StoreAll(), StoreEvery(2), Recompute()]
    for memory in memories:
        g = _objective(loss, DiscreteAdjoint(memory), saveat, steps)(inputs)
        for part, (a, b) in enumerate(zip(g, ref)):
            assert rel(a, b) <= 1e-10, (name, type(memory).__name__, part)
    if name == "context":  # passive target tokens do not act on the context
        assert float(jnp.abs(ref[1]).max()) == 0.0


def test_default_adjoint_is_the_hand_adjoint_wherever_it_is_exact():
    assert isinstance(cfm_jax.default_adjoint(None, None), DiscreteAdjoint)
    assert isinstance(cfm_jax.default_adjoint(diffrax.Euler(), diffrax.ConstantStepSize()), DiscreteAdjoint)
    assert isinstance(cfm_jax.default_adjoint(diffrax.Heun(), None), diffrax.RecursiveCheckpointAdjoint)
    assert isinstance(
        cfm_jax.default_adjoint(None, diffrax.PIDController(1e-3, 1e-3)), diffrax.RecursiveCheckpointAdjoint
    )


def test_default_forward_is_differentiated_by_the_hand_adjoint(monkeypatch):
    """jax.grad of a plain loss of forward's output runs DiscreteAdjoint's backward sweep (traced
    once), autodiff does not, and both give the same gradient."""
    model, x0, ctx, y = problem(2)
    calls = []
    backward = DiscreteAdjoint.run_backward

    def counted(self, *args, **kwargs):
        calls.append(type(self).__name__)
        return backward(self, *args, **kwargs)

    monkeypatch.setattr(DiscreteAdjoint, "run_backward", counted)

    def grad(adjoint):
        return eqx.filter_grad(lambda m: jnp.sum((cfm_jax.forward(m, x0, ctx, adjoint=adjoint).x1 - y) ** 2))

    g_auto = grad(AUTODIFF)(model)
    assert calls == []
    g_hand = grad(None)(model)
    assert calls == ["DiscreteAdjoint"]
    assert rel(g_hand, g_auto) <= 1e-10


@pytest.mark.slow  # the gradient programs vmapped and through jax.vjp
def test_vmap_over_samples_and_jax_vjp():
    model, x0, ctx, y = problem(3)
    zb = jnp.stack([ctx.points, ctx.points[::-1]])

    def per_sample(adjoint):
        def f(m, x, z):
            return jnp.sum(cfm_jax.forward(m, x, cfm_jax.EmpiricalMeasure(z, ctx.weights), adjoint=adjoint).x1 ** 2)

        return jax.vmap(eqx.filter_grad(f), in_axes=(None, 0, 0))(model, x0, zb)

    assert rel(per_sample(DiscreteAdjoint()), per_sample(AUTODIFF)) <= 1e-10
    sol, pull = jax.vjp(lambda xx: cfm_jax.forward(model, xx, ctx).x1, x0)
    (gx,) = pull(jnp.ones_like(sol))
    _, pull_ref = jax.vjp(lambda xx: cfm_jax.forward(model, xx, ctx, adjoint=AUTODIFF).x1, x0)
    assert rel(gx, pull_ref(jnp.ones_like(sol))[0]) <= 1e-10


def test_single_token_and_optax_loop_use_the_hand_adjoint():
    import optax

    model, x0, ctx, y = problem(4)
    opt = optax.sgd(0.1)

    def train(adjoint):
        m = model
        state = opt.init(eqx.filter(m, eqx.is_inexact_array))
        for _ in range(3):
            g = eqx.filter_grad(lambda mm: jnp.sum((cfm_jax.forward(mm, x0[0], ctx, adjoint=adjoint).x1 - y[0]) ** 2))(
                m
            )
            upd, state = opt.update(g, state)
            m = eqx.apply_updates(m, upd)
        return m

    assert (
        rel(
            eqx.filter(train(DiscreteAdjoint()), eqx.is_inexact_array),
            eqx.filter(train(AUTODIFF), eqx.is_inexact_array),
        )
        <= 1e-10
    )


@pytest.mark.parametrize(
    "adjoint, named",
    [
        (None, "the default adjoint"),
        (ContinuousAdjoint(), "ContinuousAdjoint()"),
        (diffrax.RecursiveCheckpointAdjoint(), "RecursiveCheckpointAdjoint()"),
    ],
)
def test_forward_mode_through_a_reverse_only_strategy_names_it_and_the_fix(adjoint, named):
    """The strategy says it is reverse-only (``forward_mode``); the error names it and DirectAdjoint."""
    model, x0, ctx, _ = problem(5)
    assert not DiscreteAdjoint().forward_mode and not ContinuousAdjoint().forward_mode
    with pytest.raises(TypeError, match=rf"^{re.escape(named)} is a reverse-mode .*DirectAdjoint"):
        jax.jvp(lambda x: cfm_jax.forward(model, x, ctx, adjoint=adjoint).x1, (x0,), (jnp.ones_like(x0),))


def test_forward_mode_keeps_an_error_the_call_raises_itself():
    """A TypeError the call raises without any transformation (a field with no Gaussian closed form on a
    Gaussian context) is not rewritten as a forward-mode one, even with a reverse-only adjoint."""
    model = cfm_jax.Transformer.init(jax.random.key(0), 2, heads=1, mlp_width=2, layers=1, activation=jnp.tanh)
    mu = cfm_jax.GaussianMeasure(jnp.zeros(2), jnp.eye(2))
    f = lambda x: cfm_jax.forward(model, x, mu, adjoint=diffrax.RecursiveCheckpointAdjoint()).x1  # noqa: E731
    with pytest.raises(TypeError, match="no Gaussian closed form"):
        jax.jvp(f, (jnp.ones(2),), (jnp.ones(2),))


def test_forward_mode_raises_a_clear_error_naming_the_fix():
    model, x0, ctx, _ = problem(5)
    f = lambda x: cfm_jax.forward(model, x, ctx).x1  # noqa: E731
    with pytest.raises(TypeError, match="DirectAdjoint"):
        jax.jvp(f, (x0,), (jnp.ones_like(x0),))
    # the named fix works, and agrees with reverse mode through the hand adjoint
    _, tangent = jax.jvp(
        lambda x: cfm_jax.forward(model, x, ctx, adjoint=diffrax.DirectAdjoint()).x1, (x0,), (jnp.ones_like(x0),)
    )
    _, pull = jax.vjp(f, x0)
    e = jnp.zeros_like(x0).at[0, 0].set(1.0)
    assert jnp.allclose(jnp.sum(pull(e)[0]), tangent[0, 0], rtol=1e-10)


def test_continuous_adjoint_through_jax_grad_matches_its_trajectory_api():
    """The same backward sweep reached through jax.grad and through adjoint_trajectories."""
    model, x0, ctx, y = problem(6)
    adj = ContinuousAdjoint()
    sol = cfm_jax.adjoint_trajectories(model, x0, ctx, y, adjoint=adj, solver=diffrax.Heun(), steps=8)
    _, g = cfm_jax.loss_and_grad(model, x0, ctx, y, adjoint=adj, solver=diffrax.Heun(), steps=8)
    assert rel(g, sol.grads) <= 1e-12


def test_bad_adjoint_arguments_raise_clear_errors():
    model, x0, ctx, _ = problem(0)
    with pytest.raises(ValueError, match="`adjoint`"):
        cfm_jax.forward(model, x0, ctx, adjoint="discrete_adjoint")  # pyright: ignore[reportArgumentType, reportCallIssue]  # bad on purpose
    with pytest.raises(ValueError, match="BacksolveAdjoint.*Backsolve"):
        cfm_jax.forward(model, x0, ctx, adjoint=diffrax.BacksolveAdjoint())
    with pytest.raises(ValueError, match="`solver`.*Euler"):
        cfm_jax.forward(model, x0, ctx, solver=diffrax.Heun(), adjoint=DiscreteAdjoint())
    with pytest.raises(ValueError, match="`stepsize_controller`"):
        cfm_jax.forward(
            model, x0, ctx, adjoint=DiscreteAdjoint(), stepsize_controller=diffrax.PIDController(1e-3, 1e-3)
        )
    with pytest.raises(ValueError, match="`memory`=StoreEvery"):
        cfm_jax.forward(model, x0, ctx, adjoint=DiscreteAdjoint(StoreEvery(3)))
    with pytest.raises(ValueError, match="`memory`=Backsolve"):
        cfm_jax.forward(model, x0, ctx, adjoint=DiscreteAdjoint(cfm_jax.Backsolve()))
    with pytest.raises(ValueError, match="`memory`=Recompute"):
        cfm_jax.forward(model, x0, ctx, adjoint=ContinuousAdjoint(memory=Recompute()))
    with pytest.raises(ValueError, match="`memory`"):
        cfm_jax.forward(model, x0, ctx, adjoint=DiscreteAdjoint("recompute"))  # pyright: ignore[reportArgumentType, reportCallIssue]  # bad on purpose


@pytest.fixture
def tiny():
    return Transformer.init(jax.random.key(0), 2, heads=1, mlp_width=3, layers=2)


@pytest.mark.parametrize(
    "x0,context,kwargs,match",
    [
        (np.zeros((2, 3)), np.zeros((4, 2)), {}, "x0"),
        (np.zeros((1, 1, 2)), np.zeros((4, 2)), {}, "x0"),
        (np.zeros((2, 2)), np.zeros((4, 3)), {}, "context"),
        (np.zeros((1, 2)), np.zeros((4, 2)), {"steps": 3}, "steps"),
        (np.zeros((1, 2)), np.zeros((4, 2)), {"steps": 0}, "steps"),
        (np.zeros((1, 2), np.int32), np.zeros((4, 2)), {}, "x0"),
    ],
)
def test_forward_validation(tiny, x0, context, kwargs, match):
    with pytest.raises(ValueError, match=match):
        forward(tiny, x0, context, **kwargs)


def _bad_values(tiny):
    """(name, x0, points, weights, model) with one bad value each, and the argument the error must name."""
    x0, z, w = np.zeros((1, 2)), np.ones((4, 2)), np.full(4, 0.25)
    nan_model = eqx.tree_at(lambda m: m.V, tiny, tiny.V.at[0, 0, 0, 0].set(np.nan))
    return [
        ("x0", np.array([[np.nan, 0.0]]), z, w, tiny),
        ("x0", np.array([[np.inf, 0.0]]), z, w, tiny),
        ("context", x0, np.where(np.arange(8).reshape(4, 2) == 2, np.inf, z), w, tiny),
        ("context", x0, z, 2 * w, tiny),
        ("context", x0, z, w * 0.5, tiny),
        ("context", x0, z, np.array([0.5, 0.75, -0.5, 0.25]), tiny),
        ("model", x0, z, w, nan_model),
    ]


@pytest.mark.parametrize("wrap", ["eager", "jax.jit", "eqx.filter_jit", "vmap"])
def test_bad_values_raise_an_error_naming_the_argument_under_any_transformation(tiny, wrap):
    """Values are checked inside the compiled program: the same clear error eagerly, under a caller's
    jax.jit or eqx.filter_jit and under vmap — never a silent NaN or a silently wrong measure."""

    def run(model, x0, z, w):
        return forward(model, x0, cfm_jax.EmpiricalMeasure.unchecked(z, w)).x1

    f = {
        "eager": run,
        "jax.jit": jax.jit(run),
        "eqx.filter_jit": eqx.filter_jit(run),
        "vmap": lambda m, x, z, w: jax.vmap(run, (None, 0, None, None))(m, x[None], z, w),
    }[wrap]
    # under a plain jax.jit the same message arrives as JAX's runtime error (as for diffrax's checks)
    errors = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError)
    for name, x0, z, w, model in _bad_values(tiny):
        with pytest.raises(errors, match=f"`{name}`"):
            jax.block_until_ready(f(model, jnp.asarray(x0), jnp.asarray(z), jnp.asarray(w)))
    ok = f(tiny, jnp.zeros((1, 2)), jnp.ones((4, 2)), jnp.array([0.5, 0.5, 0.0, 0.0]))  # zero weights are allowed
    assert np.isfinite(np.asarray(ok)).all()


def test_forward_is_compiled_once_and_steps_is_static(tiny, monkeypatch):
    """forward is eqx.filter_jit-compiled: a repeated eager call reuses the program (counted by traces
    of the input checks, which run only when tracing); steps is static (a new value retraces) and
    works eagerly, under eqx.filter_jit and under jax.jit with static_argnames; a traced steps gets an
    error that says how to mark it static."""
    import cfm_jax._solve as solve_module

    traces = []
    prepare = solve_module.prepare
    monkeypatch.setattr(solve_module, "prepare", lambda *a, **k: traces.append(1) or prepare(*a, **k))
    x0, ctx = jnp.ones((1, 2)), cfm_jax.EmpiricalMeasure(jnp.arange(8.0).reshape(4, 2) / 8)
    a = forward(tiny, x0, ctx, steps=8).x1
    b = forward(tiny, x0 + 0.0, ctx, steps=8).x1
    assert len(traces) == 1
    forward(tiny, x0, ctx, steps=4)
    assert len(traces) == 2
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(eqx.filter_jit(lambda m, x, c: forward(m, x, c, steps=8))(tiny, x0, ctx).x1, a)
    np.testing.assert_array_equal(jax.jit(forward, static_argnames="steps")(tiny, x0, ctx, steps=8).x1, a)
    with pytest.raises(ValueError, match="static_argnames"):
        jax.jit(forward)(tiny, x0, ctx, steps=8)


@pytest.mark.parametrize("entry", ["forward", "loss_and_grad", "adjoint_trajectories", "token_adjoint"])
def test_every_entry_point_prepares_the_context_once(tiny, monkeypatch, entry):
    """forward, loss_and_grad, adjoint_trajectories and token_adjoint share one preparation: the
    array context is made a measure once, value-checked once and given its carried form once."""
    import cfm_jax._measures as measures_module
    import cfm_jax._solve as solve_module

    counts = {"as_measure": 0, "checked": 0, "carried": 0}

    def counted(name, fn):
        def call(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)

        return call

    monkeypatch.setattr(solve_module, "as_measure", counted("as_measure", solve_module.as_measure))
    monkeypatch.setattr(solve_module, "EmpiricalContext", counted("carried", solve_module.EmpiricalContext))
    checked = measures_module.EmpiricalMeasure.checked
    monkeypatch.setattr(measures_module.EmpiricalMeasure, "checked", lambda self: counted("checked", checked)(self))
    x0, y = jnp.ones((3, 2)), jnp.zeros((3, 2))
    ctx = jnp.arange(22.0).reshape(11, 2) / 22  # a shape no other test traces
    calls = {
        "forward": lambda: forward(tiny, x0, ctx),
        "loss_and_grad": lambda: cfm_jax.loss_and_grad(tiny, x0, ctx, y),
        "adjoint_trajectories": lambda: cfm_jax.adjoint_trajectories(tiny, x0, ctx, y),
        "token_adjoint": lambda: cfm_jax.token_adjoint(tiny, x0, ctx, y),
    }
    calls[entry]()
    assert counts == {"as_measure": 1, "checked": 1, "carried": 1}


def test_forward_rejects_non_models():
    with pytest.raises(ValueError, match="model"):
        forward({"Q": 1}, np.zeros(2), np.zeros((3, 2)))  # pyright: ignore[reportArgumentType, reportCallIssue]  # bad on purpose


def test_hand_adjoints_refuse_gradients_in_arrays_outside_theta():
    """A field that holds arrays (the W1 control field's target measure): differentiating them through
    a hand adjoint raises instead of returning a silent zero; θ alone, or a diffrax adjoint, works."""
    from cfm_jax import W1ControlField

    # d = 1: the field's exact sorted W1, so the test compiles no Sinkhorn loop
    nu = cfm_jax.EmpiricalMeasure(jax.random.normal(jax.random.key(0), (6, 1)))
    field = W1ControlField.create(nu)
    model = cfm_jax.PiecewiseConstantCFM(field, {"dummy": jnp.zeros((2, 1))}, 1)
    x0, ctx = jnp.ones((1, 1)), cfm_jax.EmpiricalMeasure(jax.random.normal(jax.random.key(1), (5, 1)))

    def loss(m, adjoint=None):
        return jnp.sum(cfm_jax.forward(m, x0, ctx, adjoint=adjoint).x1)

    with pytest.raises(ValueError, match="outside its parameters"):
        eqx.filter_grad(loss)(model)
    g = eqx.filter_grad(loss)(model, AUTODIFF)
    assert bool(jnp.any(g.field.nu_points != 0))
    # differentiating the context only (the model's arrays held fixed) is fine
    gz = jax.grad(lambda z: jnp.sum(cfm_jax.forward(model, x0, cfm_jax.EmpiricalMeasure(z)).x1))(ctx.points)
    gz_ref = jax.grad(lambda z: jnp.sum(cfm_jax.forward(model, x0, cfm_jax.EmpiricalMeasure(z), adjoint=AUTODIFF).x1))(
        ctx.points
    )
    assert rel(gz, gz_ref) <= 1e-8


# what each adjoint supports (docs/gradients.md, one row each): "ok", or the error it raises
FIRST_ORDER = "first order only"
SUPPORT = {
    "DiscreteAdjoint()": (
        DiscreteAdjoint(),
        {"grad": "ok", "jvp": "DirectAdjoint", "hessian": "ok", "grad(grad)": "ok"},
    ),
    "DiscreteAdjoint(memory=Recompute())": (DiscreteAdjoint(memory=Recompute()), {"hessian": "ok", "grad(grad)": "ok"}),
    "ContinuousAdjoint()": (
        ContinuousAdjoint(),
        {"grad": "ok", "jvp": "DirectAdjoint", "hessian": FIRST_ORDER, "grad(grad)": FIRST_ORDER},
    ),
    "RecursiveCheckpointAdjoint()": (
        AUTODIFF,
        {"grad": "ok", "jvp": "DirectAdjoint", "hessian": "ok", "grad(grad)": "while_loop"},
    ),
    "DirectAdjoint()": (diffrax.DirectAdjoint(), {"grad": "ok", "jvp": "ok", "hessian": "ok", "grad(grad)": "ok"}),
    "GaussianMeasure context (default)": (None, {"grad": "ok", "jvp": "ok", "hessian": "ok", "grad(grad)": "ok"}),
}
SLOW = {
    ("RecursiveCheckpointAdjoint()", "hessian"),
    ("DirectAdjoint()", "hessian"),
    ("DirectAdjoint()", "grad(grad)"),
    ("DiscreteAdjoint(memory=Recompute())", "hessian"),
}
_TRANSFORMS = {
    "grad": jax.grad,
    "jvp": lambda f: lambda x: jax.jvp(f, (x,), (x,))[1],
    "hessian": jax.hessian,
    "grad(grad)": lambda f: jax.grad(lambda x: jnp.sum(jax.grad(f)(x) ** 2)),
}


def _gaussian_residual_network(model, x, mean, cov):
    """The Euler moment recursion written out with the closed form (independent of the library's loop)."""
    L = model.num_layers
    for l in range(L):
        c, M = cfm_jax.AttentionField().gaussian_affine(model.layer_params(l), mean, cov)
        G = jnp.eye(mean.shape[0]) + M / L
        x, mean, cov = x + (c + x @ M.T) / L, mean + (c + M @ mean) / L, G @ cov @ G.T
    return x


@pytest.mark.parametrize(
    "name,transform",
    [
        pytest.param(n, t, marks=[pytest.mark.slow] if (n, t) in SLOW else [])
        for n, (_, table) in SUPPORT.items()
        for t in table
    ],
)
def test_what_each_adjoint_supports(tiny, name, transform):
    """The table of docs/gradients.md, row by row: a supported transformation equals the same
    transformation of the residual network written as a bare scan (float64; for the continuous adjoint
    within its O(1/L) discretisation error); an unsupported one raises an error that names the fix (or,
    for diffrax's checkpointed loop under reverse-over-reverse, JAX's while-loop error)."""
    adjoint, table = SUPPORT[name]
    x = jnp.array([0.2, -0.3])
    if name.startswith("GaussianMeasure"):
        model = _attention_only()
        mu = cfm_jax.GaussianMeasure(jnp.array([0.1, -0.2]), jnp.array([[0.5, 0.1], [0.1, 0.3]]))
        f = lambda x: jnp.sum(forward(model, x, mu).x1 ** 3)  # noqa: E731
        ref = lambda x: jnp.sum(_gaussian_residual_network(model, x, mu.mean, mu.cov) ** 3)  # noqa: E731
    else:
        ctx = cfm_jax.EmpiricalMeasure(jnp.array([[0.3, -0.1], [0.5, 0.2], [-0.4, 0.1]]))
        f = lambda x: jnp.sum(forward(tiny, x, ctx, adjoint=adjoint).x1 ** 3)  # noqa: E731
        ref = lambda x: jnp.sum(residual_network(tiny, x, ctx)[0] ** 3)  # noqa: E731
    expected = table[transform]
    if expected == "ok":
        got, want = _TRANSFORMS[transform](f)(x), _TRANSFORMS[transform](ref)(x)
        if isinstance(adjoint, ContinuousAdjoint):  # its O(1/L) discretisation error, relative to the gradient
            np.testing.assert_allclose(got, want, atol=0.05 * float(jnp.abs(want).max()))
        else:
            np.testing.assert_allclose(got, want, rtol=1e-9)
        if transform == "hessian":
            np.testing.assert_allclose(got, got.T, rtol=1e-12)
    else:
        with pytest.raises((TypeError, ValueError), match=expected):
            _TRANSFORMS[transform](f)(x)


@pytest.mark.parametrize("name", ["discrete", "recompute", "continuous", "autodiff", "trajectories", "linear path"])
def test_library_runs_under_strict_rank_and_dtype_promotion(name):
    """No implicit rank or dtype promotion inside the library: forward, every strategy's gradient and
    the adjoint trajectories run under JAX's strict settings (float64 tokens, int64 indices)."""
    model, x0, ctx, y = problem(4, d=2, n=5, B=3, heads=2, mlp=3, layers=2)
    probes = cfm_jax.ball_probes(jax.random.key(2), 3, 2, radius=1.0)
    linear = cfm_jax.PiecewiseLinearCFM(
        model.field, {k: jnp.concatenate([v, v[:1]], 0) for k, v in model.stacked_params().items()}, 2
    )
    run = {
        "discrete": lambda: cfm_jax.loss_and_grad(model, x0, ctx, y, steps=4, saveat=SaveAt(steps=True)),
        "recompute": lambda: cfm_jax.loss_and_grad(model, x0, ctx, y, adjoint=DiscreteAdjoint(memory=Recompute())),
        "continuous": lambda: cfm_jax.loss_and_grad(
            model, x0, ctx, y, solver=diffrax.Heun(), adjoint=ContinuousAdjoint()
        ),
        "autodiff": lambda: cfm_jax.loss_and_grad(model, x0, ctx, y, adjoint=AUTODIFF, saveat=SaveAt(layers=True)),
        "trajectories": lambda: cfm_jax.adjoint_trajectories(model, x0, ctx, y, probes=probes).probe_grads,
        "linear path": lambda: cfm_jax.loss_and_grad(linear, x0, ctx, y, steps=4),
    }[name]
    with jax.numpy_rank_promotion("raise"), jax.numpy_dtype_promotion("strict"):
        out = jax.block_until_ready(run())
    assert all(np.isfinite(np.asarray(a)).all() for a in jax.tree.leaves(out))


def test_forward_with_a_gaussian_context_is_the_exact_limit():
    """forward(model, x0, GaussianMeasure) is the exact infinite-context flow, compiled (the deprecated
    gaussian_flow, which warns, gives the same numbers);
    an adjoint strategy does not apply to it and is refused naming `adjoint`."""
    model = Transformer.init(jax.random.key(0), 2, heads=2, mlp_width=0, layers=3)
    mu = cfm_jax.GaussianMeasure(jnp.array([0.2, -0.1]), jnp.array([[1.0, 0.3], [0.3, 0.5]]))
    x0 = jnp.array([[0.5, 0.1], [-0.3, 0.4]])
    sol = forward(model, x0, mu, saveat=SaveAt(layers=True))
    with pytest.warns(DeprecationWarning, match="use cfm_jax.forward"):
        ref = cfm_jax.gaussian_flow(model, x0, mu, saveat=SaveAt(layers=True))
    assert isinstance(sol, cfm_jax.FlowSolution) and isinstance(sol.context, cfm_jax.GaussianMeasure)
    np.testing.assert_allclose(sol.x1, ref.x1, rtol=1e-13)
    np.testing.assert_allclose(sol.context.cov, ref.context.cov, rtol=1e-13)
    assert sol.xs is not None and ref.xs is not None
    np.testing.assert_allclose(sol.xs, ref.xs, rtol=1e-13)
    g = jax.grad(lambda m: jnp.sum(forward(m, x0, mu).x1 ** 2))(model)
    assert np.isfinite(np.asarray(g.Q)).all() and float(jnp.abs(g.Q).max()) > 0
    with pytest.raises(ValueError, match="`adjoint`"):
        forward(model, x0, mu, adjoint=DiscreteAdjoint())


def _has_host_callback(fn, *args) -> bool:
    return "callback" in jax.jit(fn).lower(*args).as_text()


def test_throw_false_leaves_the_value_checks_out_of_the_program(tiny):
    """throw=True puts the value checks (host callbacks, which JAX's persistent compilation cache never
    stores) into the compiled program; throw=False leaves them out, on the default hand-adjoint path
    (the fixed-step Euler scan has no run-time checks of diffrax's) and through jax.grad; bad values
    then pass through unchecked, as documented."""
    ctx = cfm_jax.EmpiricalMeasure(jnp.arange(8.0).reshape(4, 2) / 8)
    x0 = jnp.ones((1, 2))

    def value(x, throw):
        return forward(tiny, x, ctx, steps=4, throw=throw).x1

    def grad(m, throw):
        return cfm_jax.loss_and_grad(m, x0, ctx, jnp.zeros((1, 2)), throw=throw)[1]

    assert _has_host_callback(lambda x: value(x, True), x0)
    assert not _has_host_callback(lambda x: value(x, False), x0)
    assert _has_host_callback(lambda m: grad(m, True), tiny)
    assert not _has_host_callback(lambda m: grad(m, False), tiny)
    np.testing.assert_array_equal(value(x0, False), value(x0, True))
    assert np.isnan(np.asarray(value(jnp.full((1, 2), jnp.nan), False))).all()
    mu, attention = cfm_jax.GaussianMeasure(jnp.zeros(2), jnp.eye(2)), _attention_only()
    assert _has_host_callback(lambda x: forward(attention, x, mu).x1, x0)
    assert not _has_host_callback(lambda x: forward(attention, x, mu, throw=False).x1, x0)


def _attention_only():
    return Transformer.init(jax.random.key(0), 2, heads=1, mlp_width=0, layers=2)


@pytest.mark.parametrize("wrap", ["jax.jit", "eqx.filter_jit"])
def test_gaussian_context_values_are_checked_under_jit(wrap):
    """The exact Gaussian path checks x0 and the parameters inside the compiled program too."""
    tiny = _attention_only()
    mu = cfm_jax.GaussianMeasure(jnp.zeros(2), jnp.eye(2))
    jit = jax.jit if wrap == "jax.jit" else eqx.filter_jit
    f = jit(lambda m, x: forward(m, x, mu).x1)
    nan_model = eqx.tree_at(lambda m: m.V, tiny, tiny.V.at[0, 0, 0, 0].set(np.nan))
    errors = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError)
    with pytest.raises(errors, match="`x0`"):
        jax.block_until_ready(f(tiny, jnp.array([[np.nan, 0.0]])))
    with pytest.raises(errors, match="`model`"):
        jax.block_until_ready(f(nan_model, jnp.zeros((1, 2))))


def test_forward_inside_a_shard_map_with_varying_inputs(tiny):
    """Inside a caller's jax.shard_map (check_vma=True) on inputs that vary over its axis, the forward's
    carries are typed as varying (vary_alike): it runs with throw=False and equals the unsharded solve.
    (With throw=True, equinox's checks cannot be typed over varying axes.)"""
    from jax.sharding import NamedSharding, PartitionSpec as P

    k = len(jax.devices())
    mesh = jax.make_mesh((k,), ("b",))
    x0 = jnp.linspace(-1.0, 1.0, 2 * k * 2).reshape(2 * k, 2)
    z = jax.random.normal(jax.random.key(1), (k, 4, 2))

    def body(x, zz):
        return forward(tiny, x, cfm_jax.EmpiricalMeasure.unchecked(zz[0], jnp.full((4,), 0.25)), throw=False).x1

    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("b"), P("b")), out_specs=P("b")))
    put = lambda a: jax.device_put(a, NamedSharding(mesh, P("b")))  # noqa: E731
    out = f(put(x0), put(z))
    for i in range(k):
        want = forward(tiny, x0[2 * i : 2 * i + 2], cfm_jax.EmpiricalMeasure(z[i])).x1
        np.testing.assert_allclose(out[2 * i : 2 * i + 2], want, rtol=1e-12, atol=1e-14)


def test_numpy_integers_are_static_like_python_ints(tiny):
    """steps=np.int64(4) is the static int 4 (it used to be refused as a traced value, with no jit in sight)."""
    x0, ctx = jnp.ones((1, 2)), cfm_jax.EmpiricalMeasure(jnp.arange(8.0).reshape(4, 2) / 8)
    a = forward(tiny, x0, ctx, steps=np.int64(4), max_steps=np.int32(8))
    b = forward(tiny, x0, ctx, steps=4)
    np.testing.assert_array_equal(a.x1, b.x1)
    assert int(a.stats["num_steps"]) == 4
    _, g = cfm_jax.loss_and_grad(tiny, x0, ctx, jnp.zeros((1, 2)), steps=np.int64(4))
    assert np.isfinite(np.asarray(g.Q)).all()


def test_numpy_bools_are_static_like_python_bools(tiny):
    """throw=np.bool_(False) is the static False: the program of throw=False runs again (none is
    lowered) and gives its numbers; np.bool_(True) raises for a NaN like True (a traced bool would
    make ``if throw:`` a tracer error, or a program of its own)."""
    from _compiles import count_compilations

    x0, ctx = jnp.ones((1, 2)), cfm_jax.EmpiricalMeasure(jnp.arange(8.0).reshape(4, 2) / 8)
    plain = forward(tiny, x0, ctx, throw=False)
    with count_compilations() as count:
        numpy = forward(tiny, x0, ctx, throw=np.bool_(False))  # pyright: ignore[reportArgumentType]
    np.testing.assert_array_equal(numpy.x1, plain.x1)
    assert count() == 0
    with pytest.raises(eqx.EquinoxRuntimeError, match="`x0`"):
        forward(tiny, x0.at[0, 0].set(jnp.nan), ctx, throw=np.bool_(True))  # pyright: ignore[reportArgumentType]
    value, _ = cfm_jax.loss_and_grad(tiny, x0, ctx, jnp.zeros((1, 2)), throw=np.bool_(True))  # pyright: ignore[reportArgumentType]
    assert np.isfinite(float(value))


def test_one_naming_of_the_final_context_and_its_trajectory(tiny):
    """``context``/``contexts`` for every kind of context (the old names were removed in 0.2.0)."""
    x0, ctx = jnp.ones((1, 2)), cfm_jax.EmpiricalMeasure(jnp.arange(8.0).reshape(4, 2) / 8)
    sol = forward(tiny, x0, ctx, saveat=SaveAt(layers=True))
    assert sol.contexts is not None
    np.testing.assert_array_equal(sol.contexts.points[-1], sol.context.points)
    np.testing.assert_array_equal(sol.contexts.weights, jnp.broadcast_to(ctx.weights, (3, 4)))
    mu = cfm_jax.GaussianMeasure(jnp.zeros(2), jnp.eye(2))
    gsol = forward(_attention_only(), x0, mu, saveat=SaveAt(layers=True))
    assert gsol.contexts is not None
    np.testing.assert_array_equal(gsol.contexts.mean[-1], gsol.context.mean)
    assert not hasattr(cfm_jax, "GaussianSolution")


def test_an_adaptive_solve_reports_its_result_and_steps(tiny):
    """result and stats as diffrax's: no ``throw`` needed to learn that max_steps was hit."""
    x0, ctx = jnp.ones((1, 2)), cfm_jax.EmpiricalMeasure(jnp.arange(8.0).reshape(4, 2) / 8)
    pid = diffrax.PIDController(rtol=1e-9, atol=1e-9)
    sol = forward(tiny, x0, ctx, solver=diffrax.Tsit5(), stepsize_controller=pid)
    assert sol.result == diffrax.RESULTS.successful
    accepted, rejected = int(sol.stats["num_accepted_steps"]), int(sol.stats["num_rejected_steps"])
    assert int(sol.stats["num_steps"]) == accepted + rejected and accepted > tiny.num_layers
    assert int(sol.stats["max_steps"]) == 4096
    tight = diffrax.PIDController(rtol=1e-12, atol=1e-12)  # a whole layer in one step is never accepted
    capped = forward(tiny, x0, ctx, solver=diffrax.Tsit5(), stepsize_controller=tight, max_steps=1, throw=False)
    assert capped.result == diffrax.RESULTS.max_steps_reached
    assert int(capped.stats["num_steps"]) == tiny.num_layers
    with pytest.raises(eqx.EquinoxRuntimeError, match="max_steps"):
        forward(tiny, x0, ctx, solver=diffrax.Tsit5(), stepsize_controller=tight, max_steps=1)


def test_steps_are_counted_once_per_step_by_every_strategy(tiny):
    """stats["num_steps"] = L·k for k fixed steps per layer: the plain scan, diffeqsolve (autodiff), the
    continuous adjoint's forward and the discrete adjoint's segmented forward (under jax.vjp)."""
    x0, ctx = jnp.ones((1, 2)), cfm_jax.EmpiricalMeasure(jnp.arange(8.0).reshape(4, 2) / 8)
    L, k = tiny.num_layers, 3
    for adjoint in (None, AUTODIFF, ContinuousAdjoint()):
        sol = forward(tiny, x0, ctx, steps=k * L, adjoint=adjoint)
        assert int(sol.stats["num_steps"]) == k * L, adjoint
    sol, _ = jax.vjp(lambda x: forward(tiny, x, ctx, steps=k * L, adjoint=DiscreteAdjoint(StoreEvery(1))), x0)
    assert int(sol.stats["num_steps"]) == k * L


def test_step_to_is_refused_with_every_saveat(tiny):
    """A diffrax.StepTo grid would be ignored (each layer has its own uniform grid): refused, naming the
    argument, with SaveAt(steps=True) as with the others; fixed steps are ``steps=``."""
    x0, ctx = jnp.ones((1, 2)), jnp.arange(8.0).reshape(4, 2) / 8
    step_to = diffrax.StepTo(ts=jnp.linspace(0.0, 1.0, 5))
    for saveat in (SaveAt(), SaveAt(layers=True), SaveAt(steps=True)):
        with pytest.raises(ValueError, match="`stepsize_controller`=diffrax.StepTo"):
            forward(tiny, x0, ctx, stepsize_controller=step_to, saveat=saveat)
    sol = forward(tiny, x0, ctx, steps=4, stepsize_controller=diffrax.ConstantStepSize(), saveat=SaveAt(steps=True))
    assert sol.ts is not None and sol.ts.shape == (5,)
    with pytest.raises(ValueError, match="SaveAt\\(steps=True\\) needs fixed steps"):
        forward(
            tiny,
            x0,
            ctx,
            solver=diffrax.Tsit5(),
            stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-3),
            saveat=SaveAt(steps=True),
        )


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_progress_meter_reports_the_whole_solve(tiny, capsys, dtype):
    """diffrax's progress meters on forward: one meter over s ∈ [0, 1], stepped inside the adaptive
    solves of every layer, from 0 % to 100 %."""
    x0 = jnp.ones((1, 2), dtype)
    ctx = cfm_jax.EmpiricalMeasure(jnp.arange(8.0, dtype=dtype).reshape(4, 2) / 8)
    pid = diffrax.PIDController(rtol=1e-10, atol=1e-10)  # several steps in each layer
    meter = diffrax.TextProgressMeter(minimum_increase=0.0)
    model = jax.tree.map(lambda a: a.astype(dtype), tiny)
    jax.block_until_ready(
        forward(model, x0, ctx, solver=diffrax.Tsit5(), stepsize_controller=pid, progress_meter=meter)
    )
    values = [float(v.rstrip("%")) for v in capsys.readouterr().out.split() if v.endswith("%")]
    assert values[0] == 0.0 and values[-1] == 100.0
    assert values == sorted(values)
    assert any(0 < v < 50 for v in values) and any(50 < v < 100 for v in values)  # inside both layers
    fixed = forward(model, x0, ctx, steps=4, progress_meter=meter)  # fixed steps: at every layer end
    jax.block_until_ready(fixed)
    assert [float(v.rstrip("%")) for v in capsys.readouterr().out.split() if v.endswith("%")] == [0.0, 50.0, 100.0]


def test_a_wider_context_dtype_is_not_cast_to_the_tokens(tiny):
    """float32 tokens with a float64 context run in float64, equal to the all-float64 solve."""
    x32 = jnp.array([[0.25, -0.5]], jnp.float32)
    z64 = jnp.arange(8.0, dtype=jnp.float64).reshape(4, 2) / 7
    sol = forward(tiny, x32, z64)
    assert sol.x1.dtype == jnp.float64
    np.testing.assert_allclose(sol.x1, forward(tiny, x32.astype(jnp.float64), z64).x1, rtol=1e-15)


def test_a_float64_context_is_not_cast_to_float32_tokens_and_parameters():
    """float32 tokens and parameters with a float64 context: the context is the widest input, so the
    solve runs in float64, equal to the solve from the same tokens given in float64."""
    m32 = Transformer.init(jax.random.key(0), 2, heads=1, mlp_width=3, layers=2, dtype=jnp.float32)
    x32 = jnp.array([[0.25, -0.5]], jnp.float32)
    z64 = jnp.arange(8.0, dtype=jnp.float64).reshape(4, 2) / 7
    sol = forward(m32, x32, z64)
    assert sol.x1.dtype == jnp.float64
    np.testing.assert_allclose(sol.x1, forward(m32, x32.astype(jnp.float64), z64).x1, rtol=1e-15)


@pytest.mark.parametrize("grad", [False, True])
def test_plain_jit_errors_say_the_message_first(tiny, caplog, grad):
    """Under a plain jax.jit (and jit(grad)) a failed check arrives as JAX's runtime error carrying the
    message naming the argument, after its own first line and a traceback; the first thing the user
    reads is the message itself: JAX's log of the failed callback is turned into that one line."""
    ctx = cfm_jax.EmpiricalMeasure(jnp.arange(8.0).reshape(4, 2) / 8)
    loss = lambda x: forward(tiny, x, ctx).x1.sum()
    f = jax.jit(jax.grad(loss) if grad else loss)
    with caplog.at_level("DEBUG", logger="jax._src.callback"):
        with pytest.raises(jax.errors.JaxRuntimeError, match="`x0` contains non-finite"):
            jax.block_until_ready(f(jnp.array([[jnp.nan, 0.0]])))
    said = [r for r in caplog.records if r.name == "jax._src.callback"]
    assert said and said[0].getMessage() == "`x0` contains non-finite values (nan/inf)."
    assert all(r.exc_info is None for r in said)


def test_forward_on_a_gaussian_context_warns_in_the_heavy_tail_regime(monkeypatch):
    """The exact limit is what sampled contexts are compared with: forward on a
    GaussianMeasure warns once, from the caller's line, when some head has ρ ≥ 1 there (the default
    initialisation in d = 6); not for a light model, an empirical context, or inside a caller's jit."""
    import warnings

    import cfm_jax._regime as regime_module

    d = 6
    mu = cfm_jax.GaussianMeasure(jnp.zeros(d), jnp.eye(d))
    x0 = jax.random.normal(jax.random.key(1), (3, d))
    heavy = cfm_jax.Transformer.init(jax.random.key(0), d, layers=2)
    light = cfm_jax.Transformer.init(jax.random.key(0), d, layers=2, qk_scale=0.3)
    monkeypatch.setattr(regime_module, "_WARNED", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfm_jax.forward(light, x0, mu)
        cfm_jax.forward(heavy, x0, mu.sample(jax.random.key(2), 64))
        jax.jit(cfm_jax.forward)(heavy, x0, mu)
    with pytest.warns(cfm_jax.HeavyTailWarning, match="Scale Q and K down") as record:
        cfm_jax.forward(heavy, x0, mu)
    assert (
        record[0].filename == __file__ and "forward(heavy, x0, mu)" in open(__file__).readlines()[record[0].lineno - 1]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        cfm_jax.forward(heavy, x0, mu)
    monkeypatch.setattr(regime_module, "_WARNED", False)
    with pytest.warns(cfm_jax.HeavyTailWarning):
        cfm_jax.forward(heavy, x0[0], mu)
