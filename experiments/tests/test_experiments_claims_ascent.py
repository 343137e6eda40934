"""claims.ascent: the projections onto the norm ball and the law set, the embedding, the ascent
against worst cases known in closed form or by a dense grid of the same objective, and the loop that
runs it to convergence.

Closed form (θ only): with Q = K = 0 (‖Q‖‖K‖ ≤ 0) attention is uniform, and one layer moves the
token by (Σ_h V_h) m_n on the n-point context against (Σ_h V_h)·0 on the infinite one, so √n·dev =
√n ‖(Σ_h V_h) m_n‖. Under ‖[V_1 … V_H]‖ ≤ 1 the largest ‖Σ_h V_h‖ is √H, reached by identical heads
V_h = u u_nᵀ/√H (u_n = m_n/‖m_n‖); under Σ_h ‖V_h‖ ≤ 1 it is 1.

Grid (θ and law): in d = 1 with one layer and x0 = 1, a law N(m, σ²) gives points z_i = m + σε_i,
softmax weights ∝ e^{aσε_i} (a = QK) and the limit's tilted mean m + aσ², so √n·dev =
√n |V| σ mean_m |w̄_{aσ}(ε_m) − aσ| with w̄_t(ε) = Σ_i e^{tε_i}ε_i / Σ_i e^{tε_i}: m cancels, and with
h(t) = √n mean_m |w̄_t(ε_m) − t|, J = |V| σ h(aσ) ≤ max_{|t| ≤ b} h(t) (|V| ≤ 1, σ ≤ 1, |aσ| ≤ b).
The bound is reached at |V| = 1, m = 0, σ = 1 (the whole budget, E z² = 1, as variance) and the
best a ∈ [−b, b]: a one-parameter family whose maximum a dense grid of the objective finds.
"""

import jax
import numpy as np
import pytest

from cfm_experiments.claims import ascent as A, starts as S
from cfm_jax import CompileRecorder


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


@pytest.mark.parametrize("shape", [(3, 4, 4), (3, 2, 6), (3, 5, 2)])
def test_the_clip_is_the_svds_clip(shape):
    """The singular values clipped through the Gram matrix's eigendecomposition (square, wide and tall
    matrices, some already inside the ball, one of rank one) equal NumPy's SVD with its singular
    values clipped."""
    rng = np.random.default_rng(6)
    a = rng.standard_normal(shape) * np.array([3.0, 0.2, 1.0])[:, None, None]
    a[2] = np.outer(rng.standard_normal(shape[1]), rng.standard_normal(shape[2]))
    u, sv, vt = np.linalg.svd(a, full_matrices=False)
    expected = np.einsum("...ij,...j,...jk->...ik", u, np.minimum(sv, 1.5), vt)
    np.testing.assert_allclose(A._clip(a, 1.5), expected, atol=1e-12)
    np.testing.assert_allclose(A._clip(a, 0.0), 0.0, atol=1e-12)


def _second_moment(law, energy, mask):
    d = int(mask.sum())
    cov = np.asarray(A.covariance(law, energy, mask))[:d, :d]
    m = np.asarray(law["m"])[:d]
    return cov + np.outer(m, m)


@pytest.mark.parametrize("energy", [1.0, 3.0])
def test_law_projection_lands_in_the_law_set(energy):
    """E‖z‖² = tr S ≤ B and S ≼ I (the direction bound binds at B = 3 > 1, only the energy at B = 1);
    zero beyond d; idempotent; a law inside the set is kept."""
    rng = np.random.default_rng(1)
    mask = np.array([1.0, 1.0, 1.0, 0.0])
    law = {"m": 2 * rng.standard_normal(4), "F": 2 * rng.standard_normal((4, 4))}
    p = A.project_law(law, energy, mask)
    S = _second_moment(p, energy, mask)
    assert np.trace(S) <= energy * (1 + 1e-9) and np.linalg.eigvalsh(S).max() <= 1 + 1e-9
    np.testing.assert_allclose(np.trace(S), energy if energy == 1.0 else np.trace(S), rtol=1e-9)
    assert np.all(np.asarray(p["m"])[3:] == 0) and np.all(np.asarray(p["F"])[3:] == 0)
    assert np.all(np.asarray(p["F"])[:, 3:] == 0)
    again = A.project_law(p, energy, mask)
    for k in p:
        np.testing.assert_allclose(again[k], p[k], atol=1e-9)
    inside = {k: 0.05 * v * mask for k, v in law.items()}
    for k, v in A.project_law(inside, energy, mask).items():
        np.testing.assert_allclose(v, inside[k] * (mask[:, None] if k == "F" else 1), atol=1e-12)


def test_embedding_leaves_the_objective_unchanged():
    rng = np.random.default_rng(1)
    d, H, L, energy = 2, 2, 2, 2.0
    theta = S.random_params(rng, d, H, L, 1.5, 1.0, False)
    law = {"m": np.array([0.3, -0.2]), "F": np.array([[0.6, 0.0], [0.4, 0.5]])}
    eps = A.normals(rng, 3, 8, d)
    small = A.objective(theta, law, A.token(d), eps, energy, np.ones(d))
    prob = A.Problem(d, H, 5, 4, energy)
    big = A.objective(prob.theta(theta), prob.law(law), prob.x0, prob.points(eps), energy, prob.mask_d)
    np.testing.assert_allclose(float(big), float(small), rtol=1e-10)


@pytest.mark.parametrize("v_sum", [False, True])
def test_the_ascent_finds_the_known_worst_case_and_never_exceeds_it(v_sum):
    """θ only (the law fixed): from random heads (and the structured starts) the ascent reaches the
    closed-form supremum √n·√H‖m_n‖ (or √n‖m_n‖ under Σ_h‖V_h‖ ≤ 1) and never exceeds it; its
    iterates stay in the ball; identical heads attain the supremum, random heads do not."""
    rng = np.random.default_rng(2)
    d, H, L, n = 2, 3, 1, 8
    prob = A.Problem(d, H, d, H, 1.0)
    pairs = [(p, "isotropic") for p in S.CONSTRUCTIONS]  # one law (in d = 2 every start law is isotropic)
    theta0, law0, _ = S.starts(rng, d, H, L, 1.0, pairs, 3, v_sum)
    eps = A.normals(rng, 1, n, d)
    law = {k: a[0] for k, a in law0.items()}
    m = np.asarray(A.contexts_of(law, eps, 1.0, prob.mask_d))[0].mean(axis=0)
    sup = np.sqrt(n) * np.linalg.norm(m) * (1.0 if v_sum else np.sqrt(H))
    theta, _, best, history = A.ascend(
        theta0, law0, prob.x0, eps, 1.0, 0.0, 1.0, v_sum, 0.3, *prob.masks, learn_law=False, steps=150
    )
    best = np.asarray(best)
    assert best.max() <= sup * (1 + 1e-6), (best, sup)
    assert best[len(S.CONSTRUCTIONS) :].max() >= 0.99 * sup, (best, sup)  # the random starts alone find it
    V = np.asarray(theta["V"])
    if v_sum:
        assert _op(V).sum(axis=2).max() <= 1 + 1e-6
    else:
        assert _concat(V).max() <= 1 + 1e-6
    u = m / np.linalg.norm(m)
    ident = {k: np.zeros((L, H, d, d)) for k in ("Q", "K")}
    ident["V"] = np.broadcast_to(np.outer(u, u) / (H if v_sum else np.sqrt(H)), (L, H, d, d))
    np.testing.assert_allclose(float(A.objective(ident, law, prob.x0, eps, 1.0, prob.mask_d)), sup, rtol=1e-9)
    assert np.asarray(history)[len(S.CONSTRUCTIONS) :, 0].max() < 0.99 * sup  # random heads start below it


def test_the_joint_ascent_reaches_the_maximum_of_a_dense_grid():
    """θ and the law together (module docstring's one-parameter family): from starts far from it
    (small weights, a mean, a small variance) the ascent reaches the grid's maximum of the same
    objective over a ∈ [−b, b] to 10⁻³ and never exceeds it (the projections hold)."""
    b, n, M = 2.0, 8, 4
    rng = np.random.default_rng(5)
    eps = A.normals(rng, M, n, 1)
    mask = np.ones(1)
    x0 = A.token(1)
    top = {"m": np.zeros(1), "F": np.full((1, 1), np.sqrt(1 - A.JITTER))}  # σ² = 1: the whole budget

    def at(a):
        one = lambda v: np.reshape(v, (1, 1, 1, 1))  # noqa: E731
        theta = {"Q": one(np.sqrt(b)), "K": one(a / np.sqrt(b)), "V": one(1.0)}
        return A.objective(theta, top, x0, eps, 1.0, mask)

    grid = np.linspace(-b, b, 4001)
    values = np.asarray(jax.jit(jax.vmap(at))(grid))
    peak = values.max()
    assert values[-1] == peak and peak > 1.2 * values[0]  # the sign of a matters: +b, not −b
    starts = [(0.3, 0.2, 0.5), (0.3, -0.2, 0.5), (-0.5, 0.1, -0.3), (0.1, 0.4, 0.2)]
    theta0 = {k: np.array([np.full((1, 1, 1, 1), s[i]) for s in starts]) for i, k in enumerate("QKV")}
    law0 = {"m": np.full((4, 1), 0.6), "F": np.full((4, 1, 1), 0.3)}
    theta, law, best, _ = A.ascend(
        theta0, law0, x0, eps, 1.0, b, 1.0, False, 0.3, mask, np.ones(1), learn_law=True, steps=120
    )
    best = np.asarray(best)
    assert best.max() >= (1 - 1e-3) * peak, (best, peak)
    assert best.max() <= peak * (1 + 1e-9), (best, peak)
    i = int(np.argmax(best))
    a = float(np.asarray(theta["Q"])[i].item() * np.asarray(theta["K"])[i].item())
    np.testing.assert_allclose(a, b, rtol=1e-2)
    np.testing.assert_allclose(np.trace(_second_moment({k: v[i] for k, v in law.items()}, 1.0, mask)), 1.0, rtol=1e-2)


def test_one_program_serves_every_problem_of_a_sweep():
    """Problems of dimension 1, 2 and 3 embedded in D = 3, at energies 1 and d, run through one
    ascent program."""
    rng = np.random.default_rng(3)
    out = []
    with CompileRecorder() as stats:
        for d in (3, 2, 1):
            for energy in (1.0, float(d)):
                prob = A.Problem(d, 1, 3, 1, energy)
                theta0, law0, _ = S.starts(rng, d, 1, 1, energy, S.STRUCTURED[:2], 1, False)
                eps = prob.points(A.normals(rng, 2, 4, d))
                out.append(
                    A.ascend(
                        prob.theta(theta0), prob.law(law0), prob.x0, eps, energy, 1.0, 1.0, False, 0.3,
                        *prob.masks, learn_law=True, steps=3,
                    )
                )  # fmt: skip
                if d == 3 and energy == 1.0:
                    first = stats.compiled + stats.cache_loads
    assert stats.compiled + stats.cache_loads == first, stats.compiled_names
    assert np.all(np.asarray(out[-1][0]["Q"])[..., 1:, :] == 0)  # d = 1 stays in its block
    assert np.all(np.asarray(out[-1][1]["F"])[..., 1:, :] == 0) and np.all(np.asarray(out[-1][1]["m"])[..., 1:] == 0)


def test_converge_stops_on_its_criterion_or_at_its_cap():
    """A start whose gains halve each stretch stops once the gain falls below the tolerance; gains
    that never fall below it run to the cap and report no convergence."""
    halving = lambda k: (k + 1, np.array([2.0 - 0.5**k, 1.0]))  # noqa: E731
    _, bests, done = A.converge(halving, 0, 20, 0.01)
    assert done and len(bests) == 7 and (bests[-1, 0] - bests[-2, 0]) / bests[-2, 0] <= 0.01
    assert (bests[-2, 0] - bests[-3, 0]) / bests[-3, 0] > 0.01
    _, bests, done = A.converge(halving, 0, 4, 0.01)
    assert not done and len(bests) == 4
