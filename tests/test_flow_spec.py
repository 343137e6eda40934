"""The options and the result of a solve: the one fixed-step / exact-Euler decision, option checks,
FlowSolution's names (and the deprecated ones)."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax._flow import FlowSpec, SaveAt, fixed_controller, flow_spec


@pytest.fixture(scope="module")
def model():
    return cfm_jax.Transformer.init(jax.random.key(0), 2, heads=1, layers=2)


def _spec(model, **options):
    defaults = dict(
        solver=None,
        steps=None,
        stepsize_controller=None,
        saveat=SaveAt(),
        max_steps=4096,
        progress_meter=diffrax.NoProgressMeter(),
    )
    return flow_spec(model, **{**defaults, **options})


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
