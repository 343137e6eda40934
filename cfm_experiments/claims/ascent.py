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

Starts (:func:`starts`) pair a parameter start with a law start. Parameters: random fixed-norm
models and three constructions,

- **aligned**: Q_lh = K_lh = √b e₁e₁ᵀ (every logit b (x·e₁)(z·e₁): the largest spread the norms
  allow along e₁) and identical heads V_lh = v I/√H (concatenated norm v) or v I/H (Σ_h ‖V_lh‖ = v);
- **identical heads**: one random fixed-norm head (Q_l, K_l, W_l) copied H times with V_lh = W_l/√H
  (the concatenated norm of one head of value √H W_l) or W_l/H;
- **trivial**: Q = K = 0 (uniform attention: the token moves by the context's mean) with the
  aligned construction's values, the largest ‖Σ_h V_lh‖ the norm allows.

Laws (:func:`law_start`, energy B): isotropic N(0, B I/d), or low- or one-dimensional with its
energy in the plane (e₁, e₂) or on the line e₁ (its variances clipped at the direction bound).
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

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from cfm_jax import EmpiricalMeasure, GaussianMeasure, Transformer, linear
from cfm_jax.chaos import map_seeds, prefix_weights

from .deviation import sup_deviation, token_trajectory

#: the share of the context's second moment off the plane (e₁, e₂) in the low-dimensional law.
LOW_DIM_SPREAD = 0.05
#: the momentum of the normalised gradient ascent (module docstring).
MOMENTUM = 0.5
#: the bound on every direction's second moment E(u·z)² (module docstring).
DIRECTION_BOUND = 1.0
#: the share of the energy budget kept as the isotropic floor τI of Σ (module docstring).
JITTER = 1e-3
#: the parameter starts built by hand, and the law starts.
CONSTRUCTIONS = ("aligned", "identity", "identical heads", "trivial")
LAWS = ("isotropic", "low-dimensional", "one-dimensional", "line")
#: the starts (parameters, law) of the supremum's ascent besides the random ones.
STRUCTURED: tuple[tuple[str, str], ...] = (
    ("aligned", "line"),
    ("aligned", "one-dimensional"),
    ("identity", "isotropic"),
    ("aligned", "isotropic"),
    ("identical heads", "low-dimensional"),
    ("trivial", "isotropic"),
)


def law_cov(dim: int, name: str, energy: float = 1.0) -> np.ndarray:
    """``(d, d)`` covariance of the law ``name`` (:data:`LAWS`) with trace ``energy`` (E‖z‖² = B):
    isotropic B I/d, or B[(1 − η)P + η I/d] with η = :data:`LOW_DIM_SPREAD` and P the projection
    onto the plane (e₁, e₂) halved (low-dimensional) or onto e₁ (one-dimensional), or the same
    with η = :data:`JITTER` (line: the corner of the law set with the whole energy on e₁): the
    energy in a plane or on a line, whatever d. In d <= 2 the low-dimensional law is the isotropic one."""
    if name not in LAWS:
        raise ValueError(f"law_cov: `name` must be one of {LAWS}, got {name!r}.")
    eye = np.eye(dim) / dim
    rank = {"isotropic": dim, "low-dimensional": 2, "one-dimensional": 1, "line": 1}[name]
    if rank >= dim:
        return energy * eye
    plane = np.diag((np.arange(dim) < rank) / rank)
    spread = JITTER if name == "line" else LOW_DIM_SPREAD  # line: all but the floor τ on e₁
    return energy * ((1 - spread) * plane + spread * eye)


def law_start(dim: int, name: str, energy: float) -> dict:
    """The law ``name`` (:data:`LAWS`) of energy B as the ascent's variables, inside the law set:
    m = 0 ``(d,)`` and F ``(d, d)`` with FFᵀ + τI the covariance of :func:`law_cov`, its variances
    clipped at the direction bound (the low-dimensional law at B > 2)."""
    tau = JITTER * energy / dim
    lam, vecs = np.linalg.eigh(law_cov(dim, name, energy))
    lam = np.clip(lam - tau, 0.0, DIRECTION_BOUND - tau)
    return {"m": np.zeros(dim), "F": vecs * np.sqrt(lam)}


def _op(a):
    return np.linalg.norm(a, ord=2, axis=(-2, -1), keepdims=True)


def random_params(rng, dim: int, heads: int, layers: int, qk: float, v: float, v_sum: bool) -> dict:
    """A random model at fixed norms (as ``Transformer.init`` then rescaled, in NumPy): every layer's
    ‖Q_lh‖ = ‖K_lh‖ = √qk and ‖[V_l1 … V_lH]‖ = v (or Σ_h ‖V_lh‖ = v). Arrays ``(L, H, d, d)``."""
    Q, K, Vh = (rng.standard_normal((layers, heads, dim, dim)) for _ in range(3))
    concat = np.moveaxis(Vh, 1, 2).reshape(layers, dim, heads * dim)
    vn = _op(Vh)[..., 0, 0].sum(axis=1) if v_sum else _op(concat)[..., 0, 0]
    return {"Q": Q * np.sqrt(qk) / _op(Q), "K": K * np.sqrt(qk) / _op(K), "V": Vh * (v / vn)[:, None, None, None]}


def aligned(dim: int, heads: int, layers: int, qk: float, v: float, v_sum: bool) -> dict:
    """Q_lh = K_lh = √qk e₁e₁ᵀ; identical heads V_lh = v I/√H (or v I/H)."""
    e = np.zeros((dim, dim))
    e[0, 0] = np.sqrt(qk)
    div = heads if v_sum else np.sqrt(heads)
    return {
        "Q": np.broadcast_to(e, (layers, heads, dim, dim)).copy(),
        "K": np.broadcast_to(e, (layers, heads, dim, dim)).copy(),
        "V": np.broadcast_to(v / div * np.eye(dim), (layers, heads, dim, dim)).copy(),
    }


def identity(dim: int, heads: int, layers: int, qk: float, v: float, v_sum: bool) -> dict:
    """The full-rank corner Q_lh = K_lh = √qk I (‖Q‖‖K‖ = qk) with the aligned construction's values
    (Q = K = V = I at one head and unit norms)."""
    out = aligned(dim, heads, layers, qk, v, v_sum)
    eye = np.broadcast_to(np.sqrt(qk) * np.eye(dim), out["Q"].shape).copy()
    return out | {"Q": eye, "K": eye.copy()}


def trivial(dim: int, heads: int, layers: int, v: float, v_sum: bool) -> dict:
    """Q = K = 0 with the aligned construction's values (uniform attention)."""
    out = aligned(dim, heads, layers, 0.0, v, v_sum)
    return out | {"Q": np.zeros_like(out["Q"]), "K": np.zeros_like(out["K"])}


def identical(one: dict, heads: int, v_sum: bool) -> dict:
    """One head (H = 1 parameters) copied ``heads`` times, values W/√H (concatenated norm kept) or W/H."""
    div = heads if v_sum else np.sqrt(heads)
    return {
        "Q": np.repeat(one["Q"], heads, 1),
        "K": np.repeat(one["K"], heads, 1),
        "V": np.repeat(one["V"], heads, 1) / div,
    }


def construction(rng, name: str, dim: int, heads: int, layers: int, qk: float, v: float, v_sum: bool) -> dict:
    """The parameter start ``name``: one of :data:`CONSTRUCTIONS`, or ``"random"``."""
    if name == "aligned":
        return aligned(dim, heads, layers, qk, v, v_sum)
    if name == "identity":
        return identity(dim, heads, layers, qk, v, v_sum)
    if name == "identical heads":
        return identical(random_params(rng, dim, 1, layers, qk, v, False), heads, v_sum)
    if name == "trivial":
        return trivial(dim, heads, layers, v, v_sum)
    if name == "random":
        return random_params(rng, dim, heads, layers, qk, v, v_sum)
    raise ValueError(f"construction: `name` must be one of {(*CONSTRUCTIONS, 'random')}, got {name!r}.")


def starts(
    rng,
    dim: int,
    heads: int,
    layers: int,
    energy: float,
    pairs: Sequence[tuple[str, str]],
    restarts: int,
    v_sum: bool,
    qk: float = 1.0,
    v: float = 1.0,
) -> tuple[dict, dict, list[str]]:
    """The ascent's starts: ``pairs`` (parameter start, law start), then ``restarts`` random models
    on the isotropic and low-dimensional laws in turn. Returns θ ``(S, L, H, d, d)``, the laws
    ``m (S, d)``, ``F (S, d, d)`` and the names ``"<parameters> · <law>"``."""
    chosen = [*pairs, *(("random", LAWS[i % 2]) for i in range(restarts))]
    thetas = [construction(rng, p, dim, heads, layers, qk, v, v_sum) for p, _ in chosen]
    laws = [law_start(dim, law, energy) for _, law in chosen]
    names = [f"{p}{f' {i + 1 - len(pairs)}' if p == 'random' else ''} · {law}" for i, (p, law) in enumerate(chosen)]
    return stack(thetas), stack(laws), names


def stack(params: list[dict]) -> dict:
    return {k: np.stack([p[k] for p in params]) for k in params[0]}


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


def project(theta: dict, qk, v, v_sum, mask_d, mask_h) -> dict:
    """θ onto Θ (module docstring): zero outside the problem's block and heads, then every layer's
    Q_lh, K_lh clipped at √qk, and its values [V_l1 … V_lH] clipped at v or (``v_sum``) rescaled
    so that Σ_h ‖V_lh‖ ≤ v."""
    block = mask_h[:, None, None] * mask_d[:, None] * mask_d[None, :]
    Qm, Km, Vh = (theta[k] * block for k in ("Q", "K", "V"))
    L, H, d, _ = Vh.shape
    concat = jnp.moveaxis(Vh, 1, 2).reshape(L, d, H * d)
    clipped = jnp.moveaxis(_clip(concat, v).reshape(L, d, H, d), 2, 1)
    total = jnp.linalg.norm(Vh, ord=2, axis=(-2, -1)).sum(axis=1)[:, None, None, None]
    rescaled = Vh * jnp.minimum(1.0, v / jnp.maximum(total, 1e-30))
    root = jnp.sqrt(qk)
    return {"Q": _clip(Qm, root), "K": _clip(Km, root), "V": jnp.where(v_sum, rescaled, clipped)}


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


def _normalised_ascent(grad, proj, params0, lr, rates, steps: int):
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


def _ascend(theta0, law0, x0, eps, energy, qk, v, v_sum, lr, mask_d, mask_h, learn_law: bool, steps: int):
    """(best θ, best law, best J, J at every step ``(steps,)``) of the projected normalised ascent
    (module docstring) from ``theta0``, ``law0``."""
    if learn_law:
        grad = jax.value_and_grad(lambda p: objective(p[0], p[1], x0, eps, energy, mask_d))
    else:  # the law's gradient (through the n-point adjoint's context branch) not built at all

        def grad(p):
            value, g = jax.value_and_grad(lambda t: objective(t, p[1], x0, eps, energy, mask_d))(p[0])
            return value, (g, jax.tree.map(jnp.zeros_like, p[1]))

    proj = lambda p: (  # noqa: E731
        project(p[0], qk, v, v_sum, mask_d, mask_h),
        project_law(p[1], energy, mask_d) if learn_law else p[1],
    )
    params0 = (project(theta0, qk, v, v_sum, mask_d, mask_h), project_law(law0, energy, mask_d))
    lr = jnp.asarray(lr, eps.dtype)
    (theta, law), best, history = _normalised_ascent(grad, proj, params0, lr, (1.0, float(learn_law)), steps)
    return theta, law, best, history


def _ascend_shared(theta0, law0, x0, eps, energy, qk, v, v_sum, lr, mask_d, mask_h, *, learn_law: bool, steps: int):
    one = lambda t, w: _ascend(t, w, x0, eps, energy, qk, v, v_sum, lr, mask_d, mask_h, learn_law, steps)  # noqa: E731
    return map_seeds(lambda a: one(*a), (theta0, law0))


def _ascend_each(theta0, law0, x0, eps, energy, qk, v, v_sum, lr, mask_d, mask_h, *, learn_law: bool, steps: int):
    one = lambda t, w, e: _ascend(t, w, x0, e, energy, qk, v, v_sum, lr, mask_d, mask_h, learn_law, steps)  # noqa: E731
    return map_seeds(lambda a: one(*a), (theta0, law0, eps))


#: ``ascend(theta0 (S, …), law0 (S, …), x0, eps (M, n, D), energy, qk, v, v_sum, lr, mask_d, mask_h, *,
#: learn_law, steps)``: the ascent from each of S starts on the same M draws (common random numbers):
#: best θ, best law, best J ``(S,)``, J at every step ``(S, steps)`` (the first: the start's).
ascend = jax.jit(_ascend_shared, static_argnames=("learn_law", "steps"))

#: ``ascend_each(theta0 (P, …), law0 (P, …), x0, eps (P, 1, n, D), …, *, steps)``: one ascent per
#: draw (each its own θ, and law when learnt): the supremum of each context's own deviation.
ascend_each = jax.jit(_ascend_each, static_argnames=("learn_law", "steps"))


def _evaluate(theta, law, x0, eps, energy, mask_d, ns):
    model = model_of(theta)
    ref = token_trajectory(model, x0, gaussian(law, energy, mask_d))
    size = eps.shape[1]

    def one(z):
        def at(n):
            context = EmpiricalMeasure.unchecked(z, prefix_weights(n, size, z.dtype, throw=False))
            return jnp.sqrt(n.astype(z.dtype)) * sup_deviation(token_trajectory(model, x0, context), ref)

        return jax.lax.map(at, ns)

    return map_seeds(one, contexts_of(law, eps, energy, mask_d))


def _evaluate_all(thetas, laws, x0, eps, energy, mask_d, ns):
    return map_seeds(lambda a: _evaluate(a[0], a[1], x0, eps, energy, mask_d, ns), (thetas, laws))


#: ``evaluate(thetas (P, …), laws (P, …), x0, eps (M, N, D), energy, mask_d, ns (K,))``: √n · sup
#: deviation of each (θ, law) on each draw's first n points, ``(P, M, K)``.
evaluate = jax.jit(_evaluate_all)


# --- the paper's class: laws supported in the ball B_R ----------------------------------------------

#: the radius R of the ball B_R the contexts of the paper's bound are supported in.
RADIUS = 1.0
#: atoms of a ball law (laws with fewer atoms carry zero-weight ones, which are never drawn).
ATOMS = 4
#: the rare atom's weight of the skewed corner law.
SKEW = 0.1
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
    """The ball law ``name`` (:data:`BALL_LAWS`, or ``"random"``: atoms uniform in the ball with
    Dirichlet weights) as atoms ``a (atoms, d)`` and weights ``w (atoms,)``."""
    a, w = np.zeros((atoms, dim)), np.zeros(atoms)
    if name == "corner":
        a[0, 0], a[1, 0], w[:2] = radius, -radius, 0.5
    elif name == "skewed":
        a[0, 0], a[1, 0], w[:2] = radius, -radius, (SKEW, 1 - SKEW)
    elif name == "one-sided":
        a[0, 0], w[:2] = radius, 0.5
    elif name in ("sphere", "random"):
        u = rng.standard_normal((atoms, dim))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        r = radius if name == "sphere" else radius * rng.random((atoms, 1)) ** (1 / dim)
        a, w = u * r, np.full(atoms, 1 / atoms) if name == "sphere" else rng.dirichlet(np.ones(atoms))
    else:
        raise ValueError(f"ball_law: `name` must be one of {(*BALL_LAWS, 'random')}, got {name!r}.")
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


def ball_objective(theta, a, w, shares, x0, n):
    """J(θ, a) = √n · mean over contexts of sup_s‖x_s − x̂_s‖, the n-point contexts the atoms ``a (K, D)``
    weighted by ``shares (M, K)``, the infinite one by ``w (K,)`` (exact)."""
    model = model_of(theta)
    ref = token_trajectory(model, x0, EmpiricalMeasure.unchecked(a, w))
    devs = map_seeds(
        lambda c: sup_deviation(token_trajectory(model, x0, EmpiricalMeasure.unchecked(a, c)), ref), shares
    )
    return jnp.sqrt(jnp.asarray(n, a.dtype)) * jnp.mean(devs)


def _ascend_ball(theta0, a0, w, shares, x0, n, v_sum, lr, mask_d, mask_h, steps: int):
    grad = jax.value_and_grad(lambda p: ball_objective(p[0], p[1], w, shares, x0, n))
    proj = lambda p: (project(p[0], 1.0, 1.0, v_sum, mask_d, mask_h), project_atoms(p[1], mask_d))  # noqa: E731
    params0 = proj((theta0, a0))
    (theta, a), best, history = _normalised_ascent(grad, proj, params0, jnp.asarray(lr, a0.dtype), (1.0, 1.0), steps)
    return theta, a, best, history


def _ascend_ball_all(theta0, a0, w, shares, x0, n, v_sum, lr, mask_d, mask_h, *, steps: int):
    one = lambda t, a, ww, c: _ascend_ball(t, a, ww, c, x0, n, v_sum, lr, mask_d, mask_h, steps)  # noqa: E731
    return map_seeds(lambda p: one(*p), (theta0, a0, w, shares))


#: ``ascend_ball(theta0 (S, …), a0 (S, K, D), w (S, K), shares (S, M, K), x0, n, v_sum, lr, mask_d, mask_h,
#: *, steps)``: the projected normalised ascent of θ (‖Q‖‖K‖ ≤ 1, values ≤ 1) and of the atoms (in
#: B_R, the weights fixed) from each of S starts on its M contexts: best θ, best atoms, best J ``(S,)``,
#: J at every step ``(S, steps)``.
ascend_ball = jax.jit(_ascend_ball_all, static_argnames=("steps",))


def _evaluate_ball(thetas, a, w, shares, x0, ns):
    def one(theta, atoms, weights, c):  # c (M, K_n, K)
        model = model_of(theta)
        ref = token_trajectory(model, x0, EmpiricalMeasure.unchecked(atoms, weights))
        dev = lambda s: sup_deviation(token_trajectory(model, x0, EmpiricalMeasure.unchecked(atoms, s)), ref)  # noqa: E731
        return jax.vmap(jax.vmap(dev))(c) * jnp.sqrt(ns.astype(atoms.dtype))

    return map_seeds(lambda p: one(*p), (thetas, a, w, shares))


#: ``evaluate_ball(thetas (P, …), a (P, K, D), w (P, K), shares (P, M, K_n, K), x0, ns (K_n,))``: √n · sup
#: deviation of each (θ, ball law) on each context at each n, ``(P, M, K_n)``.
evaluate_ball = jax.jit(_evaluate_ball)


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
    "ATOMS",
    "BALL_LAWS",
    "BALL_STRUCTURED",
    "RADIUS",
    "SKEW",
    "ascend_ball",
    "ball_bound",
    "ball_law",
    "ball_objective",
    "ball_starts",
    "converge",
    "counts",
    "evaluate_ball",
    "identity",
    "project_atoms",
    "CONSTRUCTIONS",
    "DIRECTION_BOUND",
    "JITTER",
    "LAWS",
    "LOW_DIM_SPREAD",
    "MOMENTUM",
    "STRUCTURED",
    "Problem",
    "aligned",
    "ascend",
    "ascend_each",
    "construction",
    "contexts_of",
    "covariance",
    "embed",
    "evaluate",
    "gaussian",
    "identical",
    "law_cov",
    "law_start",
    "model_of",
    "normals",
    "objective",
    "project",
    "project_law",
    "random_params",
    "stack",
    "starts",
    "token",
    "trivial",
]
