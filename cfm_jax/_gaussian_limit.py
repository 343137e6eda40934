"""The exact infinite-context flow for a Gaussian context (docs/theory.md, Gaussian limit).

For μ = N(m, Σ) the softmax-weighted mean is the mean of an exponentially tilted Gaussian,
∫ e^{u·z} z dμ / ∫ e^{u·z} dμ = m + Σu, so attention (and an MLP with a linear activation) is
affine in the query at a Gaussian context (:meth:`cfm_jax.AbstractField.gaussian_affine`):

    V(x, N(m, Σ); θ) = c + M x,      attention: c = Σ_h V_h m,  M = Σ_h V_h Σ A_hᵀ,  A_h = Q_hᵀ K_h.

Every context particle moves by the same affine map, so the context stays Gaussian and the
population flow is a flow of the moments:

- one Euler step of size h, exactly the residual layer on the infinite context:
  x ↦ x + h(c + Mx),  m ↦ m + h(c + Mm),  Σ ↦ (I + hM) Σ (I + hM)ᵀ;
- continuous depth (any other diffrax solver): dm/ds = c + Mm, dΣ/ds = MΣ + ΣMᵀ, dx/ds = c + Mx.

Each step costs O(d³) (O(H d³) for the closed form), independent of any sample size; the
recursion is a ``lax.scan`` over layers and is differentiated by autodiff. The token covector of
the limit, p_s = ∂ℓ/∂x_s with the context held at its population law, solves the discrete
adjoint p_i = (I + h M_i)ᵀ p_{i+1} (:func:`gaussian_token_adjoint`).
"""

from __future__ import annotations

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._flow import SaveAt, solve_segment
from ._paths import AbstractCFM
from ._qmc import sobol_normal
from ._validation import check_finite, finite, finite_params, is_concrete, static_int


def _symmetric_tolerance(dtype) -> float:
    return 1e3 * float(jnp.finfo(dtype).eps)


class GaussianMeasure(eqx.Module):
    """The Gaussian context N(mean, cov) in R^d; a pytree.

    Args:
        mean: ``(d,)``.
        cov: ``(d, d)`` symmetric positive-definite covariance.

    Bad input raises a ``ValueError`` naming the argument: eagerly (shapes always; finiteness,
    symmetry up to 10³ ulp of its largest entry and positive-definiteness when the arrays are
    concrete), and under ``jit`` the value checks are attached with ``eqx.error_if``.
    """

    mean: Float[Array, " d"]
    cov: Float[Array, "d d"]

    def __init__(self, mean, cov):
        mean = jnp.asarray(mean)
        cov = jnp.asarray(cov)
        if mean.ndim != 1 or mean.shape[0] == 0:
            raise ValueError(f"GaussianMeasure: `mean` must have shape (d,) with d >= 1, got {mean.shape}.")
        d = mean.shape[0]
        if cov.shape != (d, d):
            raise ValueError(
                f"GaussianMeasure: `cov` must have shape (d, d) = ({d}, {d}) to match `mean`, got {cov.shape}."
            )
        dtype = jnp.result_type(mean, cov, float)
        mean, cov = mean.astype(dtype), cov.astype(dtype)
        tol = _symmetric_tolerance(dtype)
        if is_concrete(mean):
            check_finite("mean", mean)
        if is_concrete(cov):
            check_finite("cov", cov)
            c = np.asarray(cov, dtype=np.float64)
            if np.abs(c - c.T).max() > tol * max(np.abs(c).max(), np.finfo(np.float64).tiny):
                raise ValueError("GaussianMeasure: `cov` must be symmetric.")
            if np.linalg.eigvalsh(0.5 * (c + c.T)).min() <= 0:
                raise ValueError("GaussianMeasure: `cov` must be positive definite (its smallest eigenvalue is <= 0).")
        else:
            cov = eqx.error_if(cov, ~jnp.all(jnp.isfinite(cov)), "GaussianMeasure: `cov` contains non-finite values.")
            asym = jnp.max(jnp.abs(cov - cov.T)) > tol * jnp.max(jnp.abs(cov))
            cov = eqx.error_if(cov, asym, "GaussianMeasure: `cov` must be symmetric.")
            chol = jnp.linalg.cholesky(0.5 * (cov + cov.T))
            cov = eqx.error_if(cov, ~jnp.all(jnp.isfinite(chol)), "GaussianMeasure: `cov` must be positive definite.")
        if not is_concrete(mean):
            mean = eqx.error_if(
                mean, ~jnp.all(jnp.isfinite(mean)), "GaussianMeasure: `mean` contains non-finite values."
            )
        self.mean = mean
        self.cov = cov

    @classmethod
    def unchecked(cls, mean, cov) -> GaussianMeasure:
        """A measure from arrays without validation (the flow's own moments)."""
        template = cls(jnp.zeros((mean.shape[-1],), mean.dtype), jnp.eye(mean.shape[-1], dtype=mean.dtype))
        return eqx.tree_at(lambda g: (g.mean, g.cov), template, (mean, cov))

    @property
    def dim(self) -> int:
        """Ambient dimension d."""
        return self.mean.shape[-1]

    def sample(self, key, n: int, *, qmc: bool = False) -> Float[Array, "n d"]:
        """``(n, d)`` points: i.i.d. draws, or (``qmc=True``) scrambled-Sobol points through the
        inverse normal CDF (:func:`cfm_jax._qmc.sobol_normal`); both pure in ``key``."""
        if not isinstance(n, (int, np.integer)) or int(n) < 1:
            raise ValueError(f"`n` must be a positive int (number of samples), got {n!r}.")
        n = int(n)
        dtype = self.mean.dtype
        g = sobol_normal(key, n, self.dim, dtype) if qmc else jax.random.normal(key, (n, self.dim), dtype)
        return self.mean + g @ jnp.linalg.cholesky(self.cov).T


class GaussianSolution(eqx.Module):
    """Result of :func:`gaussian_flow`.

    Attributes:
        x1: final target tokens, shaped like ``x0``.
        context: the final context, a :class:`GaussianMeasure`.
        ss: depths of the saved states ``(S,)`` or None.
        xs: token trajectory ``(S,) + x0.shape`` or None.
        means: ``(S, d)`` context means, covs ``(S, d, d)`` context covariances, or None.
        num_steps: total steps taken.
    """

    x1: Array
    context: GaussianMeasure
    ss: Array | None = None
    xs: Array | None = None
    means: Array | None = None
    covs: Array | None = None
    num_steps: Array | None = None


def _check_inputs(model, x0, mu, steps, throw: bool):
    """Structural checks when traced; finite ``x0`` and parameters eagerly, and inside compiled code
    unless ``throw`` is False. Returns ``(model, x0, steps)``."""
    if not isinstance(model, AbstractCFM):
        raise ValueError(f"`model` must be a cfm_jax model (AbstractCFM), got {type(model).__name__}.")
    if not isinstance(mu, GaussianMeasure):
        raise ValueError(f"`mu` must be a GaussianMeasure, got {type(mu).__name__}.")
    x0 = jnp.asarray(x0)
    d = model.dim
    if x0.ndim not in (1, 2) or x0.shape[-1] != d:
        raise ValueError(f"`x0` must have shape (d,) or (B, d) with d = {d}, got {x0.shape}.")
    if not jnp.issubdtype(x0.dtype, jnp.floating):
        raise ValueError(f"`x0` must be a floating array, got dtype {x0.dtype}.")
    check_finite("x0", x0)
    if mu.dim != d:
        raise ValueError(f"`mu` has dimension {mu.dim} but the model has d = {d}.")
    L = model.num_layers
    steps = L if steps is None else static_int("steps", steps)
    if model.piecewise_constant and steps % L:
        raise ValueError(f"`steps`={steps} must be a multiple of the number of layers L={L}.")
    if throw:
        x0, model = finite("x0", x0), finite_params(model)
    return model, x0, steps


def _euler_step(field, params, state, h):
    """One exact Euler step of the moments and the tokens; also returns M (for the adjoint)."""
    x, m, S = state
    c, M = field.gaussian_affine(params, m, S)
    G = jnp.eye(m.shape[0], dtype=m.dtype) + h * M
    S = G @ S @ G.T
    return (x + h * (c + x @ M.T), m + h * (c + M @ m), 0.5 * (S + S.T)), M


def _recursion(model, state, steps: int, save_steps: bool):
    """The moment recursion over [0, 1]: ``(final, per-step states or None, per-step M (steps, d, d))``.

    Piecewise-constant paths: a scan over layers of a scan over that layer's k = steps/L steps.
    Other paths: one scan over the steps, θ taken at the start of each step.
    """
    field = model.field
    dtype = state[1].dtype
    h = jnp.asarray(1.0 / steps, dtype)

    def step_with(params):
        def step(st, _):
            new, M = _euler_step(field, params, st, h)
            return new, (new if save_steps else None, M)

        return step

    if model.piecewise_constant:
        L = model.num_layers
        k = steps // L

        def layer(st, l):
            return jax.lax.scan(step_with(model.layer_params(l)), st, None, length=k)

        final, (ys, Ms) = jax.lax.scan(layer, state, jnp.arange(L))
        ys = None if ys is None else jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), ys)
        Ms = Ms.reshape((-1,) + Ms.shape[2:])
    else:

        def one(st, i):
            return step_with(model.params_at(i.astype(dtype) * h))(st, None)

        final, (ys, Ms) = jax.lax.scan(one, state, jnp.arange(steps))
    return final, ys, Ms


def _moment_rhs(field, params, state):
    x, m, S = state
    c, M = field.gaussian_affine(params, m, S)
    MS = M @ S
    return c + x @ M.T, c + M @ m, MS + MS.T


def _ode(model, state, *, solver, steps, stepsize_controller, save_steps, max_steps):
    """The moment ODE through diffrax, one solve per layer (no step straddles a parameter jump)."""
    field = model.field
    dtype = state[1].dtype
    term = diffrax.ODETerm(lambda s, st, args: _moment_rhs(field, model.params_at(s) if args is None else args, st))

    def solve(t0, t1, k, y0, args):
        ys, ts, n = solve_segment(
            term,
            solver,
            t0,
            t1,
            k,
            y0,
            args,
            stepsize_controller=stepsize_controller,
            max_steps=max_steps,
            save_steps=save_steps,
        )
        return jax.tree.map(lambda a: a[-1], ys), ys, ts, n

    if model.piecewise_constant:
        L = model.num_layers

        def layer(st, l):
            t0, t1 = l.astype(dtype) / L, (l + 1).astype(dtype) / L
            final, ys, ts, n = solve(t0, t1, steps // L, st, model.layer_params(l))
            return final, (ys, ts, n)

        final, (ys, ts, n) = jax.lax.scan(layer, state, jnp.arange(L))
        assert ys is not None and ts is not None
        ys = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), ys)
        return final, ys, ts.reshape(-1), n.sum()
    return solve(jnp.asarray(0.0, dtype), jnp.asarray(1.0, dtype), steps, state, None)


def _is_exact(solver, stepsize_controller) -> bool:
    fixed = stepsize_controller is None or isinstance(stepsize_controller, (diffrax.ConstantStepSize, diffrax.StepTo))
    return (solver is None or type(solver) is diffrax.Euler) and fixed


def gaussian_flow(
    model: AbstractCFM,
    x0: Float[Array, "*B d"],
    mu: GaussianMeasure,
    *,
    solver: diffrax.AbstractSolver | None = None,
    steps: int | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    saveat: SaveAt = SaveAt(),
    max_steps: int = 4096,
    throw: bool = True,
) -> GaussianSolution:
    """The infinite-context flow of tokens ``x0`` through the Gaussian context ``mu`` (module docstring).

    Args:
        model: any :class:`~cfm_jax.AbstractCFM` whose field has a Gaussian closed form
            (attention, an MLP with ``activation=cfm_jax.linear``, their sums); others
            raise a ``TypeError`` naming the field.
        x0: ``(d,)`` or ``(B, d)`` target tokens.
        mu: the initial context, a :class:`GaussianMeasure`.
        solver: ``None`` or ``diffrax.Euler()`` with fixed steps: the exact moment recursion (the
            residual network on the infinite context); any other diffrax solver integrates the
            moment ODE, one solve per layer.
        steps: total steps over [0, 1] (default one per layer; a multiple of L for
            piecewise-constant paths); stepsize_controller, max_steps: as in ``cfm_jax.forward``.
        saveat: :class:`~cfm_jax.SaveAt` (layer boundaries or every step).
        throw: check inside compiled code that ``x0`` and the parameters are finite (as
            ``cfm_jax.forward``; ``False`` leaves the checks out).

    Returns:
        :class:`GaussianSolution`. Differentiable by ``jax.grad`` in the model, ``x0`` and ``mu``.
    """
    model, x0, steps = _check_inputs(model, x0, mu, steps, throw)
    if solver is not None and not isinstance(solver, diffrax.AbstractSolver):
        raise ValueError(f"`solver` must be a diffrax solver, got {solver!r}.")
    if not isinstance(saveat, SaveAt):
        raise ValueError(f"`saveat` must be a cfm_jax.SaveAt, got {saveat!r}.")
    if saveat.layers and not saveat.steps and not model.piecewise_constant:
        raise ValueError("`saveat`=SaveAt(layers=True) needs a piecewise-constant path; use SaveAt(steps=True).")
    exact = _is_exact(solver, stepsize_controller)
    if (
        saveat.steps
        and not exact
        and stepsize_controller is not None
        and not isinstance(stepsize_controller, (diffrax.ConstantStepSize, diffrax.StepTo))
    ):
        raise ValueError("`saveat`=SaveAt(steps=True) needs fixed steps; use SaveAt(layers=True) with adaptive solves.")
    dtype = jnp.result_type(x0, mu.mean, *jax.tree.leaves(model.stacked_params()))
    single = x0.ndim == 1
    state0 = (jnp.atleast_2d(x0).astype(dtype), mu.mean.astype(dtype), mu.cov.astype(dtype))
    save = saveat.steps or saveat.layers
    if exact:
        final, ys, _ = _recursion(model, state0, steps, save)
        ts = jnp.arange(1, steps + 1, dtype=dtype) / steps if save else None
        num_steps = jnp.asarray(steps)
    else:
        final, ys, ts, num_steps = _ode(
            model,
            state0,
            solver=solver,
            steps=steps,
            stepsize_controller=stepsize_controller,
            save_steps=saveat.steps,
            max_steps=max_steps,
        )
    ss = xs = means = covs = None
    if save:
        assert ys is not None and ts is not None
        if exact and not saveat.steps:  # keep the layer boundaries only
            k = steps // model.num_layers
            ys = jax.tree.map(lambda a: a[k - 1 :: k], ys)
            ts = ts[k - 1 :: k]
        ss = jnp.concatenate([jnp.zeros((1,), dtype), ts])
        xs, means, covs = (jnp.concatenate([a0[None], a], axis=0) for a0, a in zip(state0, ys))
        if single:
            xs = xs[:, 0]
    x1, m1, S1 = final
    return GaussianSolution(
        x1=x1[0] if single else x1,
        context=GaussianMeasure.unchecked(m1, S1),
        ss=ss,
        xs=xs,
        means=means,
        covs=covs,
        num_steps=num_steps,
    )


def gaussian_token_adjoint(
    model: AbstractCFM,
    x0: Float[Array, "*B d"],
    mu: GaussianMeasure,
    y: Float[Array, "*B d"],
    *,
    loss: Callable | None = None,
    steps: int | None = None,
    saveat: SaveAt = SaveAt(layers=True),
    throw: bool = True,
) -> tuple[Array, Array]:
    """The token covector p_s = ∂ℓ/∂x_s of the infinite-context (Gaussian) residual network.

    p at the last depth is ∇_{x_1} ``loss(x1, y)`` (default the batch mean of ½‖x_1 − y‖², the
    convention of :func:`cfm_jax.adjoint_trajectories`), then p_i = (I + h M_i)ᵀ p_{i+1} back
    through the exact Euler recursion (the context is the population law, which the tokens do
    not move). Returns ``(ss (S,), ps (S,) + x0.shape)`` at the depths of ``saveat`` (layer
    boundaries by default, every step with ``SaveAt(steps=True)``). ``throw``: as in
    :func:`gaussian_flow` (also for ``y``).
    """
    model, x0, steps = _check_inputs(model, x0, mu, steps, throw)
    y = jnp.asarray(y)
    if y.shape != x0.shape:
        raise ValueError(f"`y` must have the shape of `x0` {x0.shape}, got {y.shape}.")
    if not isinstance(saveat, SaveAt) or not (saveat.layers or saveat.steps):
        raise ValueError(f"`saveat` must be SaveAt(layers=True) or SaveAt(steps=True), got {saveat!r}.")
    if saveat.layers and not saveat.steps and not model.piecewise_constant:
        raise ValueError("`saveat`=SaveAt(layers=True) needs a piecewise-constant path; use SaveAt(steps=True).")
    check_finite("y", y)
    if throw:
        y = finite("y", y)
    dtype = jnp.result_type(x0, mu.mean, *jax.tree.leaves(model.stacked_params()))
    single = x0.ndim == 1
    x, yb = jnp.atleast_2d(x0).astype(dtype), jnp.atleast_2d(y).astype(dtype)

    def mean_squared(a, b):
        return 0.5 * jnp.mean(jnp.sum((a - b) ** 2, axis=-1))

    objective = mean_squared if loss is None else loss

    (x1, _, _), _, Ms = _recursion(model, (x, mu.mean.astype(dtype), mu.cov.astype(dtype)), steps, False)
    p1 = jax.grad(objective)(x1, yb)
    h = 1.0 / steps

    def back(p, M):
        p = p + h * p @ M  # (I + hM)ᵀ p, row by row
        return p, p

    _, ps = jax.lax.scan(back, p1, Ms, reverse=True)  # ps[i] = p at depth i/steps
    ps = jnp.concatenate([ps, p1[None]], axis=0)
    ss = jnp.arange(steps + 1, dtype=dtype) / steps
    if not saveat.steps:
        k = steps // model.num_layers
        ps, ss = ps[::k], ss[::k]
    return ss, (ps[:, 0] if single else ps)


__all__ = ["GaussianMeasure", "GaussianSolution", "gaussian_flow", "gaussian_token_adjoint"]
