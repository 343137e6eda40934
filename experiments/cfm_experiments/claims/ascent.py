"""Worst cases searched: projected gradient ascent of the deviation over parameters and context laws.

The paper's constant is a supremum over parameters of given norms and over the contexts its bound
admits. With Gaussian contexts μ = N(m, Σ) (their infinite-context flow is exact) the support
radius R becomes an energy budget B on the second-moment matrix S = Σ + mmᵀ:

    E‖z‖² = tr S ≤ B   and   E(u·z)² = uᵀSu ≤ 1 for every unit u   (S ≼ I, :data:`DIRECTION_BOUND`).

At B = 1 the second condition follows from the first. At B = d (N(0, I) is the isotropic member)
it keeps the energy growing through the dimensions: without it the ascent puts the whole budget
on one direction, where the logits' scale ‖Q‖‖K‖σ₁² grows like d (the ``scales`` part's β, with
its exponential growth; at d = 8 the deviation found reached 10¹⁶).

For one target token x0 = e₁ and M fixed standard normal draws ε_m ``(n, d)`` (common random
numbers) the contexts are reparametrised through the law, z_m = m + ε_m Lᵀ with L the Cholesky
factor of Σ, and we maximise

    J(θ, μ) = √n · mean_m sup_s ‖x_s(θ; z_m) − x̂_s(θ; μ)‖

over θ = (Q_lh, K_lh, V_lh) in Θ (every layer's ‖Q_lh‖ ≤ √b, ‖K_lh‖ ≤ √b, so ‖Q_lh‖‖K_lh‖ ≤ b,
and ‖[V_l1 … V_lH]‖ ≤ v, the heads' concatenated value map, or Σ_h ‖V_lh‖ ≤ v) and over the law:
Σ = FFᵀ + τI with a free factor F and mean m, G = [F m] with ‖G‖²_F ≤ (1 − :data:`JITTER`)B and
singular values at most √(1 − τ), the floor τ = :data:`JITTER`·B/d keeping Σ positive definite
(so L is differentiable). Both systems are differentiated by the library itself (the n-point
system's hand adjoint, the Gaussian limit by autodiff). Each step is a normalised gradient step,
the gradient of θ and that of the law each scaled to unit Frobenius norm and moved by the rate
(heavy-ball momentum :data:`MOMENTUM`, the rate decaying along a cosine to a tenth so that the last
steps refine), then the projections (:func:`project`: singular values clipped, the Euclidean
projection onto an operator-norm ball, or for Σ_h‖V_lh‖ a rescaling onto it; :func:`project_law`);
the best iterate is kept, the start included. Normalised rather than Adam: the gradient's scale
varies by orders of magnitude between a random start and a worst case, and Adam's per-coordinate
normalisation moves every coordinate by the rate, the many with a vanishing gradient too, which
leaves a sharp maximum at once (the aligned construction on a one-dimensional law never improved
under Adam at rates from 5·10⁻⁴ to 0.05; the normalised step raises it).
``learn_law`` (static) False keeps the law at its start and builds no gradient in it (only θ moves).

The starts (parameter constructions paired with law starts) are :mod:`.starts`'s; the paper's
class, laws of a few atoms in the ball B_R, runs the same :func:`normalised_ascent` in :mod:`.ball`.
The value found is a lower bound of the supremum, and an upward-biased estimate of E_z √n·dev at
the (θ, μ) found (it was maximised on those M draws): :data:`evaluate` measures it on independent
draws at several n. :data:`ascend_each` maximises each context's own deviation (one θ per
context, the law fixed): E_z sup_θ, the uniform-in-θ quantity.

One compiled program serves several problems: a problem in dimension d with H heads can be
embedded in a larger D and H_max (tokens, draws and the law's m, F zero beyond d, parameters zero
outside the d × d block and beyond head H, kept so by the projections' masks; the covariance is
the identity beyond d, where nothing reads it), which leaves its dynamics unchanged. B is an
argument, so the energies share programs too. The random starts and draws are NumPy draws (no old
numbers to reproduce, and nothing to compile).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.nn import identity as linear

from cfm_jax import EmpiricalMeasure, GaussianMeasure, Transformer
from cfm_jax.chaos import map_seeds, prefix_weights

from .common import checked_jit
from .deviation import sup_deviation, token_trajectory

#: the momentum of the normalised gradient ascent (module docstring).
MOMENTUM = 0.5
#: the bound on every direction's second moment E(u·z)² (module docstring).
DIRECTION_BOUND = 1.0
#: the share of the energy budget kept as the isotropic floor τI of Σ (module docstring).
JITTER = 1e-3


def normals(rng, count: int, n: int, dim: int) -> np.ndarray:
    """``(count, n, d)`` standard normal draws (the contexts before the law's reparametrisation)."""
    return rng.standard_normal((count, n, dim))


def token(dim: int) -> np.ndarray:
    """The target token x0 = e₁, ``(1, d)``."""
    x = np.zeros((1, dim))
    x[0, 0] = 1.0
    return x


def embed(a, size: int, axes) -> np.ndarray:
    """``a`` zero-padded to ``size`` along each of ``axes``."""
    a = np.asarray(a)
    pad = [(0, 0)] * a.ndim
    for ax in axes:
        pad[ax] = (0, size - a.shape[ax])
    return np.pad(a, pad)


class Problem:
    """A problem of dimension ``dim`` with ``heads`` heads and energy budget ``energy`` embedded in
    ``D`` and ``H_max`` (module docstring): the embedded token and masks, and embedders."""

    def __init__(self, dim: int, heads: int, D: int, H_max: int, energy: float = 1.0):
        if not (1 <= dim <= D and 1 <= heads <= H_max):
            raise ValueError(f"Problem: need 1 <= dim <= D and 1 <= heads <= H_max, got {dim, D, heads, H_max}.")
        if not energy > 0:
            raise ValueError(f"Problem: `energy` must be > 0, got {energy}.")
        self.dim, self.heads, self.D, self.H_max, self.energy = dim, heads, D, H_max, float(energy)
        self.x0 = embed(token(dim), D, (1,))
        self.mask_d = (np.arange(D) < dim).astype(float)
        self.mask_h = (np.arange(H_max) < heads).astype(float)

    def theta(self, params: dict) -> dict:
        """Stacked parameters ``(..., L, H, d, d)`` embedded as ``(..., L, H_max, D, D)``."""
        nd = params["Q"].ndim
        return {k: embed(embed(a, self.D, (nd - 2, nd - 1)), self.H_max, (nd - 3,)) for k, a in params.items()}

    def law(self, law: dict) -> dict:
        """Stacked laws ``m (..., d)``, ``F (..., d, d)`` embedded in D."""
        nd = law["F"].ndim
        return {"m": embed(law["m"], self.D, (nd - 2,)), "F": embed(law["F"], self.D, (nd - 2, nd - 1))}

    def points(self, z) -> np.ndarray:
        return embed(z, self.D, (np.ndim(z) - 1,))

    @property
    def masks(self):
        return self.mask_d, self.mask_h


def _clip(a, c):
    """``a``'s singular values clipped at ``c``: the Frobenius projection onto {‖a‖₂ ≤ c} (last two axes)."""
    u, s, vt = jnp.linalg.svd(a, full_matrices=False)
    return jnp.einsum("...ij,...j,...jk->...ik", u, jnp.minimum(s, c), vt)


def project(theta: dict, qk, v, v_sum: bool, mask_d, mask_h) -> dict:
    """θ onto Θ (module docstring): zero outside the problem's block and heads, then every layer's
    Q_lh, K_lh clipped at √qk, and its values [V_l1 … V_lH] clipped at v or (``v_sum``, static: which
    norm, decided before tracing so that only its projection is computed) rescaled so that
    Σ_h ‖V_lh‖ ≤ v."""
    block = mask_h[:, None, None] * mask_d[:, None] * mask_d[None, :]
    Qm, Km, Vh = (theta[k] * block for k in ("Q", "K", "V"))
    if v_sum:
        total = jnp.linalg.norm(Vh, ord=2, axis=(-2, -1)).sum(axis=1)[:, None, None, None]
        V = Vh * jnp.minimum(1.0, v / jnp.maximum(total, 1e-30))
    else:
        L, H, d, _ = Vh.shape
        concat = jnp.moveaxis(Vh, 1, 2).reshape(L, d, H * d)
        V = jnp.moveaxis(_clip(concat, v).reshape(L, d, H, d), 2, 1)
    root = jnp.sqrt(qk)
    return {"Q": _clip(Qm, root), "K": _clip(Km, root), "V": V}


def project_law(law: dict, energy, mask_d) -> dict:
    """(m, F) into the law set (module docstring), zero beyond d: the singular values of G = [F m]
    ``(d, d + 1)`` (S = GGᵀ + τI) clipped at √(1 − τ), then G rescaled to ‖G‖²_F ≤ (1 − JITTER)·energy.
    The Euclidean projection when one of the two constraints binds (the direction bound never
    binds at energy 1), a point of the set always."""
    block = mask_d[:, None] * mask_d[None, :]
    G = jnp.concatenate([law["F"] * block, (law["m"] * mask_d)[:, None]], axis=1)
    tau = JITTER * energy / jnp.sum(mask_d)
    G = _clip(G, jnp.sqrt(DIRECTION_BOUND - tau))
    scale = jnp.sqrt((1 - JITTER) * energy) / jnp.maximum(jnp.sqrt(jnp.sum(G**2)), 1e-30)
    G = G * jnp.minimum(1.0, scale)
    return {"m": G[:, -1], "F": G[:, :-1]}


def covariance(law: dict, energy, mask_d):
    """Σ = FFᵀ + τI on the problem's block (τ = JITTER·energy/d), the identity beyond it: ``(D, D)``."""
    tau = JITTER * energy / jnp.sum(mask_d)
    return law["F"] @ law["F"].T + jnp.diag(tau * mask_d + (1 - mask_d))


def contexts_of(law: dict, eps, energy, mask_d):
    """The draws ``eps (..., n, D)`` as points of N(m, Σ): m + ε Lᵀ (L Σ's Cholesky factor), zero beyond d."""
    chol = jnp.linalg.cholesky(covariance(law, energy, mask_d))
    return (law["m"] + eps @ chol.T) * mask_d


def gaussian(law: dict, energy, mask_d) -> GaussianMeasure:
    return GaussianMeasure.unchecked(law["m"], covariance(law, energy, mask_d))


def model_of(theta: dict) -> Transformer:
    return Transformer(Q=theta["Q"], K=theta["K"], V=theta["V"], activation=linear)


def objective(theta, law, x0, eps, energy, mask_d):
    """J(θ, μ) = √n · mean over the draws ``eps (M, n, D)`` of the sup deviation from the exact limit μ."""
    model = model_of(theta)
    ref = token_trajectory(model, x0, gaussian(law, energy, mask_d))
    z = contexts_of(law, eps, energy, mask_d)
    devs = map_seeds(lambda c: sup_deviation(token_trajectory(model, x0, EmpiricalMeasure(c)), ref), z)
    return jnp.sqrt(jnp.asarray(eps.shape[1], eps.dtype)) * jnp.mean(devs)


def _unit(tree):
    """``tree`` divided by its Frobenius norm, its non-finite entries zeroed (an overflowing
    objective moves nothing)."""
    tree = jax.tree.map(lambda a: jnp.where(jnp.isfinite(a), a, 0.0), tree)
    norm = jnp.sqrt(sum(jnp.sum(a**2) for a in jax.tree.leaves(tree)))
    return jax.tree.map(lambda a: a / jnp.maximum(norm, 1e-30), tree)


def normalised_ascent(grad, proj, params0, lr, rates, steps: int):
    """(best params, best value, value at every step ``(steps,)``) of the projected normalised ascent
    (module docstring) of ``grad`` (params → (value, gradient)) from ``params0`` (a point of the set;
    ``proj`` projects onto it after each step): each group's
    gradient a unit direction moved by ``lr`` times its entry of ``rates``."""
    opt = optax.sgd(optax.cosine_decay_schedule(1.0, steps, alpha=0.1), momentum=MOMENTUM)

    def step(carry, _):
        params, state, best, best_params = carry
        value, g = grad(params)
        better = value > best
        best_params = jax.tree.map(lambda a, b: jnp.where(better, a, b), params, best_params)
        best = jnp.maximum(value, best)
        direction = tuple(jax.tree.map(lambda a, r=r: -lr * r * a, _unit(h)) for h, r in zip(g, rates))
        updates, state = opt.update(direction, state, params)
        return (proj(optax.apply_updates(params, updates)), state, best, best_params), value

    init = (params0, opt.init(params0), jnp.asarray(-jnp.inf, lr.dtype), params0)
    (_, _, best, best_params), history = jax.lax.scan(step, init, None, length=steps)
    return best_params, best, history


def pair_gradient(f, learn_law: bool):
    """``(θ, law) -> (f(θ, law), (∂θ, ∂law))``; without ``learn_law`` the law's gradient is zeros and
    never built (nothing is differentiated through the context: the n-point adjoint's context branch)."""
    if learn_law:
        return jax.value_and_grad(lambda p: f(*p))

    def grad(p):
        value, g = jax.value_and_grad(lambda t: f(t, p[1]))(p[0])
        return value, (g, jax.tree.map(jnp.zeros_like, p[1]))

    return grad


def _ascend(theta0, law0, x0, eps, energy, qk, v, v_sum, lr, mask_d, mask_h, learn_law: bool, steps: int):
    """(best θ, best law, best J, J at every step ``(steps,)``) of the projected normalised ascent
    (module docstring) from ``theta0``, ``law0``."""
    grad = pair_gradient(lambda t, w: objective(t, w, x0, eps, energy, mask_d), learn_law)
    proj = lambda p: (  # noqa: E731
        project(p[0], qk, v, v_sum, mask_d, mask_h),
        project_law(p[1], energy, mask_d) if learn_law else p[1],
    )
    params0 = (project(theta0, qk, v, v_sum, mask_d, mask_h), project_law(law0, energy, mask_d))
    lr = jnp.asarray(lr, eps.dtype)
    (theta, law), best, history = normalised_ascent(grad, proj, params0, lr, (1.0, float(learn_law)), steps)
    return theta, law, best, history


def _ascend_shared(theta0, law0, x0, eps, energy, qk, v, v_sum, lr, mask_d, mask_h, *, learn_law: bool, steps: int):
    one = lambda t, w: _ascend(t, w, x0, eps, energy, qk, v, v_sum, lr, mask_d, mask_h, learn_law, steps)  # noqa: E731
    return map_seeds(lambda a: one(*a), (theta0, law0))


def _ascend_each(theta0, law0, x0, eps, energy, qk, v, v_sum, lr, mask_d, mask_h, *, learn_law: bool, steps: int):
    one = lambda t, w, e: _ascend(t, w, x0, e, energy, qk, v, v_sum, lr, mask_d, mask_h, learn_law, steps)  # noqa: E731
    return map_seeds(lambda a: one(*a), (theta0, law0, eps))


#: ``ascend(theta0 (S, …), law0 (S, …), x0, eps (M, n, D), energy, qk, v, v_sum, lr, mask_d, mask_h, *,
#: learn_law, steps)``: the ascent from each of S starts on the same M draws (common random numbers):
#: best θ, best law, best J ``(S,)``, J at every step ``(S, steps)`` (the first: the start's). ``v_sum``
#: (a Python bool: which value norm, :func:`project`), ``learn_law`` and ``steps`` are static.
ascend = jax.jit(_ascend_shared, static_argnames=("v_sum", "learn_law", "steps"))

#: ``ascend_each(theta0 (P, …), law0 (P, …), x0, eps (P, 1, n, D), …, *, steps)``: one ascent per
#: draw (each its own θ, and law when learnt): the supremum of each context's own deviation.
ascend_each = jax.jit(_ascend_each, static_argnames=("v_sum", "learn_law", "steps"))


def _evaluate(theta, law, x0, eps, energy, mask_d, ns):
    model = model_of(theta)
    ref = token_trajectory(model, x0, gaussian(law, energy, mask_d))
    size = eps.shape[1]

    def one(z):
        def at(n):
            context = EmpiricalMeasure.unchecked(z, prefix_weights(n, size, z.dtype))
            return jnp.sqrt(n.astype(z.dtype)) * sup_deviation(token_trajectory(model, x0, context), ref)

        return jax.lax.map(at, ns)

    return map_seeds(one, contexts_of(law, eps, energy, mask_d))


def _evaluate_all(thetas, laws, x0, eps, energy, mask_d, ns):
    return map_seeds(lambda a: _evaluate(a[0], a[1], x0, eps, energy, mask_d, ns), (thetas, laws))


#: ``evaluate(thetas (P, …), laws (P, …), x0, eps (M, N, D), energy, mask_d, ns (K,))``: √n · sup
#: deviation of each (θ, law) on each draw's first n points, ``(P, M, K)``.
evaluate = checked_jit(_evaluate_all)  # prefix_weights checks n: as data, no host callback


def converge(stretch, state, stretches: int, tol: float):
    """Runs ``stretch(state) -> (state, best (S,))`` until the best value of every start gains less
    than ``tol`` (relative) over one stretch, at most ``stretches`` times. Returns the last state, the
    best values after each stretch ``(k, S)`` and whether it stopped on the criterion."""
    bests = []
    for _ in range(stretches):
        state, best = stretch(state)
        bests.append(np.asarray(best, np.float64))
        if len(bests) >= 2 and np.all(bests[-1] - bests[-2] <= tol * np.abs(bests[-2])):
            return state, np.stack(bests), True
    return state, np.stack(bests), False


__all__ = [
    "converge",
    "DIRECTION_BOUND",
    "JITTER",
    "MOMENTUM",
    "normalised_ascent",
    "pair_gradient",
    "Problem",
    "ascend",
    "ascend_each",
    "contexts_of",
    "covariance",
    "embed",
    "evaluate",
    "gaussian",
    "model_of",
    "normals",
    "objective",
    "project",
    "project_law",
    "token",
]
