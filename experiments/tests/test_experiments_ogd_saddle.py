"""The curvature part's task: the saddle is stationary for the exact limit only, λ = 0 grows like
(1 + ηc)^k with c from the Hessian (the finite-time Lyapunov exponent and the deviation), the map
contracts above the threshold, and the bound's own trajectory is the step bound's recursion."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import cfm_jax
from cfm_experiments.ogd import curvature as cv, saddle as sd, statistics as V
from cfm_experiments.protocol import resolve

TINY = dict(curvature_ns=[64], curvature_ratios=[0.0, 4.0], curvature_steps=100, curvature_seeds=2, curvature_eta=0.5)
ETA = 0.5


@pytest.fixture(scope="module")
def tiny():
    """The part's rows at λ = 0 and λ = 4·λ_c on the tiny scan, with their configurations."""
    settings = resolve((cv.PART,), quick=True, **TINY)
    first = [c for c in cv.PART.configs(settings) if c["seed"] == settings.seed]  # the first of the part's draws
    configs = [{"part": "curvature", **c} for c in first]
    return [{"config": c, **cv.PART.run(c)} for c in configs]


def _saddle_curvature(config, seed, both=False):
    """c = −(smallest eigenvalue) of the mean Hessian over the run's samples of the exact-limit loss
    in (V, Q) at the student's start (L = 1: the functional Hessian is the plain one); with ``both``
    also its largest eigenvalue."""
    task = sd.task_of(config)
    base = jax.random.fold_in(jax.random.key(config["seed"]), 1_000_003)
    student, stream = task.problem(base, seed)
    flat, unravel = ravel_pytree((student.V, student.Q))

    def loss(f, k):
        V, Q = unravel(f)
        s = stream(k)
        x1 = cfm_jax.forward(eqx.tree_at(lambda t: (t.V, t.Q), student, (V, Q)), s.x0, task.mu).x1
        return 0.5 * jnp.mean(jnp.sum((x1 - s.y) ** 2, axis=-1))

    H = np.asarray(jax.vmap(jax.hessian(loss), (None, 0))(flat, jnp.arange(config["steps"]))).mean(0)
    eig = np.linalg.eigvalsh((H + H.T) / 2)
    return (-eig[0], eig[-1]) if both else -eig[0]


def test_the_saddle_is_stationary_for_the_exact_limit_and_not_for_n_points():
    """At V = Q = 0 the exact-limit gradient vanishes for every sample (the population mean is 0, so
    the value map sees nothing); n points have a mean z̄_n ≠ 0 that pushes V off it. K gets none."""
    settings = resolve((cv.PART,), quick=True, **TINY)
    config = cv.PART.configs(settings)[0]
    task = sd.SaddleTask(
        **{
            **{
                k: getattr(sd.task_of(config), k)
                for k in ("dim", "layers", "batch", "ns", "eta", "steps", "seeds", "mu")
            },
            "offset": 0.0,
        }
    )
    student, stream = task.problem(jax.random.key(0), 0)
    s = stream(3)
    _, exact = sd.fixed_key_grad(student, s.x0, task.mu, s.y)
    _, sampled = sd.fixed_key_grad(student, s.x0, cfm_jax.EmpiricalMeasure(s.context[:64]), s.y)
    assert float(jnp.abs(exact.V).max()) < 1e-12 and float(jnp.abs(exact.Q).max()) < 1e-12
    assert float(jnp.abs(sampled.V).max()) > 1e-4
    assert float(jnp.abs(sampled.K).max()) == 0.0 and float(jnp.abs(exact.K).max()) == 0.0


@pytest.mark.slow  # the curvature part's runs at two ridges
def test_growth_at_lambda_zero_is_one_plus_eta_c_per_step(tiny):
    """λ = 0: the finite-time Lyapunov exponent and the deviation's growth rate over the second half
    are log(1 + ηc), c the saddle's negative curvature from jax.hessian; the pilot's C is of that size."""
    zero = tiny[0]
    assert zero["config"]["ratio"] == 0
    K = zero["config"]["steps"]
    dev = np.asarray(zero["deviations"])[:, :, 0]
    ftle = np.asarray(zero["log_growth"])
    for s in range(2):
        c, top = _saddle_curvature(zero["config"], s, both=True)
        assert top == pytest.approx(c, rel=1e-3)  # V–Q coupling only: the spectrum is ±, ‖∇²ℓ‖ = c
        expect = np.log1p(ETA * c)
        ftle_rate = np.polyfit(np.arange(K // 2, K), ftle[s, K // 2 :], 1)[0]
        dev_rate = V.exponential_rates(dev[s : s + 1], K // 2, [K])[0]
        assert ftle_rate == pytest.approx(expect, rel=0.15), (s, c)
        assert 0.5 * expect < dev_rate < 1.5 * expect, (s, c, dev_rate)
        # the pilot's C measures that curvature from the path (a lower estimate after only 80 steps,
        # before θ̂ has turned to the unstable direction)
        assert 0.3 * c < zero["C_pilot"][s] < 2.5 * c


@pytest.mark.slow  # the module's curvature runs above the threshold
def test_above_the_threshold_the_map_contracts_and_the_deviation_is_bounded(tiny):
    """λ = 4·λ_c: log σ_max of the OGD map grows like log(1 + η(c − λ)) < 0, the deviation does not grow."""
    zero, above = tiny
    K = above["config"]["steps"]
    lam = np.asarray(above["lam"])
    np.testing.assert_allclose(lam, np.minimum(4 * 2 * np.asarray(zero["region_C"]), 0.9 / ETA), rtol=1e-6)
    assert (lam < 0.9 / ETA).all()  # not capped: λ is 4·λ_c
    for s in range(2):
        c = _saddle_curvature(above["config"], s)
        expect = np.log1p(ETA * (c - lam[s]))
        rate = np.polyfit(np.arange(K // 2, K), np.asarray(above["log_growth"])[s, K // 2 :], 1)[0]
        assert expect < 0 and rate == pytest.approx(expect, rel=0.1)
    assert (cv.late_growth(np.asarray(above["deviations"])[:, :, 0]) < 2).all()


@pytest.mark.parametrize("C,lam", [(0.5, 0.1), (0.3, 0.3), (0.2, 1.0)])
def test_bound_trajectory_is_the_step_bound_recursion(C, lam):
    """B_{k+1} = (1 + η(C − λ))B_k + ηδ from B_0 = 0, for growth, the λ = C limit and contraction."""
    K, eta, delta = 50, 0.2, np.array([[0.3, 0.1]])
    out = sd.bound_trajectory(K, eta, [C], [lam], delta)[0]
    B, expect = np.zeros(2), []
    for _ in range(K):
        B = (1 + eta * (C - lam)) * B + eta * delta[0]
        expect.append(B)
    np.testing.assert_allclose(out, np.asarray(expect), rtol=1e-10)
