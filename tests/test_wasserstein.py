"""W1: Sinkhorn (debiased, p = 1 cost) vs the exact LP, exact 1-D formula vs LP, metric axioms.

One jitted Sinkhorn (ε passed as an array) and shared shapes keep compilation to a minimum.
"""

from typing import Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import EmpiricalMeasure, wasserstein1
from cfm_jax._wasserstein import W1Method, cost_scale, sorted_w1

N, D = 32, 2


@jax.jit
def _sinkhorn(mu, nu, eps):
    return wasserstein1(mu, nu, method="sinkhorn", epsilon=eps, max_iterations=20000, threshold=1e-5)


def _eps(mu, nu, rel):
    return rel * cost_scale(mu.points, mu.weights, nu.points, nu.weights)


def _cloud(seed, n=N, d=D, shift=0.0, weighted=True):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) + shift
    w = rng.uniform(0.5, 1.5, size=n) if weighted else np.ones(n)
    return EmpiricalMeasure(jnp.asarray(x), jnp.asarray(w / w.sum()))


@pytest.mark.parametrize("shift", [0.0, 0.8])
def test_sinkhorn_matches_exact_lp(shift):
    """Debiased Sinkhorn at ε = 1 % of the cost scale is within 3 % of the exact LP, and below it."""
    mu, nu = _cloud(0), _cloud(1, shift=shift)
    exact = wasserstein1(mu, nu, method="exact")
    approx = float(_sinkhorn(mu, nu, _eps(mu, nu, 0.01)))
    assert abs(approx - exact) <= 0.03 * exact
    assert approx <= exact * (1 + 1e-3)  # entropic blurring shortens moves: one-sided bias


def test_entropic_bias_shrinks_with_epsilon():
    mu, nu = _cloud(2), _cloud(3, shift=0.3)
    exact = wasserstein1(mu, nu, method="exact")
    errs = [abs(float(_sinkhorn(mu, nu, _eps(mu, nu, r))) - exact) for r in (0.1, 0.03, 0.01)]
    assert errs[0] > errs[1] > errs[2]
    assert errs[0] > 0.15 * exact  # the bias is real at large ε (documented ~30 %)
    assert errs[2] <= 2.0 * float(_eps(mu, nu, 0.01))  # bias ≈ O(ε) (documented: −(0.2…1.3)·ε)


def test_exact_lp_matches_assignment():
    """The LP path (weights given) agrees with the assignment path (uniform, equal sizes)."""
    mu, nu = _cloud(4, 12, 3, weighted=False), _cloud(5, 12, 3, 0.5, weighted=False)
    a = wasserstein1(mu, nu, method="exact")
    w2 = mu.weights.at[0].add(1e-9).at[1].add(-1e-9)  # not exactly uniform -> LP branch
    b = wasserstein1(EmpiricalMeasure(mu.points, w2), nu, method="exact")
    assert abs(a - b) < 1e-6


def test_sorted_1d_matches_lp():
    mu, nu = _cloud(6, 25, 1), _cloud(7, 17, 1, 0.4)
    exact = wasserstein1(mu, nu, method="exact")
    assert abs(float(wasserstein1(mu, nu, method="sorted")) - exact) < 1e-9
    assert abs(float(wasserstein1(mu, nu)) - exact) < 1e-9  # auto -> sorted in d = 1


def test_sorted_is_jittable_and_translation_exact():
    mu = _cloud(8, 20, 1)
    shifted = EmpiricalMeasure(mu.points + 0.37, mu.weights)
    f = jax.jit(lambda a, b: wasserstein1(a, b, method="sorted"))
    assert abs(float(f(mu, shifted)) - 0.37) < 1e-12  # W1 of a translation is its length


def test_metric_axioms_exact_and_sinkhorn():
    m = [_cloud(10 + i, shift=0.5 * i) for i in range(3)]
    for w in (
        lambda a, b: wasserstein1(a, b, method="exact"),
        lambda a, b: float(_sinkhorn(a, b, jnp.asarray(0.02))),
    ):
        assert w(m[0], m[0]) < 1e-6
        assert abs(w(m[0], m[1]) - w(m[1], m[0])) < 1e-3 * w(m[0], m[1])
        assert w(m[0], m[2]) <= w(m[0], m[1]) + w(m[1], m[2]) + 1e-3


def test_sinkhorn_batch_size_matches_dense():
    """The memory-bounded path (cost recomputed in row blocks) gives the same value."""
    mu, nu = _cloud(20), _cloud(21, shift=0.5)
    kw: dict[str, Any] = dict(relative_epsilon=0.05)
    full = float(wasserstein1(mu, nu, **kw))
    assert abs(float(wasserstein1(mu, nu, batch_size=8, **kw)) - full) < 1e-6


def test_ott_shim_is_narrow_and_version_guarded(monkeypatch):
    """The ott-jax compatibility shim touches ott.utils only, only on ott-jax 0.6; every JAX the
    bounds admit lacks the function it adds (the reason for the shim)."""
    import importlib.metadata

    from jax.interpreters import batching
    from ott import utils as ott_utils

    utils = cast(Any, ott_utils)  # its `batching` is JAX's module, re-imported but not exported
    from cfm_jax import _wasserstein as wasserstein

    assert "is_vmappable" not in vars(batching)
    names = set(vars(batching))
    monkeypatch.setattr(utils, "batching", batching)  # as ott imported it; restored after the test
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.7.0")
    wasserstein._ott_batching_shim()
    assert utils.batching is batching  # another ott-jax: left alone
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.6.0")
    wasserstein._ott_batching_shim()
    assert set(vars(batching)) == names  # JAX's module is never modified
    assert utils.batching is not batching
    assert utils.batching.is_vmappable(jnp.ones(3)) is False
    assert utils.batching.broadcast is batching.broadcast  # the rest is JAX's
    view = utils.batching
    wasserstein._ott_batching_shim()  # idempotent
    assert utils.batching is view


def test_bad_input():
    mu2, mu3 = _cloud(0, 5, 2), _cloud(1, 5, 3)
    with pytest.raises(ValueError, match="same dimension"):
        wasserstein1(mu2, mu3)
    with pytest.raises(ValueError, match="method"):
        wasserstein1(mu2, mu2, method="emd")  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="d = 1"):
        wasserstein1(mu2, mu2, method="sorted")
    for name in ("relative_epsilon", "epsilon"):  # a value: the same error eagerly and under jit
        for bad in (0.0, -1.0, float("nan")):
            eps: dict[str, Any] = {name: bad}
            with pytest.raises(eqx.EquinoxRuntimeError, match=f"`{name}` must be finite and > 0"):
                wasserstein1(mu2, mu2, **eps)
            with pytest.raises(eqx.EquinoxRuntimeError, match=f"`{name}` must be finite and > 0"):
                eqx.filter_jit(lambda e, name=name: wasserstein1(mu2, mu2, **{name: e}))(jnp.asarray(bad))
            with pytest.raises(eqx.EquinoxRuntimeError, match=f"`{name}` must be finite and > 0"):
                jax.jit(lambda x, eps=eps: wasserstein1(x, mu2, **eps))(mu2.points)
    with pytest.raises(ValueError, match="mu"):
        wasserstein1(np.zeros((3,)), mu2)
    with pytest.raises(ValueError, match="traced"):
        jax.jit(lambda a: wasserstein1(a, mu2, method="exact"))(mu2)


def test_zero_weight_atoms_change_nothing():
    """Padding a measure with weight-0 atoms (how the chaos sweep compiles once for every n) leaves
    W1 unchanged: exactly for the sorted formula up to round-off, to solver tolerance for Sinkhorn."""
    mu, nu = _cloud(30, 12, 1), _cloud(31, 20, 1, 0.3)
    padded = mu.pad_to(20)
    assert (
        abs(
            float(sorted_w1(padded.points, padded.weights, nu.points, nu.weights))
            - float(wasserstein1(mu, nu, method="sorted"))
        )
        < 1e-12
    )
    mu2, nu2 = _cloud(32), _cloud(33, shift=0.5)
    eps = _eps(mu2, nu2, 0.02)
    full = float(_sinkhorn(mu2, nu2, eps))
    pad = float(_sinkhorn(mu2.pad_to(N + 8), nu2.pad_to(N + 8), eps))
    assert abs(pad - full) < 1e-6 * max(full, 1.0)


@pytest.mark.parametrize("rel", [0.01, 0.1])
def test_sinkhorn_divergence_of_a_measure_with_itself(rel):
    """S_ε(μ, μ) = 0: exactly for the same arrays, and to the solver's tolerance for the same measure
    with its atoms permuted, while the entropic self-cost OT_ε(μ, μ) it debiases is far from 0 (so
    dropping the debiasing terms would be caught by orders of magnitude)."""
    from cfm_jax._wasserstein import self_transport_cost

    mu = _cloud(30)
    perm = np.random.default_rng(0).permutation(N)
    same = EmpiricalMeasure(mu.points[perm], mu.weights[perm])
    eps = _eps(mu, mu, rel)
    scale = float(cost_scale(mu.points, mu.weights, mu.points, mu.weights))
    self_cost = float(self_transport_cost(mu.points, mu.weights, eps, max_iterations=20000, threshold=1e-5))
    assert self_cost > 1e-2 * scale
    assert float(_sinkhorn(mu, mu, eps)) <= 1e-12 * scale
    assert float(_sinkhorn(mu, same, eps)) <= 1e-4 * scale
    shifted = EmpiricalMeasure(mu.points + 0.3, mu.weights)
    assert float(_sinkhorn(mu, shifted, eps)) > 1e2 * float(_sinkhorn(mu, same, eps))


def test_sinkhorn_stopping_rule_is_checked():
    mu, nu = _cloud(40), _cloud(41, shift=0.5)
    for kw, name in (
        ({"max_iterations": 0}, "max_iterations"),
        ({"max_iterations": 2.5}, "max_iterations"),
        ({"threshold": 0.0}, "threshold"),
        ({"threshold": -1.0}, "threshold"),
        ({"threshold": float("nan")}, "threshold"),
    ):
        with pytest.raises(ValueError, match=f"`{name}`"):
            wasserstein1(mu, nu, method="sinkhorn", **kw)  # pyright: ignore[reportArgumentType]  # bad on purpose
    assert float(wasserstein1(mu, nu, method="sinkhorn", max_iterations=1, threshold=1e-12)) >= 0


def test_values_are_checked_under_jit():
    """Non-finite points or weights of either measure and a bad ε are refused by name under jax.jit
    too (the checks used to run only on concrete values: a NaN point gave a silent NaN distance)."""
    import equinox as eqx

    mu, nu = _cloud(50, 8, 1), _cloud(51, 8, 1, 0.3)
    # under a plain jax.jit the message arrives wrapped in JAX's runtime error (a ValueError when the
    # check sits inside a nested compiled function)
    errors = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError, ValueError)
    methods: tuple[W1Method, ...] = ("sorted", "sinkhorn")
    for method in methods:

        @jax.jit
        def f(x, a, y, b, eps, method: W1Method = method):
            return wasserstein1(
                EmpiricalMeasure.unchecked(x, a), EmpiricalMeasure.unchecked(y, b), method=method, epsilon=eps
            )

        args = (mu.points, mu.weights, nu.points, nu.weights, jnp.asarray(0.05))
        assert np.isfinite(float(f(*args)))
        for i, value, match in (
            (0, mu.points.at[2, 0].set(jnp.nan), "`mu` points contain non-finite"),
            (3, nu.weights.at[1].set(-0.5), "`nu` weights must be non-negative"),
            (1, mu.weights * 2, "`mu` weights must sum to 1"),
        ):
            with pytest.raises(errors, match=match):
                jax.block_until_ready(f(*args[:i], value, *args[i + 1 :]))
        if method == "sinkhorn":
            for eps in (0.0, -1.0, float("nan")):
                with pytest.raises(errors, match="`epsilon` must be finite and > 0"):
                    jax.block_until_ready(f(*args[:4], jnp.asarray(eps)))
    rel = jax.jit(lambda r: wasserstein1(mu, nu, method="sinkhorn", relative_epsilon=r))
    with pytest.raises(errors, match="`relative_epsilon` must be finite and > 0"):
        jax.block_until_ready(rel(jnp.asarray(-0.01)))


def test_exact_with_one_uniform_and_one_weighted_cloud_of_equal_size():
    """The assignment shortcut applies only when both clouds are uniform: a weighted cloud against a
    uniform one of the same size goes through the LP, checked against the exact 1-D formula (either
    order)."""
    mu, nu = _cloud(60, 12, 1), _cloud(61, 12, 1, 0.4, weighted=False)
    for a, b in ((mu, nu), (nu, mu)):
        assert abs(wasserstein1(a, b, method="exact") - float(wasserstein1(a, b, method="sorted"))) < 1e-9


def test_a_sweeps_compiled_program_keeps_the_checks_as_data():
    """A sweep's own measures inside ``cfm_jax.compiled``: the checks are data (no host callback, so
    the persistent cache can store the program; a plain ``jax.jit`` holds callbacks), the value is
    the plain one, and a NaN still raises naming ``mu``; there is no switch to leave them out."""
    mu, nu = _cloud(50, 8, 1), _cloud(51, 8, 1, 0.3)

    def sweep(x):
        return wasserstein1(EmpiricalMeasure.unchecked(x, mu.weights), nu)

    f = cfm_jax.compiled(sweep)
    assert "callback" not in f.lower(mu.points).as_text()  # pyright: ignore[reportFunctionMemberAccess]
    assert "callback" in jax.jit(sweep).lower(mu.points).as_text()
    assert float(f(mu.points)) == pytest.approx(float(wasserstein1(mu, nu)), rel=1e-12)
    with pytest.raises(eqx.EquinoxRuntimeError, match="`mu`"):
        f(mu.points.at[0, 0].set(jnp.nan))
    with pytest.raises(TypeError, match="throw"):
        wasserstein1(mu, nu, throw=False)  # pyright: ignore[reportCallIssue]
