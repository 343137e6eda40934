"""The curvature part's task: a student near an unstable stationary point of a symmetric
teacher–student problem, and what is measured along its runs.

Attention-only teacher and student (H = 1), contexts N(0, (s²/d) I) of mean 0. At V = Q = 0 the
exact-limit loss is stationary for every sample: the population context's mean is 0, so the value
map sees nothing while Q = 0. There the Hessian is the bilinear coupling of V and Q through ΣKᵀ,
with eigenvalues ±c: negative curvature −c, and the gradient map's Lipschitz constant C ≈ c. The
student starts there up to a factor 10⁻⁶ on V and Q; the teacher's Q, K, V and the student's K have
unit operator norm (each seed's curvature on the same scale). A finite context has a mean
z̄_n ~ n^{-1/2} that pushes θ^{(n)} off the saddle at every step, while θ̂ stays.

The key maps K are not trained (their gradient is set to 0 and the ridge skips them): trained and
ridged, K would shrink like (1 − ηλ)^k at this point, where its gradient vanishes, and the ridge
would remove the curvature itself instead of outweighing it.

Per seed, besides the measurement's deviations and C (:mod:`.measure`): the finite-time Lyapunov
growth log σ_max(J_{k−1} ⋯ J_0) of the OGD map along θ̂ on the trained coordinates
(:func:`cfm_jax.ogd.finite_time_lyapunov`), and δ_n, the largest gradient gap
‖g^{(n)}(θ̂) − ĝ(θ̂)‖_{L∞} at the 16 visited points; :func:`bound_trajectory` is the bound's own
trajectory ((1 + η(C − λ))^k − 1)·δ_n/(C − λ).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from cfm_jax import EmpiricalMeasure, ogd

from .measure import PILOT_POINTS, GaussianTask, unchecked_grad

#: the fixed sizes (the part's options set the rest).
FIXED = dict(dim=2, layers=1, batch=32, context_scale=1.0, offset=1e-6)


def train_mask(params):
    """True on the trained leaves (V, Q); the key maps K stay fixed."""
    return eqx.tree_at(lambda t: t.K, jax.tree.map(lambda _: True, params), False)


def fixed_key_grad(model, x0, context, y):
    """The exact-limit / sampled gradient with the key maps' part set to 0 (K is not trained)."""
    loss, g = unchecked_grad(model, x0, context, y)
    return loss, eqx.tree_at(lambda t: t.K, g, jnp.zeros_like(g.K))


class SaddleTask(GaussianTask):
    """Student near V = Q = 0 of a symmetric teacher–student problem, K fixed (module docstring)."""

    offset: float = eqx.field(static=True)

    def models(self, key):
        """Teacher with unit-norm Q, K, V (every layer and head) and student with unit-norm K:
        every seed's problem has its curvature on the same scale."""
        teacher, student, stream = super().models(key)
        unit = lambda a: a / jnp.linalg.norm(a, ord=2, axis=(-2, -1), keepdims=True)  # noqa: E731
        teacher = eqx.tree_at(lambda t: (t.Q, t.K, t.V), teacher, (unit(teacher.Q), unit(teacher.K), unit(teacher.V)))
        student = eqx.tree_at(lambda t: t.K, student, unit(student.K))
        return teacher, student, eqx.tree_at(lambda st: st.teacher, stream, teacher)

    def problem(self, base, s):
        _, student, stream = self.models(jax.random.split(base, self.seeds)[s])
        student = eqx.tree_at(lambda t: (t.V, t.Q), student, (self.offset * student.V, self.offset * student.Q))
        return student, stream

    def grad_fn(self) -> Callable[..., tuple]:
        return fixed_key_grad

    def optimizer(self, lam):
        decay = optax.masked(optax.add_decayed_weights(lam), train_mask)
        return optax.chain(decay, optax.sgd(self.eta))

    def extras(self, base, lams, path) -> dict:
        return _extras(self, base, lams, path)


@eqx.filter_jit
def _extras(task: SaddleTask, base, lams, path):
    """Per seed: ``log_growth (S, K)`` (FTLE growth along θ̂) and ``delta (S, len(ns))``, the
    largest gradient gap between the n-point and the exact context at the 16 visited points."""
    stride = max(1, task.steps // PILOT_POINTS)
    at = np.arange(stride - 1, task.steps, stride)  # path index i is θ̂_{i+1}, stepped with sample i + 1

    def one(s, lam, p):
        student, stream = task.problem(base, s)
        growth = ogd.finite_time_lyapunov(
            student, p, stream, task.optimizer(lam), population=task.mu, grad_fn=fixed_key_grad, mask=train_mask
        )
        static = eqx.filter(student, eqx.is_inexact_array, inverse=True)

        def gap(i):
            model = eqx.combine(jax.tree.map(lambda a: a[i], p), static)
            sample = stream(i + 1)
            grad = lambda ctx: ogd.functional_scale(model, fixed_key_grad(model, sample.x0, ctx, sample.y)[1])  # noqa: E731
            exact = grad(task.mu)
            return jnp.stack([ogd.sup_distance(grad(EmpiricalMeasure(sample.context[:n])), exact) for n in task.ns])

        return growth, jax.lax.map(gap, jnp.asarray(at)).max(0)

    growth, delta = jax.vmap(one)(jnp.arange(task.seeds), lams, path)
    return {"log_growth": growth, "delta": delta}


def task_of(config: dict) -> SaddleTask:
    return SaddleTask.of(config, offset=config["offset"])


def bound_trajectory(K: int, eta: float, C, lam, delta) -> np.ndarray:
    """The bound's own trajectory B_k = ((1 + η(C − λ))^k − 1)·δ_n/(C − λ), k = 1 … K, per seed and
    n: ``C, lam (S,)``, ``delta (S, len(ns))`` -> ``(S, K, len(ns))`` (its λ → C limit: k·η·δ_n)."""
    a = eta * (np.asarray(C, float) - np.asarray(lam, float))[:, None]  # (S, 1)
    k = np.arange(1, K + 1)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(np.abs(a) > 1e-12, np.expm1(k * np.log1p(a)) / np.where(a == 0, 1, a), k)  # Σ_j (1 + a)^j
    return eta * factor[:, :, None] * np.asarray(delta, float)[:, None, :]


def record(config: dict, m: dict, lams, pilot_C) -> dict:
    """One λ's row: per-seed deviations, FTLE growth, δ_n, C and the bound's trajectory."""
    K = config["steps"]
    bound = bound_trajectory(K, config["eta"], m["C"], lams, m["delta"])
    return {
        "lam": np.asarray(lams).tolist(),
        "C_pilot": np.asarray(pilot_C).tolist(),
        "region_C": m["C"].tolist(),
        "deviations": m["deviations"].tolist(),  # (S, K, len(ns))
        "log_growth": m["log_growth"].tolist(),  # (S, K)
        "delta": m["delta"].tolist(),  # (S, len(ns))
        "bound": bound.tolist(),
        "ref_norm_final": m["ref_norms"][:, -1].tolist(),
    }


__all__ = ["FIXED", "SaddleTask", "bound_trajectory", "fixed_key_grad", "record", "task_of", "train_mask"]
