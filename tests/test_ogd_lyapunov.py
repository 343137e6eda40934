"""The finite-time Lyapunov exponent of the OGD map on maps whose Jacobians are known exactly.

* a gradient map g_k(θ) = A_k θ makes step k linear, T_k(θ) = (1 − ηλ)θ − η A_k θ: the result must be
  log σ_max of the explicit product of the matrices (1 − ηλ)I − ηA_k, in order — for a constant
  symmetric A, k log max_i |1 − ηλ − η a_i|, whose exponent is log(1 + ηc) for a curvature −c;
* on the exact Gaussian limit (the library's gradient, functional scaling included) one step equals
  σ_max(I − η L ∇²ℓ) with the Hessian from ``jax.hessian`` of the loss written with ``forward``;
* a mask keeps coordinates fixed, a random subspace gives a lower bound (equal for a full basis).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.flatten_util import ravel_pytree

import cfm_jax
from cfm_jax import ogd

D, LAYERS, B, K = 2, 1, 3, 6


@pytest.fixture(scope="module")
def tiny():
    """A d = 2, L = 1 attention model (12 parameters) and a K-step stream whose x0[k, 0, 0] is s_k."""
    model = cfm_jax.Transformer.init(jax.random.key(0), D, layers=LAYERS, dtype=jnp.float64)
    x0s = jax.random.normal(jax.random.key(1), (K, B, D), jnp.float64)
    stream = cfm_jax.ArrayStream(x0s, jax.random.normal(jax.random.key(2), (K, 5, D)), x0s)
    p = ravel_pytree(eqx.filter(model, eqx.is_inexact_array))[0].size
    return model, stream, p


def _linear_grad(A0, A1):
    """g_k(θ) = (A0 + s_k A1) θ on the raveled parameters, s_k = x0[0, 0] of sample k."""

    def grad_fn(model, x0, context, y):
        flat, unravel = ravel_pytree(eqx.filter(model, eqx.is_inexact_array))
        return jnp.zeros(()), unravel((A0 + x0[0, 0] * A1) @ flat)

    return grad_fn


def _path(model, stream, optimizer, grad_fn, steps=K):
    res = ogd.run_ogd(model, stream, optimizer, steps, grad_fn=grad_fn, functional=False, record_params=True)
    return res.ref_params


def test_constant_symmetric_curvature_gives_its_exponent(tiny):
    """A = Q diag(a) Qᵀ with a_min = −c: log σ_max((I(1 − ηλ) − ηA)^k) = k log max_i |1 − ηλ − η a_i|."""
    model, stream, p = tiny
    q = np.linalg.qr(np.random.default_rng(0).standard_normal((p, p)))[0]
    a = np.linspace(-0.8, 0.5, p)  # the curvature −c = −0.8 is the most expanding direction
    A = jnp.asarray(q @ np.diag(a) @ q.T)
    grad_fn = _linear_grad(A, jnp.zeros_like(A))
    for eta, lam in ((0.1, 0.0), (0.1, 0.3), (0.2, 2.0)):
        opt = ogd.ridge_sgd(eta, lam)
        out = ogd.finite_time_lyapunov(
            model, _path(model, stream, opt, grad_fn), stream, opt, grad_fn=grad_fn, functional=False
        )
        rate = np.log(np.max(np.abs(1 - eta * lam - eta * a)))
        np.testing.assert_allclose(np.asarray(out), rate * np.arange(1, K + 1), rtol=1e-10, atol=1e-12)
    assert np.log(np.max(np.abs(1 - 0.1 * a))) == pytest.approx(np.log(1 + 0.1 * 0.8))


def test_time_varying_non_normal_product_in_order(tiny):
    """Non-symmetric A_k = A0 + s_k A1: every prefix equals the explicit product J_k ⋯ J_0 (not J_0 ⋯ J_k)."""
    model, stream, p = tiny
    rng = np.random.default_rng(1)
    A0, A1 = (jnp.asarray(rng.standard_normal((p, p)) / np.sqrt(p)) for _ in range(2))
    grad_fn = _linear_grad(A0, A1)
    eta, lam = 0.3, 0.5
    opt = ogd.ridge_sgd(eta, lam)
    out = np.asarray(
        ogd.finite_time_lyapunov(
            model, _path(model, stream, opt, grad_fn), stream, opt, grad_fn=grad_fn, functional=False
        )
    )
    P = np.eye(p)
    s = np.asarray(stream.x0s)[:, 0, 0]
    for k in range(K):
        P = ((1 - eta * lam) * np.eye(p) - eta * np.asarray(A0 + s[k] * A1)) @ P
        assert out[k] == pytest.approx(np.log(np.linalg.svd(P, compute_uv=False)[0]), rel=1e-10)
    Q = np.eye(p)  # the reversed product differs for these matrices: the order is tested
    for k in range(K):
        Q = Q @ ((1 - eta * lam) * np.eye(p) - eta * np.asarray(A0 + s[k] * A1))
    assert abs(np.log(np.linalg.svd(Q, compute_uv=False)[0]) - out[-1]) > 1e-3


def test_functional_scaling_multiplies_the_curvature_by_L(tiny):
    model, stream, p = tiny
    A = jnp.asarray(np.diag(np.linspace(-1.0, 1.0, p)))
    grad_fn = _linear_grad(A, jnp.zeros_like(A))
    L2 = cfm_jax.Transformer.init(jax.random.key(3), D, layers=2, dtype=jnp.float64)
    flat2 = ravel_pytree(eqx.filter(L2, eqx.is_inexact_array))[0]
    A2 = jnp.asarray(np.diag(np.linspace(-1.0, 1.0, flat2.size)))
    g2 = _linear_grad(A2, jnp.zeros_like(A2))
    opt = ogd.ridge_sgd(0.1)
    path = ogd.run_ogd(L2, stream, opt, 3, grad_fn=g2, record_params=True).ref_params
    out = ogd.finite_time_lyapunov(L2, path, stream, opt, grad_fn=g2)  # functional: J = I − η·2·A
    np.testing.assert_allclose(np.asarray(out), np.log(1 + 0.1 * 2 * 1.0) * np.arange(1, 4), rtol=1e-10)
    del grad_fn


def test_mask_and_random_subspace(tiny):
    """A mask tracks only its coordinates (the others fixed); a random subspace is a lower bound,
    exact when it spans every masked coordinate."""
    model, stream, p = tiny
    rng = np.random.default_rng(2)
    A = jnp.asarray(rng.standard_normal((p, p)) / np.sqrt(p))
    grad_fn = _linear_grad(A, jnp.zeros_like(A))
    opt = ogd.ridge_sgd(0.2)
    path = _path(model, stream, opt, grad_fn)
    params = eqx.filter(model, eqx.is_inexact_array)
    mask = eqx.tree_at(lambda t: t.K, jax.tree.map(lambda _: True, params), False)
    out = np.asarray(ogd.finite_time_lyapunov(model, path, stream, opt, grad_fn=grad_fn, functional=False, mask=mask))
    keep = np.concatenate([np.full(np.size(a), m) for a, m in zip(jax.tree.leaves(params), jax.tree.leaves(mask))])
    J = (np.eye(p) - 0.2 * np.asarray(A))[np.ix_(keep, keep)]
    expect = [np.log(np.linalg.svd(np.linalg.matrix_power(J, k + 1), compute_uv=False)[0]) for k in range(K)]
    np.testing.assert_allclose(out, expect, rtol=1e-10)
    full = np.asarray(ogd.finite_time_lyapunov(model, path, stream, opt, grad_fn=grad_fn, functional=False))
    few = ogd.finite_time_lyapunov(
        model, path, stream, opt, grad_fn=grad_fn, functional=False, num_directions=2, key=jax.random.key(0)
    )
    span = ogd.finite_time_lyapunov(
        model, path, stream, opt, grad_fn=grad_fn, functional=False, num_directions=p, key=jax.random.key(0)
    )
    assert np.all(np.asarray(few) <= full + 1e-12) and np.asarray(few)[-1] < full[-1] - 1e-3
    np.testing.assert_allclose(np.asarray(span), full, rtol=1e-10)


def test_one_step_of_the_exact_limit_is_the_hessian(tiny):
    """At a point of a Gaussian-context problem, step 0 of ridge OGD (functional gradient of the
    exact infinite-context loss, the library's default gradient) has J = (1 − ηλ)I − η L ∇²ℓ."""
    _, stream, _ = tiny
    model = cfm_jax.Transformer.init(jax.random.key(4), D, layers=2, dtype=jnp.float64)
    mu = cfm_jax.GaussianMeasure(jnp.zeros(D), 0.5 * jnp.eye(D))
    eta, lam = 0.3, 0.2
    opt = ogd.ridge_sgd(eta, lam)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    flat, unravel = ravel_pytree(params)
    sample = stream(0)

    def loss(f):
        x1 = cfm_jax.forward(eqx.combine(unravel(f), static), sample.x0, mu).x1
        return 0.5 * jnp.mean(jnp.sum((x1 - sample.y) ** 2, axis=-1))

    J = (1 - eta * lam) * np.eye(flat.size) - eta * 2 * np.asarray(jax.hessian(loss)(flat))
    path = jax.tree.map(lambda a: a[None], params)  # one step: only θ_0 is used
    out = ogd.finite_time_lyapunov(model, path, stream, opt, population=mu)
    assert float(out[0]) == pytest.approx(np.log(np.linalg.svd(J, compute_uv=False)[0]), rel=1e-9)


def test_runs_under_jit_and_vmap(tiny):
    model, stream, p = tiny
    A = jnp.asarray(np.diag(np.linspace(-1.0, 1.0, p)))

    @jax.jit
    def rates(etas):
        def one(eta):
            opt = optax.sgd(eta)
            return ogd.finite_time_lyapunov(model, _path(model, stream, opt, _linear_grad(A, 0 * A), 2), stream, opt,
                                            grad_fn=_linear_grad(A, 0 * A), functional=False)  # fmt: skip

        return jax.vmap(one)(etas)

    out = np.asarray(rates(jnp.array([0.1, 0.2])))
    np.testing.assert_allclose(out, np.log(1 + np.array([[0.1], [0.2]])) * np.arange(1, 3), rtol=1e-10)


def test_bad_arguments(tiny):
    model, stream, p = tiny
    opt = ogd.ridge_sgd(0.1)
    path = jax.tree.map(lambda a: a[None], eqx.filter(model, eqx.is_inexact_array))
    with pytest.raises(ValueError, match="stateless"):
        ogd.finite_time_lyapunov(model, path, stream, optax.sgd(0.1, momentum=0.9))
    with pytest.raises(ValueError, match="`path`"):
        ogd.finite_time_lyapunov(model, {"a": jnp.zeros(3)}, stream, opt)
    with pytest.raises(ValueError, match="`mask` selects no"):
        ogd.finite_time_lyapunov(model, path, stream, opt, mask=lambda t: jax.tree.map(lambda _: False, t))
    with pytest.raises(ValueError, match="`num_directions`"):
        ogd.finite_time_lyapunov(model, path, stream, opt, num_directions=0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="needs a `key`"):
        ogd.finite_time_lyapunov(model, path, stream, opt, num_directions=2)
    with pytest.raises(ValueError, match="`first_step`"):
        ogd.finite_time_lyapunov(model, path, stream, opt, first_step=-1)
    with pytest.raises(ValueError, match="samples but steps"):
        ogd.finite_time_lyapunov(model, path, stream, opt, first_step=K)
