"""The exact Gaussian infinite-context flow against sampled contexts, its own ODE, autodiff and
finite differences; the closed forms of the fields; validation and the refusal."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import (
    AbstractGaussianField,
    AttentionField,
    FlowSolution,
    GaussianMeasure,
    LinearMLPField,
    forward,
    token_adjoint,
)
from cfm_jax.stats import fit_loglog

D = 3


def _mu():
    A = jnp.array([[0.5, 0.1, 0.0], [0.0, 0.4, 0.2], [0.1, 0.0, 0.45]])
    return GaussianMeasure(jnp.array([0.2, -0.1, 0.1]), A @ A.T + 0.05 * jnp.eye(D))


def _x0():
    return 0.6 * jax.random.normal(jax.random.key(3), (4, D), jnp.float64)


@pytest.fixture(scope="module")
def linear_mlp_model():
    """Attention (2 heads) + an MLP declared linear, L = 4."""
    return cfm_jax.Transformer.init(
        jax.random.key(5),
        D,
        heads=2,
        mlp_width=3,
        layers=4,
        activation=jax.nn.identity,
        mlp_scale=0.5,
        dtype=jnp.float64,
    )


def test_attention_closed_form_vs_large_n():
    """One attention layer at N(m, Σ): the sampled velocity approaches c + Mx as n^{-1/2}."""
    model = cfm_jax.Transformer.init(jax.random.key(1), D, heads=2, layers=1, dtype=jnp.float64)
    params, mu, x = model.layer_params(0), _mu(), _x0()
    c, M = AttentionField().gaussian_affine(params, mu.mean, mu.cov)
    exact = c + x @ M.T
    ns = [1000, 4000, 16000, 64000]
    keys = jax.random.split(jax.random.key(11), 8)
    errs = []
    for n in ns:
        w = jnp.full((n,), 1.0 / n)

        def err(k, n=n, w=w):
            v = model.field(x, cfm_jax.EmpiricalMeasure.unchecked(mu.sample(k, n), w), params)
            return jnp.sqrt(jnp.mean(jnp.sum((v - exact) ** 2, -1)))

        errs.append(np.asarray(jax.jit(jax.vmap(err))(keys)))
    fit = fit_loglog(ns, np.stack(errs))
    assert fit.contains(-0.5), fit
    assert fit.ci_high - fit.ci_low < 0.4, fit


@pytest.mark.slow  # a sampled forward at several n
def test_recursion_vs_sampled_forward(linear_mlp_model):
    """L = 4 layers (attention + linear MLP): cfm_jax.forward on n Gaussian samples approaches
    the moment recursion's token as n^{-1/2} over almost two decades, with no floor. One compiled
    n-system: the first n of N samples carry weight 1/n, the rest exactly 0."""
    model, mu, x = linear_mlp_model, _mu(), _x0()
    exact = forward(model, x, mu).x1
    ns = [16, 64, 256, 1024]
    N = ns[-1]
    keys = jax.random.split(jax.random.key(12), 8)

    def errs(k):
        z = mu.sample(k, N)

        def at(n):
            w = jnp.where(jnp.arange(N) < n, 1.0 / n, 0.0)
            x1 = cfm_jax.forward(model, x, cfm_jax.EmpiricalMeasure.unchecked(z, w)).x1
            return jnp.mean(jnp.linalg.norm(x1 - exact, axis=-1))

        return jax.lax.map(at, jnp.asarray(ns, jnp.float64))

    fit = fit_loglog(ns, np.asarray(jax.jit(jax.vmap(errs))(keys)).T)
    assert fit.contains(-0.5), fit
    assert fit.ci_high - fit.ci_low < 0.5, fit


def _ode_reference(model, x, mu):
    return forward(model, x, mu, solver=diffrax.Tsit5(), steps=64 * model.num_layers)


def _ode_error(sol, ref):
    return float(jnp.max(jnp.abs(sol.x1 - ref.x1)) + jnp.max(jnp.abs(sol.context.cov - ref.context.cov)))


def test_euler_recursion_converges_to_moment_ode_first_order(linear_mlp_model):
    """As steps grow, the exact Euler recursion converges to the moment ODE (Tsit5, 64 steps per
    layer) at order 1."""
    model, mu, x = linear_mlp_model, _mu(), _x0()
    ref = _ode_reference(model, x, mu)
    ks = [2, 4, 8, 16, 32]
    errs = [_ode_error(forward(model, x, mu, steps=k * model.num_layers), ref) for k in ks]
    assert abs(fit_loglog(ks, errs).slope + 1.0) < 0.1, errs


@pytest.mark.slow
def test_moment_ode_heun_second_order(linear_mlp_model):
    model, mu, x = linear_mlp_model, _mu(), _x0()
    ref = _ode_reference(model, x, mu)
    ks = [2, 4, 8, 16]
    errs = [_ode_error(forward(model, x, mu, solver=diffrax.Heun(), steps=k * model.num_layers), ref) for k in ks]
    assert abs(fit_loglog(ks, errs).slope + 2.0) < 0.2, errs


def test_affine_field_moments_exact_for_any_empirical_context():
    """A linear-MLP-only field ignores the measure and is affine: for any empirical context the
    sampled tokens equal the recursion's and the empirical mean and covariance of the pushed
    points follow the moment recursion exactly (an independent code path: cfm_jax.forward)."""
    k1, k2, k3 = jax.random.split(jax.random.key(4), 3)
    L, m = 3, 5
    params = {
        "W1": 0.5 * jax.random.normal(k1, (L, m, D)),
        "b1": 0.3 * jax.random.normal(k2, (L, m)),
        "W2": 0.5 * jax.random.normal(k3, (L, D, m)),
        "b2": 0.1 * jnp.ones((L, D)),
    }
    model = cfm_jax.PiecewiseConstantCFM(LinearMLPField(), params, D)
    z = jax.random.normal(jax.random.key(6), (50, D)) @ jnp.diag(jnp.array([1.0, 0.5, 2.0]))
    mu = GaussianMeasure(z.mean(0), jnp.cov(z.T, bias=True))
    x = _x0()
    for steps in (L, 2 * L):
        sol = forward(model, x, mu, steps=steps)
        fs = cfm_jax.forward(model, x, z, steps=steps)
        np.testing.assert_allclose(sol.x1, fs.x1, atol=1e-12)
        np.testing.assert_allclose(sol.context.mean, fs.context.points.mean(0), atol=1e-12)
        np.testing.assert_allclose(sol.context.cov, jnp.cov(fs.context.points.T, bias=True), atol=1e-11)


def test_sum_field_adds_closed_forms(linear_mlp_model):
    params, mu = linear_mlp_model.layer_params(1), _mu()
    field = linear_mlp_model.field
    assert isinstance(field, AbstractGaussianField)  # the sum of two closed forms is typed as one
    c, M = field.gaussian_affine(params, mu.mean, mu.cov)
    ca, Ma = AttentionField().gaussian_affine(params, mu.mean, mu.cov)
    cm, Mm = LinearMLPField().gaussian_affine(params, mu.mean, mu.cov)
    np.testing.assert_allclose(c, ca + cm, atol=1e-14)
    np.testing.assert_allclose(M, Ma + Mm, atol=1e-14)


@pytest.mark.parametrize("activation, name", [(jnp.tanh, "tanh"), (jax.nn.gelu, "gelu")])
def test_refusal_names_the_field(activation, name):
    model = cfm_jax.Transformer.init(jax.random.key(0), D, heads=1, mlp_width=2, layers=2, activation=activation)
    with pytest.raises(TypeError, match=rf"MLPField with activation .*{name}.* no Gaussian closed form"):
        forward(model, _x0(), _mu())


def test_refusal_default_names_user_field():
    class Odd(cfm_jax.AbstractField):
        def __call__(self, x, measure, params):
            return jnp.sin(x) * params["a"]

    model = cfm_jax.PiecewiseConstantCFM(Odd(), {"a": jnp.ones((2,))}, D)
    with pytest.raises(TypeError, match="Odd has no Gaussian closed form"):
        forward(model, _x0(), _mu())


def _loss(model, x, mean, cov, **kw):
    sol = forward(model, x, GaussianMeasure.unchecked(mean, cov), **kw)
    return jnp.sum(jnp.sin(sol.x1)) + jnp.sum(sol.context.cov**2) + jnp.sum(sol.context.mean**3)


@pytest.mark.parametrize(
    "solver", [None, pytest.param(diffrax.Heun(), marks=pytest.mark.slow)], ids=["recursion", "heun"]
)
def test_grad_matches_central_differences(linear_mlp_model, solver):
    """jax.grad through the Gaussian forward (model, x0, mean, cov) vs central differences, f64."""
    model, mu, x = linear_mlp_model, _mu(), _x0()
    kw = dict(solver=solver, steps=2 * model.num_layers)
    args = (model, x, mu.mean, mu.cov)
    grads = jax.grad(lambda *a: _loss(*a, **kw), argnums=(0, 1, 2, 3))(*args)
    leaves, treedef = jax.tree.flatten(args)
    dirs = [
        jax.random.normal(k, jnp.shape(a)) for k, a in zip(jax.random.split(jax.random.key(9), len(leaves)), leaves)
    ]
    dirs[-1] = dirs[-1] + dirs[-1].T  # a symmetric perturbation of the covariance
    analytic = sum(jnp.vdot(g, v) for g, v in zip(jax.tree.leaves(grads), dirs))
    eps = 1e-6

    def at(t):
        return _loss(*jax.tree.unflatten(treedef, [a + t * v for a, v in zip(leaves, dirs)]), **kw)

    numeric = (at(eps) - at(-eps)) / (2 * eps)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6)


def test_token_adjoint_matches_autodiff(linear_mlp_model):
    """p_0 of the hand reverse scan = ∂ℓ/∂x_0 by autodiff through the recursion; p_1 = ∇ℓ(x_1)."""
    model, mu, x = linear_mlp_model, _mu(), _x0()
    y = jnp.ones_like(x)

    def loss(x0):
        return 0.5 * jnp.mean(jnp.sum((forward(model, x0, mu, steps=8).x1 - y) ** 2, -1))

    sol, ps = token_adjoint(model, x, mu, y, steps=8)
    assert sol.ts is not None
    assert ps.shape == (5, 4, D) and sol.ts.shape == (5,)
    np.testing.assert_allclose(ps[0], jax.grad(loss)(x), atol=1e-13)
    np.testing.assert_allclose(ps[-1], (forward(model, x, mu, steps=8).x1 - y) / 4, atol=1e-14)
    _, ps_steps = token_adjoint(model, x, mu, y, steps=8, saveat=cfm_jax.SaveAt(steps=True))
    np.testing.assert_allclose(ps_steps[::2], ps, atol=1e-15)


def test_saveat_and_shapes(linear_mlp_model):
    model, mu, x = linear_mlp_model, _mu(), _x0()
    L = model.num_layers
    layers = forward(model, x, mu, steps=2 * L, saveat=cfm_jax.SaveAt(layers=True))
    steps = forward(model, x, mu, steps=2 * L, saveat=cfm_jax.SaveAt(steps=True))
    assert isinstance(layers, FlowSolution) and isinstance(layers.context, GaussianMeasure)
    assert layers.xs is not None and layers.contexts is not None and layers.ts is not None
    assert steps.xs is not None and steps.contexts is not None
    assert layers.xs.shape == (L + 1, 4, D) and layers.contexts.cov.shape == (L + 1, D, D)
    assert steps.contexts.mean.shape == (2 * L + 1, D)
    np.testing.assert_allclose(layers.contexts.cov[-1], layers.context.cov, atol=1e-15)
    np.testing.assert_allclose(layers.ts, jnp.arange(L + 1) / L)
    np.testing.assert_allclose(steps.xs[::2], layers.xs, atol=1e-15)
    np.testing.assert_allclose(layers.xs[-1], layers.x1, atol=1e-15)
    single = forward(model, x[0], mu, steps=2 * L, saveat=cfm_jax.SaveAt(layers=True))
    assert single.xs is not None
    assert single.x1.shape == (D,) and single.xs.shape == (L + 1, D)
    np.testing.assert_allclose(single.x1, layers.x1[0], atol=1e-15)


def test_bad_inputs(linear_mlp_model):
    mu = _mu()
    with pytest.raises(ValueError, match="`context` has dimension 2"):
        forward(linear_mlp_model, _x0(), GaussianMeasure(jnp.zeros(2), jnp.eye(2)))
    with pytest.raises(ValueError, match="`steps`=6 must be a multiple"):
        forward(linear_mlp_model, _x0(), mu, steps=6)
    with pytest.raises(ValueError, match="`x0` has dimension 5"):
        forward(linear_mlp_model, jnp.zeros((2, 5)), mu)
    with pytest.raises(ValueError, match="`y` must have the shape"):
        token_adjoint(linear_mlp_model, _x0(), mu, jnp.zeros((3, D)))
    with pytest.raises(ValueError, match="`n` must be a positive int"):
        mu.sample(jax.random.key(0), 0)


def test_jit_and_vmap_over_contexts(linear_mlp_model):
    """Pure in arrays: vmapped over a batch of means equals the loop, under jit."""
    model, mu, x = linear_mlp_model, _mu(), _x0()
    means = jnp.stack([mu.mean, -mu.mean, 2 * mu.mean])
    f = jax.jit(jax.vmap(lambda m: forward(model, x, GaussianMeasure(m, mu.cov)).x1))
    out = f(means)
    for i in range(3):
        np.testing.assert_allclose(out[i], forward(model, x, GaussianMeasure(means[i], mu.cov)).x1, atol=1e-13)
    assert eqx.is_array(out)


def test_token_adjoint_checks_values_under_jit(linear_mlp_model):
    """Under jax.jit, a non-finite x0 or y raises an error naming it (the eager check cannot see
    tracers); throw=False leaves the checks out of the program."""
    mu = GaussianMeasure(jnp.zeros(3), jnp.eye(3))
    f = jax.jit(lambda x, y: token_adjoint(linear_mlp_model, x, mu, y)[1])
    good = jnp.zeros((2, 3))
    errors = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError)
    with pytest.raises(errors, match="`x0`"):
        jax.block_until_ready(f(good.at[0, 0].set(jnp.nan), good))
    with pytest.raises(errors, match="`y`"):
        jax.block_until_ready(f(good, good.at[1, 2].set(jnp.inf)))
    unchecked = jax.jit(lambda x, y: token_adjoint(linear_mlp_model, x, mu, y, throw=False)[1])
    assert "callback" not in unchecked.lower(good, good).as_text()
    np.testing.assert_array_equal(unchecked(good, good), f(good, good))


def _tame_attention(L=2, dtype=jnp.float64):
    """Attention only, small values: the moment ODE stays bounded on [0, 1] (a large V makes dΣ/ds =
    MΣ + ΣMᵀ, quadratic in Σ, blow up in finite depth)."""
    return cfm_jax.Transformer.init(jax.random.key(7), D, heads=1, layers=L, v_scale=0.3, dtype=dtype)


@pytest.mark.slow  # an adaptive solve of the moment ODE and its gradient
def test_adaptive_moment_ode_through_the_one_loop():
    """An adaptive controller works on a Gaussian context as on atoms (it used to fail on the default
    solver with an AttributeError): it agrees with a fine fixed-step solve, reports its steps, and a too
    small ``max_steps`` is reported in ``result`` (throw=False) or raised (throw=True)."""
    model, mu, x = _tame_attention(), _mu(), _x0()
    pid = diffrax.PIDController(rtol=1e-8, atol=1e-8)
    ref = forward(model, x, mu, solver=diffrax.Tsit5(), steps=32 * model.num_layers)
    sol = forward(model, x, mu, solver=diffrax.Tsit5(), stepsize_controller=pid)
    np.testing.assert_allclose(sol.x1, ref.x1, atol=1e-6)
    np.testing.assert_allclose(sol.context.cov, ref.context.cov, atol=1e-6)
    assert sol.result == diffrax.RESULTS.successful
    stats = sol.stats
    assert int(stats["num_steps"]) == int(stats["num_accepted_steps"]) + int(stats["num_rejected_steps"])
    assert int(stats["num_accepted_steps"]) >= model.num_layers
    tight = diffrax.PIDController(rtol=1e-12, atol=1e-12)  # a whole layer in one step is never accepted
    capped = forward(model, x, mu, solver=diffrax.Tsit5(), stepsize_controller=tight, max_steps=1, throw=False)
    assert capped.result == diffrax.RESULTS.max_steps_reached
    with pytest.raises(eqx.EquinoxRuntimeError, match="max_steps"):
        forward(model, x, mu, solver=diffrax.Tsit5(), stepsize_controller=tight, max_steps=1)


@pytest.mark.parametrize(
    "options, match",
    [
        ({"stepsize_controller": diffrax.PIDController(rtol=1e-3, atol=1e-3)}, "`stepsize_controller`.*error estimate"),
        ({"stepsize_controller": 0.1}, "`stepsize_controller` must be a diffrax"),
        ({"stepsize_controller": diffrax.StepTo(ts=jnp.linspace(0.0, 1.0, 5))}, "`stepsize_controller`=diffrax.StepTo"),
        ({"max_steps": 0}, "`max_steps` must be a positive int"),
        ({"solver": "euler"}, "`solver` must be a diffrax solver"),
        ({"saveat": "layers"}, "`saveat` must be a cfm_jax.SaveAt"),
        ({"progress_meter": True}, "`progress_meter` must be a diffrax progress meter"),
        ({"adjoint": cfm_jax.DiscreteAdjoint()}, "`adjoint`=DiscreteAdjoint.*EmpiricalMeasure"),
    ],
)
def test_options_are_validated_for_a_gaussian_context_too(options, match):
    """Options are validated once, for every kind of context: errors name the argument (they used to be
    an AttributeError from inside the solve, or diffrax's message)."""
    with pytest.raises(ValueError, match=match):
        forward(_tame_attention(), _x0(), _mu(), **options)


def test_token_adjoint_refuses_a_loss_that_is_not_callable():
    with pytest.raises(ValueError, match="`loss` must be None or a callable"):
        token_adjoint(_tame_attention(), _x0(), _mu(), jnp.zeros((4, D)), loss="mse")  # pyright: ignore[reportArgumentType]  # bad on purpose


@pytest.mark.parametrize("wrap", ["eager", "eqx.filter_jit", "jax.jit"])
@pytest.mark.parametrize(
    "bad, match", [("nan", "`context`: `cov` contains non-finite"), ("singular", "positive definite")]
)
def test_a_gaussian_built_by_tree_map_is_checked_when_it_reaches_forward(wrap, bad, match):
    """A diverged gradient step builds its measure with jax.tree.map, bypassing the constructor: forward
    checks the values itself, eagerly and under any jit (it used to return a silent NaN)."""
    model, mu, x = _tame_attention(), _mu(), _x0()
    new = {"nan": lambda c: c * jnp.nan, "singular": lambda c: jnp.ones_like(c)}[bad]
    broken = jax.tree.map(lambda a: new(a) if a.ndim == 2 else a, mu)

    def run(m):
        return cfm_jax.forward(model, x, m).x1

    f = {"eager": run, "eqx.filter_jit": eqx.filter_jit(run), "jax.jit": jax.jit(run)}[wrap]
    with pytest.raises((eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError), match=match):
        jax.block_until_ready(f(broken))
    assert np.isfinite(np.asarray(f(mu))).all()
    if bad == "nan":  # throw=False leaves the checks out, as documented
        assert np.isnan(np.asarray(cfm_jax.forward(model, x, broken, throw=False).x1)).all()


def test_piecewise_linear_path_takes_theta_at_each_step_start():
    """The Euler recursion on a piecewise-linear path against a recursion written out here: step i
    (of size h = 1/N) uses θ(i/N), the path interpolated at the step's start."""
    base = _tame_attention(L=2)
    rng = np.random.default_rng(0)
    params = {
        k: jnp.asarray(np.concatenate([v, v[:1] + 0.3 * rng.normal(size=v[:1].shape)], 0))
        for k, v in base.stacked_params().items()
    }
    model = cfm_jax.PiecewiseLinearCFM(AttentionField(), params, D)
    mu, x = _mu(), np.asarray(_x0())
    N, L = 6, 2
    m, S = np.asarray(mu.mean), np.asarray(mu.cov)
    for i in range(N):
        s = i / N
        l = min(int(s * L), L - 1)
        frac = s * L - l
        theta = {k: (1 - frac) * v[l] + frac * v[l + 1] for k, v in params.items()}
        c, M = (np.asarray(a) for a in AttentionField().gaussian_affine(theta, jnp.asarray(m), jnp.asarray(S)))
        G = np.eye(D) + M / N
        x, m, S = x + (c + x @ M.T) / N, m + (c + M @ m) / N, G @ S @ G.T
    sol = forward(model, _x0(), mu, steps=N)
    np.testing.assert_allclose(sol.x1, x, atol=1e-13)
    np.testing.assert_allclose(sol.context.mean, m, atol=1e-13)
    np.testing.assert_allclose(sol.context.cov, S, atol=1e-13)


def test_a_wider_context_dtype_is_not_cast_to_the_tokens():
    """float32 tokens with a float64 Gaussian context (and model): the solve runs in float64, the widest
    input, equal to the solve from the same tokens in float64."""
    model = _tame_attention()
    x32 = _x0().astype(jnp.float32)
    sol = forward(model, x32, _mu())
    assert sol.x1.dtype == jnp.float64
    np.testing.assert_allclose(sol.x1, forward(model, x32.astype(jnp.float64), _mu()).x1, rtol=1e-15)


def test_a_float64_gaussian_context_is_not_cast_to_float32_tokens_and_parameters():
    """float32 tokens and model with a float64 Gaussian context: the solve runs in float64, equal to the
    solve from the same tokens given in float64."""
    m32 = _tame_attention(dtype=jnp.float32)
    x32 = _x0().astype(jnp.float32)
    sol = forward(m32, x32, _mu())
    assert sol.x1.dtype == jnp.float64
    np.testing.assert_allclose(sol.x1, forward(m32, x32.astype(jnp.float64), _mu()).x1, rtol=1e-15)


def test_steps_are_counted_once_per_step():
    """stats["num_steps"] is L·k for k fixed steps per layer, through every path of the loop."""
    model, mu, x = _tame_attention(L=2), _mu(), _x0()
    for solver in (diffrax.Euler(), diffrax.Heun()):
        sol = forward(model, x, mu, solver=solver, steps=6, saveat=cfm_jax.SaveAt(steps=True))
        assert int(sol.stats["num_steps"]) == 6 and int(sol.stats["num_rejected_steps"]) == 0
        assert sol.ts is not None and sol.ts.shape == (7,)
    auto = forward(model, x, mu, steps=6, adjoint=diffrax.RecursiveCheckpointAdjoint())  # diffeqsolve
    assert int(auto.stats["num_steps"]) == 6
    np.testing.assert_allclose(auto.x1, forward(model, x, mu, steps=6).x1, atol=1e-14)
