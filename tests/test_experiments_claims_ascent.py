"""claims.ascent: the projection onto the norm ball, the embedding, and a worst case known in closed form.

The known worst case: with Q = K = 0 (‖Q‖‖K‖ ≤ 0) attention is uniform, and one layer moves the token
by (Σ_h V_h) m_n on the n-point context against (Σ_h V_h)·0 on the infinite one, so √n·dev =
√n ‖(Σ_h V_h) m_n‖. Under ‖[V_1 … V_H]‖ ≤ 1 the largest ‖Σ_h V_h‖ is √H, reached by identical heads
V_h = u u_nᵀ/√H (u_n = m_n/‖m_n‖); under Σ_h ‖V_h‖ ≤ 1 it is 1."""

import numpy as np
import pytest

from cfm_experiments.claims import ascent as A
from cfm_experiments.compiles import recording


def _op(a):
    return np.linalg.norm(np.asarray(a), ord=2, axis=(-2, -1))


def _concat(V):
    L, H, d, _ = V.shape[-4:]
    return _op(np.moveaxis(np.asarray(V), -3, -2).reshape(*V.shape[:-4], L, d, H * d))


def test_projection_lands_in_the_ball_and_keeps_what_is_in_it():
    rng = np.random.default_rng(0)
    theta = {k: 3 * rng.standard_normal((2, 3, 4, 4)) for k in ("Q", "K", "V")}
    ones = (np.ones(4), np.ones(3))
    p = A.project(theta, 2.0, 0.7, False, *ones)
    assert _op(p["Q"]).max() <= np.sqrt(2.0) + 1e-9 and _op(p["K"]).max() <= np.sqrt(2.0) + 1e-9
    np.testing.assert_allclose(_concat(p["V"]), 0.7, rtol=1e-9)
    s = A.project(theta, 2.0, 0.7, True, *ones)
    np.testing.assert_allclose(_op(s["V"]).sum(axis=1), 0.7, rtol=1e-9)
    again = A.project(p, 2.0, 0.7, False, *ones)  # a projection is idempotent
    for k in p:
        np.testing.assert_allclose(again[k], p[k], atol=1e-9)
    small = {k: 0.01 * v for k, v in theta.items()}
    for k, v in A.project(small, 2.0, 0.7, False, *ones).items():
        np.testing.assert_allclose(v, small[k], atol=1e-12)
    masked = A.project(theta, 2.0, 0.7, False, np.array([1.0, 1.0, 0.0, 0.0]), np.array([1.0, 0.0, 0.0]))
    assert np.all(np.asarray(masked["V"])[:, 1:] == 0) and np.all(np.asarray(masked["Q"])[..., 2:, :] == 0)


def test_embedding_leaves_the_objective_unchanged():
    rng = np.random.default_rng(1)
    d, H, L = 2, 2, 2
    cov = A.law_cov(d, False)
    theta = A.random_params(rng, d, H, L, 1.5, 1.0, False)
    z = A.contexts(rng, 3, 8, cov)
    small = A.objective(theta, A.token(d), z, cov)
    prob = A.Problem(d, H, 5, 4, cov)
    big = A.objective(prob.theta(theta), prob.x0, prob.points(z), prob.cov)
    np.testing.assert_allclose(float(big), float(small), rtol=1e-10)


@pytest.mark.parametrize("v_sum", [False, True])
def test_the_ascent_finds_the_known_worst_case_and_never_exceeds_it(v_sum):
    """From random heads (and the structured starts) the ascent reaches the closed-form supremum
    √n·√H‖m_n‖ (or √n‖m_n‖ under Σ_h‖V_h‖ ≤ 1) and never exceeds it; its iterates stay in the ball;
    identical heads attain the supremum, random heads do not."""
    rng = np.random.default_rng(2)
    d, H, L, n = 2, 3, 1, 8
    cov = A.law_cov(d, False)
    z = A.contexts(rng, 1, n, cov)
    m = z[0].mean(axis=0)
    sup = np.sqrt(n) * np.linalg.norm(m) * (1.0 if v_sum else np.sqrt(H))
    prob = A.Problem(d, H, d, H, cov)
    theta0 = A.starts(rng, d, H, L, 3, v_sum)
    theta, best, history = A.ascend(theta0, prob.x0, z, prob.cov, 0.0, 1.0, v_sum, 0.05, *prob.masks, steps=150)
    best = np.asarray(best)
    assert best.max() <= sup * (1 + 1e-6), (best, sup)
    assert best[2:].max() >= 0.99 * sup, (best, sup)  # the random starts alone find it
    V = np.asarray(theta["V"])
    if v_sum:
        assert _op(V).sum(axis=2).max() <= 1 + 1e-6
    else:
        assert _concat(V).max() <= 1 + 1e-6
    u = m / np.linalg.norm(m)
    ident = {k: np.zeros((L, H, d, d)) for k in ("Q", "K")}
    ident["V"] = np.broadcast_to(np.outer(u, u) / (H if v_sum else np.sqrt(H)), (L, H, d, d))
    np.testing.assert_allclose(float(A.objective(ident, prob.x0, z, prob.cov)), sup, rtol=1e-9)
    assert np.asarray(history)[2:, 0].max() < 0.99 * sup  # random heads start below it


def test_one_program_serves_every_problem_of_a_sweep():
    """Problems of dimension 1, 2 and 3 embedded in D = 3 run through one ascent program."""
    rng = np.random.default_rng(3)
    out = []
    with recording() as stats:
        for d in (3, 2, 1):
            prob = A.Problem(d, 1, 3, 1, A.law_cov(d, True))
            theta0 = prob.theta(A.starts(rng, d, 1, 1, 1, False))
            z = prob.points(A.contexts(rng, 2, 4, prob.cov[:d, :d]))
            out.append(A.ascend(theta0, prob.x0, z, prob.cov, 1.0, 1.0, False, 0.05, *prob.masks, steps=3))
            if d == 3:
                first = stats.programs + stats.cache_loads
    assert stats.programs + stats.cache_loads == first, stats.names
    assert np.all(np.asarray(out[-1][0]["Q"])[..., 1:, :] == 0)  # d = 1 stays in its block
