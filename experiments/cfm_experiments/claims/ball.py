"""The paper's class: laws supported in the ball B_R, searched by the same projected normalised ascent.

The paper's bound is for contexts supported in a ball B_R. A law of a few atoms ``a (K, d)`` in the
ball with weights ``w (K,)`` has an exact infinite-context limit (the atoms with their weights), and
its n-point context is the atoms weighted by the shares c/n of each atom among n i.i.d. draws
(:func:`counts`: points drawn at one atom move together), whatever n. The ascent
(:func:`~.ascent.normalised_ascent`) moves θ within Θ (:func:`~.ascent.project` at ‖Q‖‖K‖ ≤ 1 and
values ≤ 1) and the atoms within the ball (:func:`project_atoms`), each start's weights fixed.
Every such law obeys the a-priori bound :func:`ball_bound`: the value found is a lower bound of the
supremum over the ball, the a-priori bound an upper one.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from cfm_jax import EmpiricalMeasure
from cfm_jax.chaos import map_seeds

from .ascent import model_of, normalised_ascent, pair_gradient, project
from .deviation import sup_deviation, token_trajectory
from .starts import construction, stack

#: the radius R of the ball B_R the contexts of the paper's bound are supported in.
RADIUS = 1.0
#: atoms of a ball law (laws with fewer atoms carry zero-weight ones, which are never drawn).
ATOMS = 4
#: the rare atom's weight of the skewed corner law.
SKEW = 0.1
#: how many problems (starts, and each start's contexts) one search step vmaps together
#: (:func:`cfm_jax.chaos.map_seeds`' ``batch_size``; 0: all at once). A ball problem is a system of a
#: few atoms, where one problem at a time (the CPU's default) spends its time in per-operation overhead:
#: vmapped, a stretch of 60 steps ran 1.8× faster on two cores for the uniform part's 128 problems of one
#: context each and 6× for the suprema's 10 starts of 128 contexts, the same values to round-off.
BATCH = 0
#: the ball laws' starts: ±R e₁ (the corner: the whole law on the line of the aligned model), the
#: same with weights :data:`SKEW` and 1 − SKEW (a rare atom, whose share fluctuates most), R e₁ and
#: 0 (a one-sided corner), and :data:`ATOMS` atoms on the sphere (equal weights).
BALL_LAWS = ("corner", "skewed", "one-sided", "sphere")
#: the starts of the ball's ascent besides the random ones.
BALL_STRUCTURED: tuple[tuple[str, str], ...] = (
    ("aligned", "corner"),
    ("aligned", "skewed"),
    ("aligned", "one-sided"),
    ("identity", "corner"),
    ("identity", "skewed"),
    ("identity", "sphere"),
    ("identical heads", "sphere"),
    ("trivial", "corner"),
    ("trivial", "sphere"),
)


def ball_bound(n, layers: int, radius: float = RADIUS, v: float = 1.0):
    """The a-priori bound of √n·sup_s‖x_s − x̂_s‖ on every law supported in B_R, with x0 = R e₁: every
    layer moves a token by at most (v/L)·max‖z‖ (attention averages the context; ‖Σ_h V_h a_h‖ ≤ v
    max‖a_h‖ with v = 1 under Σ_h‖V_h‖ ≤ 1 and v = √H under ‖[V_1 … V_H]‖ ≤ 1), and the context's
    radius grows by the factor 1 + v/L per layer, so each of x and x̂ moves by at most
    R((1 + v/L)^L − 1): √n · 2R((1 + v/L)^L − 1)."""
    return np.sqrt(np.asarray(n, np.float64)) * 2 * radius * ((1 + v / layers) ** layers - 1)


def ball_law(rng, dim: int, name: str, atoms: int = ATOMS, radius: float = RADIUS) -> dict:
    """The ball law ``name`` (:data:`BALL_LAWS`; ``"random"``: atoms uniform in the ball with
    Dirichlet weights; ``"cross"``: ±R e_i with equal weights, the cross-polytope's vertices, mean 0
    and covariance R²I/d like N(0, R²I/d), needing ``atoms`` ≥ 2d) as atoms ``a (atoms, d)`` and
    weights ``w (atoms,)`` (atoms beyond the law's carry weight 0)."""
    a, w = np.zeros((atoms, dim)), np.zeros(atoms)
    if name == "corner":
        a[0, 0], a[1, 0], w[:2] = radius, -radius, 0.5
    elif name == "skewed":
        a[0, 0], a[1, 0], w[:2] = radius, -radius, (SKEW, 1 - SKEW)
    elif name == "one-sided":
        a[0, 0], w[:2] = radius, 0.5
    elif name == "cross":
        if atoms < 2 * dim:
            raise ValueError(f"ball_law: the cross law needs `atoms` >= 2·dim = {2 * dim}, got {atoms}.")
        a[:dim], a[dim : 2 * dim], w[: 2 * dim] = radius * np.eye(dim), -radius * np.eye(dim), 1 / (2 * dim)
    elif name in ("sphere", "random"):
        u = rng.standard_normal((atoms, dim))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        r = radius if name == "sphere" else radius * rng.random((atoms, 1)) ** (1 / dim)
        a, w = u * r, np.full(atoms, 1 / atoms) if name == "sphere" else rng.dirichlet(np.ones(atoms))
    else:
        raise ValueError(f"ball_law: `name` must be one of {(*BALL_LAWS, 'cross', 'random')}, got {name!r}.")
    return {"a": a, "w": w}


def ball_starts(rng, dim, heads, layers, pairs, restarts, v_sum) -> tuple[dict, dict, list[str]]:
    """The ball ascent's starts: ``pairs`` (parameter start, ball law), then ``restarts`` random
    models on random ball laws. Returns θ ``(S, L, H, d, d)``, laws ``a (S, K, d)``, ``w (S, K)``
    and the names."""
    chosen = [*pairs, *(("random", "random") for _ in range(restarts))]
    thetas = [construction(rng, p, dim, heads, layers, 1.0, 1.0, v_sum) for p, _ in chosen]
    laws = [ball_law(rng, dim, law) for _, law in chosen]
    names = [f"{p}{f' {i + 1 - len(pairs)}' if p == 'random' else ''} · {law}" for i, (p, law) in enumerate(chosen)]
    return stack(thetas), stack(laws), names


def counts(rng, w, contexts: int, ns) -> np.ndarray:
    """``(S, contexts, len(ns), K)``: the shares c/n of each atom among the first n of ``contexts``
    sequences of i.i.d. draws from each law's weights ``w (S, K)`` (the n-point context of a discrete
    law is its atoms weighted by these shares: points drawn at one atom move together). The counts
    of the first n draws are built by multinomial increments between consecutive n, so the sizes
    nest (one sequence of draws per context) at no cost in n."""
    w = np.asarray(w, np.float64)
    w = w / w.sum(axis=-1, keepdims=True)
    ns = [int(n) for n in ns]
    order = np.argsort(ns)
    out = np.zeros((w.shape[0], contexts, len(ns), w.shape[-1]))
    total, done = np.zeros((w.shape[0], contexts, w.shape[-1])), 0
    for j in order:
        total = total + np.stack([rng.multinomial(ns[j] - done, p, size=contexts) for p in w])
        done = ns[j]
        out[:, :, j] = total / ns[j]
    return out


def project_atoms(a, mask_d, radius: float = RADIUS):
    """The atoms ``(..., K, D)`` onto the ball B_R, zero beyond d (the Euclidean projection)."""
    a = a * mask_d
    norm = jnp.linalg.norm(a, axis=-1, keepdims=True)
    return a * jnp.minimum(1.0, radius / jnp.maximum(norm, 1e-30))


def ball_objective(theta, a, w, shares, x0, n, batch_size: int | None = BATCH):
    """J(θ, a) = √n · mean over contexts of sup_s‖x_s − x̂_s‖, the n-point contexts the atoms ``a (K, D)``
    weighted by ``shares (M, K)``, the infinite one by ``w (K,)`` (exact); the contexts mapped in
    blocks of ``batch_size`` (:data:`BATCH`)."""
    model = model_of(theta)
    ref = token_trajectory(model, x0, EmpiricalMeasure.unchecked(a, w))
    devs = map_seeds(
        lambda c: sup_deviation(token_trajectory(model, x0, EmpiricalMeasure.unchecked(a, c)), ref),
        shares,
        batch_size=batch_size,
    )
    return jnp.sqrt(jnp.asarray(n, a.dtype)) * jnp.mean(devs)


def _ascend_ball(theta0, a0, w, shares, x0, n, v_sum, lr, mask_d, mask_h, steps: int, learn_law: bool, batch_size):
    grad = pair_gradient(lambda t, a: ball_objective(t, a, w, shares, x0, n, batch_size), learn_law)
    proj = lambda p: (  # noqa: E731
        project(p[0], 1.0, 1.0, v_sum, mask_d, mask_h),
        project_atoms(p[1], mask_d) if learn_law else p[1],
    )
    params0 = proj((theta0, a0))
    lr = jnp.asarray(lr, a0.dtype)
    (theta, a), best, history = normalised_ascent(grad, proj, params0, lr, (1.0, float(learn_law)), steps)
    return theta, a, best, history


def _ascend_ball_all(
    theta0, a0, w, shares, x0, n, v_sum, lr, mask_d, mask_h, *, steps: int, learn_law: bool = True, batch_size=BATCH
):
    one = lambda t, a, ww, c: _ascend_ball(t, a, ww, c, x0, n, v_sum, lr, mask_d, mask_h, steps, learn_law, batch_size)  # noqa: E731
    return map_seeds(lambda p: one(*p), (theta0, a0, w, shares), batch_size=batch_size)


#: ``ascend_ball(theta0 (S, …), a0 (S, K, D), w (S, K), shares (S, M, K), x0, n, v_sum, lr, mask_d, mask_h,
#: *, steps, learn_law=True, batch_size=BATCH)``: the projected normalised ascent of θ (‖Q‖‖K‖ ≤ 1, values ≤ 1)
#: and of the atoms (in B_R, the weights fixed; ``learn_law`` False: the atoms fixed too, only θ moves) from
#: each of S starts on its M contexts: best θ, best atoms, best J ``(S,)``, J at every step ``(S, steps)``.
#: The starts, and each start's contexts, are mapped in blocks of ``batch_size`` (:data:`BATCH`: all
#: vmapped; 1: one after another, the same values to round-off). ``v_sum`` (a Python bool: which value
#: norm, :func:`~.ascent.project`) is static.
ascend_ball = jax.jit(_ascend_ball_all, static_argnames=("v_sum", "steps", "learn_law", "batch_size"))


def _evaluate_ball(thetas, a, w, shares, x0, ns, batch_size=BATCH):
    def one(theta, atoms, weights, c):  # c (M, K_n, K)
        model = model_of(theta)
        ref = token_trajectory(model, x0, EmpiricalMeasure.unchecked(atoms, weights))
        dev = lambda s: sup_deviation(token_trajectory(model, x0, EmpiricalMeasure.unchecked(atoms, s)), ref)  # noqa: E731
        return jax.vmap(jax.vmap(dev))(c) * jnp.sqrt(ns.astype(atoms.dtype))

    return map_seeds(lambda p: one(*p), (thetas, a, w, shares), batch_size=batch_size)


#: ``evaluate_ball(thetas (P, …), a (P, K, D), w (P, K), shares (P, M, K_n, K), x0, ns (K_n,), batch_size=BATCH)``:
#: √n · sup deviation of each (θ, ball law) on each context at each n, ``(P, M, K_n)``.
evaluate_ball = jax.jit(_evaluate_ball, static_argnames=("batch_size",))


def two_atom_mean(theta, atoms, w, x0, n: int, batch_size: int | None = BATCH) -> float:
    """√n·E sup_s‖x_s − x̂_s‖ of θ on a law of two atoms (``atoms (K, D)``, ``w (K,)`` with one or two
    positive weights) exactly: the expectation over the binomial count k of the first atom among
    the n draws, every k from 0 to n (n + 1 systems of the two atoms)."""
    w = np.asarray(w, np.float64)
    used = np.flatnonzero(w > 0)
    if not 1 <= len(used) <= 2:
        raise ValueError(f"two_atom_mean: `w` must have one or two positive weights, got {len(used)}.")
    i, j = (*used, used[0])[:2]
    p = w[i] / w.sum() if i != j else 0.5  # one atom: every count gives the same shares
    k = np.arange(n + 1)
    shares = np.zeros((1, n + 1, 1, len(w)))
    shares[0, :, 0, i] += k / n
    shares[0, :, 0, j] += 1 - k / n
    lgamma = np.vectorize(math.lgamma)
    log_pmf = lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1) + k * np.log(p) + (n - k) * np.log1p(-p)
    one = {name: np.asarray(a)[None] for name, a in theta.items()}
    values = evaluate_ball(one, np.asarray(atoms)[None], w[None], shares, x0, np.asarray([n]), batch_size=batch_size)
    return float(np.exp(log_pmf) @ np.asarray(values, np.float64)[0, :, 0])


__all__ = [
    "ATOMS",
    "BATCH",
    "BALL_LAWS",
    "BALL_STRUCTURED",
    "RADIUS",
    "SKEW",
    "ascend_ball",
    "ball_bound",
    "ball_law",
    "ball_objective",
    "ball_starts",
    "counts",
    "evaluate_ball",
    "project_atoms",
    "two_atom_mean",
]
