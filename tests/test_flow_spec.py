"""The options and the result of a solve: the one fixed-step / exact-Euler decision, option checks,
FlowSolution's names (and the deprecated ones)."""

import inspect

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax._flow import FlowSpec, SaveAt, fixed_controller


@pytest.fixture(scope="module")
def model():
    return cfm_jax.Transformer.init(jax.random.key(0), 2, heads=1, layers=2)


def _spec(model, **options):
    return FlowSpec.of(model, **options)


def test_the_options_and_their_defaults_are_flow_specs(model):
    """FlowSpec.of owns forward's integration options: its keywords are FlowSpec.OPTIONS, and forward's
    signature (its documentation) shows the same defaults."""
    of = inspect.signature(FlowSpec.of).parameters
    assert tuple(n for n, p in of.items() if p.kind is p.KEYWORD_ONLY) == FlowSpec.OPTIONS
    shown = inspect.signature(cfm_jax.forward).parameters
    for name in FlowSpec.OPTIONS:
        assert shown[name].default == of[name].default, name
    assert FlowSpec.of(model) == FlowSpec(diffrax.Euler(), None, SaveAt(), model.num_layers, 4096)


def test_fixed_steps_and_exact_euler_are_decided_once(model):
    """None and ConstantStepSize are the fixed-step normal form (None); exact Euler is Euler with fixed
    steps; the default adjoint reads the same decision."""
    assert fixed_controller(None) is None and fixed_controller(diffrax.ConstantStepSize()) is None
    cases = [
        ({}, True, True),
        ({"stepsize_controller": diffrax.ConstantStepSize()}, True, True),
        ({"solver": diffrax.Heun()}, True, False),
        ({"solver": diffrax.Tsit5(), "stepsize_controller": diffrax.PIDController(rtol=1e-3, atol=1e-3)}, False, False),
    ]
    for options, fixed, exact in cases:
        spec = _spec(model, **options)
        assert (spec.fixed, spec.exact_euler) == (fixed, exact), options
        default = cfm_jax.default_adjoint(options.get("solver"), options.get("stepsize_controller"))
        assert isinstance(default, cfm_jax.DiscreteAdjoint) == exact, options
    assert _spec(model).steps == 2 and _spec(model, steps=np.int64(6)).steps == 6


@pytest.mark.parametrize(
    "options, match",
    [
        ({"steps": 3}, "`steps`=3 must be a multiple"),
        ({"steps": 0}, "`steps` must be a positive int"),
        ({"steps": 2.0}, "`steps` must be a positive int"),
        ({"max_steps": -1}, "`max_steps` must be a positive int"),
        ({"solver": diffrax.Euler}, "`solver` must be a diffrax solver"),
        ({"stepsize_controller": "pid"}, "`stepsize_controller` must be a diffrax"),
        ({"stepsize_controller": diffrax.StepTo(ts=jnp.linspace(0.0, 1.0, 3))}, "StepTo.*is not supported"),
        ({"stepsize_controller": diffrax.PIDController(rtol=1e-3, atol=1e-3)}, "`solver`=Euler\\(\\) has none"),
        (
            {
                "solver": diffrax.Tsit5(),
                "stepsize_controller": diffrax.PIDController(rtol=1e-3, atol=1e-3),
                "saveat": SaveAt(steps=True),
            },
            "SaveAt\\(steps=True\\) needs fixed steps",
        ),
        ({"saveat": None}, "`saveat` must be a cfm_jax.SaveAt"),
        ({"progress_meter": "text"}, "`progress_meter` must be a diffrax progress meter"),
        ({"progress_meter": [1]}, "`progress_meter` must be a diffrax progress meter"),
    ],
)
def test_every_option_is_checked_naming_it(model, options, match):
    with pytest.raises(ValueError, match=match):
        _spec(model, **options)


def test_saveat_emits_what_it_asks_for():
    assert SaveAt().emit == "none" and SaveAt(layers=True).emit == "ends" and SaveAt(steps=True).emit == "steps"
    assert SaveAt(layers=True, steps=True).emit == "steps"


def test_solution_defaults_and_no_old_names():
    """A FlowSolution built without a result is successful with empty stats; the names removed in
    0.2.0 are gone (AttributeError), not silently something else."""
    ctx = cfm_jax.EmpiricalMeasure(jnp.ones((3, 2)))
    sol = cfm_jax.FlowSolution(x1=jnp.zeros(2), context=ctx, stats={"num_steps": jnp.asarray(4)})
    assert sol.result == diffrax.RESULTS.successful
    for old in ("z1", "weights", "measure", "zs", "means", "covs", "num_steps"):
        with pytest.raises(AttributeError):
            getattr(sol, old)
    assert FlowSpec(diffrax.Euler(), None).fixed


@pytest.mark.parametrize("solver", [diffrax.EulerHeun(), diffrax.SEA()])
def test_an_sde_solver_is_refused_in_one_line_naming_the_solver(solver):
    """diffrax's own TermAndSolverIncompatible is hundreds of characters naming no argument."""
    model = cfm_jax.Transformer.init(jax.random.key(0), dim=2, layers=2)
    with pytest.raises(ValueError, match=r"^`solver`=\w+\(\) integrates several terms") as info:
        cfm_jax.forward(model, jnp.ones((1, 2)), jnp.ones((3, 2)), solver=solver)
    assert "\n" not in str(info.value)


def _problem(d=3, n=16, layers=4):
    model = cfm_jax.Transformer.init(jax.random.key(0), d, layers=layers, heads=1, dtype=jnp.float64)
    x0 = jax.random.normal(jax.random.key(2), (2, d), jnp.float64)
    return model, x0, jax.random.normal(jax.random.key(1), (n, d), jnp.float64)


def test_saveat_ts_picks_the_depths_of_the_full_trajectory():
    """ts on the layer grid, and on the step grid with fixed steps, give exactly the full trajectory's
    states at those depths (tokens and context); on an empirical and a Gaussian context."""
    model, x0, z = _problem()
    full = cfm_jax.forward(model, x0, z, saveat=SaveAt(layers=True))
    part = cfm_jax.forward(model, x0, z, saveat=SaveAt(ts=np.array([0.0, 0.5, 1.0])))
    at = jnp.array([0, 2, 4])
    assert full.ts is not None and full.xs is not None and full.contexts is not None
    assert part.xs is not None and part.contexts is not None
    np.testing.assert_array_equal(part.ts, full.ts[at])
    np.testing.assert_array_equal(part.xs, full.xs[at])
    np.testing.assert_array_equal(part.contexts.points, full.contexts.points[at])
    steps = cfm_jax.forward(model, x0[0], z, steps=8, saveat=SaveAt(steps=True))
    mid = cfm_jax.forward(model, x0[0], z, steps=8, saveat=SaveAt(ts=(0.125, 0.75)))
    assert steps.xs is not None and mid.xs is not None
    np.testing.assert_array_equal(mid.xs, steps.xs[jnp.array([1, 6])])
    assert mid.xs.shape == (2, 3)  # a single token keeps its shape
    mu = cfm_jax.GaussianMeasure(jnp.zeros(3), jnp.eye(3))
    small = cfm_jax.Transformer.init(jax.random.key(0), 3, layers=4, heads=1, qk_scale=0.3, dtype=jnp.float64)
    g_full = cfm_jax.forward(small, x0, mu, saveat=SaveAt(layers=True))
    g_part = cfm_jax.forward(small, x0, mu, saveat=SaveAt(ts=(0.25, 1.0)))
    assert g_full.contexts is not None and g_part.contexts is not None
    np.testing.assert_array_equal(g_part.contexts.cov, g_full.contexts.cov[jnp.array([1, 4])])


@pytest.mark.parametrize("layers", [3, 10])
def test_saveat_ts_takes_float32_layer_boundaries(layers):
    """float32 layer boundaries (1/3 is 1 + 3e-8 layers, past float64's tolerance) pick exactly the
    full trajectory's states; a depth off the grid by more than float32's round-off is still refused."""
    model, x0, z = _problem(layers=layers)
    full = cfm_jax.forward(model, x0, z, saveat=SaveAt(layers=True))
    assert full.xs is not None
    for ts in (np.linspace(0, 1, layers + 1, dtype=np.float32), jnp.linspace(0.0, 1.0, layers + 1, dtype=jnp.float32)):
        part = cfm_jax.forward(model, x0, z, saveat=SaveAt(ts=ts))
        np.testing.assert_array_equal(part.xs, full.xs)
    off = np.float32(1 / layers) + np.float32(1e-4)
    with pytest.raises(ValueError, match="every depth must be one of the layer boundaries"):
        cfm_jax.forward(model, x0, z, saveat=SaveAt(ts=np.array([off], np.float32)))


def test_saveat_ts_tolerance_follows_the_dtype():
    """Every float32 linspace's depth is on its grid (layer and step grids, up to 2000 points); a depth
    that float32 round-off explains but float64's does not is refused in float64."""
    for count in (*range(1, 60), 100, 333, 1000, 2000):
        for ts in (
            np.linspace(0, 1, count + 1, dtype=np.float32),
            jnp.linspace(0.0, 1.0, count + 1, dtype=jnp.float32),
        ):
            _, index = SaveAt(ts=ts).grid(count, count, True)
            assert index == tuple(range(count + 1))
    near = np.float64(np.float32(1 / 3)) + 3e-8  # 2e-8 past float32's 1/3: ~2 ulps of float32
    assert SaveAt(ts=np.array([near], np.float32)).grid(3, 3, True)[1] == (1,)
    with pytest.raises(ValueError, match="every depth must be one of"):
        SaveAt(ts=(near,)).grid(3, 3, True)


def test_saveat_ts_rounds_to_the_nearest_depth():
    """0.57·100 is 56.99… in floating point: the depth is boundary 57 (not refused, not 56)."""
    model, x0, z = _problem(n=4, layers=100)
    full = cfm_jax.forward(model, x0, z, saveat=SaveAt(layers=True))
    part = cfm_jax.forward(model, x0, z, saveat=SaveAt(ts=(0.29, 0.57, 0.58)))
    assert full.ts is not None and full.xs is not None and part.xs is not None
    at = jnp.array([29, 57, 58])
    np.testing.assert_array_equal(part.xs, full.xs[at])
    np.testing.assert_array_equal(part.ts, full.ts[at])


class _Bar:
    """A progress bar of its own, compared as tqdm's bars are: by an attribute of the other object
    (a comparison with anything else raises)."""

    __hash__ = object.__hash__

    def __init__(self):
        self.position = 0

    def __eq__(self, other):
        return self.position == other.position


def test_a_progress_bar_that_is_not_a_meter_is_named_after_any_earlier_call():
    """A tqdm-like bar as ``progress_meter``, after a call with a diffrax meter compiled the same
    program: named (it used to be equinox's 'metadata fields must be hashable' error, raised while the
    bar was compared with the earlier meter), for every entry point taking forward's options."""
    model, x0, z = _problem()
    mu = cfm_jax.GaussianMeasure(jnp.zeros(3), jnp.eye(3))
    small = cfm_jax.Transformer.init(jax.random.key(0), 3, layers=4, heads=1, qk_scale=0.3, dtype=jnp.float64)
    meter = diffrax.NoProgressMeter()
    tqdm = pytest.importorskip("tqdm")
    entries = {
        "forward": lambda **o: cfm_jax.forward(model, x0, z, **o),
        "forward on a Gaussian": lambda **o: cfm_jax.forward(small, x0, mu, **o),
        "loss_and_grad": lambda **o: cfm_jax.loss_and_grad(model, x0, z, x0, **o),
        "token_adjoint": lambda **o: cfm_jax.token_adjoint(model, x0, z, x0, **o),
        "adjoint_trajectories": lambda **o: cfm_jax.adjoint_trajectories(model, x0, z, x0, **o),
    }
    for name, entry in entries.items():
        entry(progress_meter=meter)
        for bar in (_Bar(), tqdm.tqdm(total=1, disable=True), [1]):
            with pytest.raises(ValueError, match="^`progress_meter` must be a diffrax progress meter") as info:
                entry(progress_meter=bar)
            assert "TqdmProgressMeter()" in str(info.value), name


def test_saveat_fn_saves_its_output_only_and_is_differentiated_through():
    """fn's output at each saved depth, in ys (xs and contexts None); the gradient of a loss on it
    equals the one on the full trajectory (hand adjoint and autodiff)."""
    model, x0, z = _problem()
    full = cfm_jax.forward(model, x0, z, saveat=SaveAt(layers=True))
    sol = cfm_jax.forward(model, x0, z, saveat=SaveAt(layers=True, fn=lambda s, x, c: (s, x, c.points.mean(0))))
    assert sol.xs is None and sol.contexts is None
    assert full.ts is not None and full.xs is not None and full.contexts is not None
    s, x, mean = sol.ys
    np.testing.assert_array_equal(s, full.ts)
    np.testing.assert_array_equal(x, full.xs)
    np.testing.assert_allclose(mean, full.contexts.points.mean(1), rtol=1e-14)
    tokens = SaveAt(layers=True, fn=lambda s, x, c: x)
    for adjoint in (None, diffrax.RecursiveCheckpointAdjoint()):
        g = jax.grad(lambda x: jnp.sum(cfm_jax.forward(model, x, z, saveat=tokens, adjoint=adjoint).ys ** 2))(x0)
        ref = jax.grad(
            lambda x: jnp.sum(jnp.asarray(cfm_jax.forward(model, x, z, saveat=SaveAt(layers=True)).xs) ** 2)
        )(x0)
        np.testing.assert_allclose(g, ref, rtol=1e-12)


def test_saving_the_tokens_path_does_not_store_the_context_trajectory():
    """The compiled program's output and scratch memory: the tokens' path by fn costs the path, not the
    (L + 1, n, d) context trajectory that SaveAt(layers=True) writes out."""
    model, x0, z = _problem(d=4, n=512, layers=8)

    def size(saveat):
        run = jax.jit(lambda m, x, c: cfm_jax.forward(m, x, c, saveat=saveat, throw=False))
        memory = run.lower(model, x0, z).compile().memory_analysis()
        assert memory is not None
        return memory.output_size_in_bytes + memory.temp_size_in_bytes

    context_path = 9 * 512 * 4 * 8  # (L + 1, n, d) float64
    token_path = 9 * 2 * 4 * 8
    none, tokens, both = size(SaveAt()), size(SaveAt(layers=True, fn=lambda s, x, c: x)), size(SaveAt(layers=True))
    assert tokens - none <= 2 * token_path + 1024
    assert both - none >= context_path


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(ts=(0.3,)), "every depth must be one of the layer boundaries l/4"),
        (dict(ts=(0.5, 0.25)), "increasing"),
        (dict(ts=(0.25, 0.25, 0.5)), "no depth repeated"),
        (dict(ts=()), "non-empty"),
        (dict(ts=(1.5,)), r"in \[0, 1\]"),
        (dict(ts="a"), "`ts` must be"),
        (dict(ts=(0.5,), layers=True), "`ts` replaces"),
        (dict(fn=lambda s, x, c: x), "pass the depths too"),
        (dict(fn=3, layers=True), "`fn` must be a function"),
        (dict(layers=True, fn=lambda s, x, c: x, context=False), "`context`=False drops the context"),
        (dict(context="no"), "`context` must be True or False"),
    ],
)
def test_saveat_ts_and_fn_are_checked_naming_them(kwargs, match):
    model, x0, z = _problem()
    with pytest.raises(ValueError, match=match):
        cfm_jax.forward(model, x0, z, saveat=SaveAt(**kwargs))


def test_the_last_step_moves_the_tokens_alone_only_for_the_residual_network_without_the_context(model):
    """``FlowSpec.tokens_last``: ``SaveAt(context=False)`` with explicit Euler on fixed steps, and no
    other option; ``ts`` keeps the choice when it is resolved to the grid."""
    drop = SaveAt(context=False)
    assert _spec(model, saveat=drop).tokens_last and _spec(model, saveat=drop, steps=4).tokens_last
    assert not _spec(model).tokens_last
    assert not _spec(model, saveat=drop, solver=diffrax.Heun()).tokens_last
    adaptive = dict(solver=diffrax.Tsit5(), stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-3))
    assert not _spec(model, saveat=drop, **adaptive).tokens_last
    assert _spec(model, saveat=SaveAt(ts=(0.5, 1.0), context=False)).tokens_last
    assert not _spec(model, saveat=SaveAt(ts=(0.5, 1.0))).tokens_last
