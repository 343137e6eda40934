"""Covariance kernel of the random-MLP common noise (docs/theory.md, docs/stochastic.md).

A random MLP ξ(x) = m^{-1/2} A σ(B x + c) + b, A ~ N(0, s_a²), B ~ N(0, s_b²), c ~ N(0, s_c²) and
an output bias b ~ N(0, s_w² I_d), has E[ξ(x) ξ(y)ᵀ] = κ(<x, y>) I_d for every width m, with

    κ(ρ) = s_a² E[σ(u) σ(u')] + s_w²,   Var u = Var u' = v := s_b² + s_c²,   Cov(u, u') = s_b² ρ + s_c².

By Price's theorem κ'(ρ) = s_a² s_b² E[σ'(u) σ'(u')], so κ(1) = s_a² E σ(u)² + s_w²,
κ'(1) = s_a² s_b² E σ'(u)² (the output bias shifts κ by a constant and leaves κ' alone).

The second paper's MLP G(y) = m^{-1/2} W σ(U y/√d + b_U) + b_W with standard normal W, U,
b_U ~ N(0, σ_U²), b_W ~ N(0, σ_W²) is :meth:`NoiseKernel.paper`: s_a = 1, s_b = 1/√d, s_c = σ_U,
s_w = σ_W. Its synchronisation theorem uses

    λ̄ = (d − 1) κ'(1) − (d − 3) κ(1)                                  (:meth:`NoiseKernel.dissipation`)
    λ̄' = −inf_{u ∈ [−1, 1]} F(u),  F(u) = β e^{βu} G(u) / (e^β − e^{βu}),   (:meth:`NoiseKernel.energy_rate`)
    G(u) = κ(u)(d − 2 + u² − βu(1 − u²)) + κ(1)(β(1 − u²) − (d − 1)u),

with F(1) := lim_{u→1} F(u) = −λ̄. Near u = 1 both G and e^β − e^{βu} vanish; with r = 1 − u and
the cancellation-free deficit D(r) = κ(1) − κ(1 − r),

    G(1 − r)/r = κ(1)(d − 3 + r + βr(2 − r)) − (D(r)/r)(d − 2 + u² − βu(1 − u²)),
    F(1 − r) = e^{−βr} · (G/r) · βr/(1 − e^{−βr}),

which has full relative precision for every r ∈ [0, 2] (:meth:`NoiseKernel.energy_rate_function`).

Closed forms: ReLU (arc-cosine kernel at correlation c = (s_b² ρ + s_c²)/v, with or without bias)
and the linear activation. Any other activation uses a tensor Gauss–Hermite rule; because the
sampler evaluates κ on N² pairs per step, those kernels are tabulated once on a grid of ρ and
evaluated by cubic Hermite interpolation (values *and* slopes from quadrature, so κ(1) and
κ'(1) — which fix the Lyapunov exponent — are reproduced exactly at the grid end).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._random import as_key

#: How :class:`NoiseKernel` evaluates κ: closed form for relu/linear and an interpolated table
#: otherwise ("auto"), direct Gauss–Hermite at every call ("quadrature"), or always the table.
KernelMethod = Literal["auto", "quadrature", "table"]

#: The activations of the second paper (:meth:`NoiseKernel.paper`).
PAPER_ACTIVATIONS = ("relu", "silu", "sigmoid", "tanh")

#: The activations known by name, a closed set (closed forms exist for "relu" and "linear").
Activation = Literal["relu", "silu", "linear", "tanh", "gelu", "sigmoid", "erf", "sin"]

#: Each activation's function.
ACTIVATIONS: dict[str, Callable] = {
    "relu": jax.nn.relu,
    "silu": jax.nn.silu,
    "linear": lambda u: u,
    "tanh": jnp.tanh,
    "gelu": jax.nn.gelu,
    "sigmoid": jax.nn.sigmoid,
    "erf": jax.scipy.special.erf,
    "sin": jnp.sin,
}
_CLOSED_FORM = ("relu", "linear")


def _get_activation(name: Activation) -> Callable:
    """The activation function called ``name`` (see :data:`ACTIVATIONS`)."""
    if name not in ACTIVATIONS:
        raise ValueError(f"`activation` must be one of {sorted(ACTIVATIONS)}, got {name!r}.")
    return ACTIVATIONS[name]


def _compiled(method):
    """``method(self, x, *static)`` as one compiled program per shape of ``x``, which it receives as a
    floating array (made one first: a Python float would be a static argument, compiled once per
    value). Called eagerly these evaluations would otherwise dispatch one XLA program per operation,
    each compiled at every new shape."""
    jitted = eqx.filter_jit(method)

    @functools.wraps(method)
    def wrapper(self, x, *args, **kwargs):
        return jitted(self, jnp.asarray(x, dtype=jnp.result_type(x, float)), *args, **kwargs)

    return wrapper


def _gauss_hermite(order: int):
    """Probabilists' Gauss–Hermite nodes and weights normalised to a N(0, 1) expectation."""
    z, w = np.polynomial.hermite_e.hermegauss(order)
    return z, w / w.sum()


class NoiseKernel(eqx.Module):
    """κ for a random MLP with activation ``activation`` and weight scales ``s_a, s_b, s_c, s_w``.

    Args:
        activation: a name in :data:`ACTIVATIONS`.
        s_a: standard deviation of the output weights.
        s_b: standard deviation of the input weights.
        s_c: standard deviation of the input biases.
        s_w: standard deviation of the output bias b (adds $s_w^2$ to κ; 0 = no output bias).
        method: ``"auto"`` (closed form for relu/linear, interpolated table otherwise),
            ``"quadrature"`` (direct Gauss–Hermite at every call: slow, an independent path
            for tests) or ``"table"``.
        order: Gauss–Hermite order per dimension. The default 64 resolves the moments ($κ'(1) =
            s_a^2 s_b^2 E σ'(u)^2$, …) to ~1e-15 for sigmoid and SiLU up to a pre-activation variance
            $v = s_b^2 + s_c^2$ of 2.3 (2e-7 at v = 4), but tanh (poles at ±iπ/2) only to 3e-7 at
            v ≈ 1, 7e-6 at 1.5, 2e-4 at 2.3 and 4e-3 at 4 (relative): raise it (128, 256) for tanh
            with large v.
        grid: number of table nodes on [-1, 1] (clustered at ±1).

    ``kernel(rho)`` evaluates κ elementwise; ``kernel.derivative(rho)`` evaluates κ'.
    The second paper's parametrisation is :meth:`paper`.
    """

    activation: Activation = eqx.field(static=True)
    s_a: float = eqx.field(static=True)
    s_b: float = eqx.field(static=True)
    s_c: float = eqx.field(static=True)
    s_w: float = eqx.field(static=True)
    method: KernelMethod = eqx.field(static=True)
    order: int = eqx.field(static=True)
    _moments: tuple = eqx.field(static=True)  # (κ(1), κ'(1), κ''(1)) as Python floats
    _nodes: Array | None
    _values: Array | None
    _slopes: Array | None

    def __init__(
        self,
        activation: Activation = "relu",
        s_a: float = 1.0,
        s_b: float = 1.0,
        s_c: float = 0.0,
        *,
        s_w: float = 0.0,
        method: KernelMethod = "auto",
        order: int = 64,
        grid: int = 257,
    ):
        _get_activation(activation)
        for name, val in (("s_a", s_a), ("s_b", s_b), ("s_c", s_c), ("s_w", s_w)):
            if not (math.isfinite(float(val)) and float(val) >= 0):
                raise ValueError(f"`{name}` must be finite and >= 0, got {val!r}.")
        if float(s_b) == 0 and float(s_c) == 0:
            raise ValueError("`s_b` and `s_c` cannot both be 0 (the MLP input would vanish).")
        if method not in ("auto", "quadrature", "table"):
            raise ValueError(f"`method` must be 'auto', 'quadrature' or 'table', got {method!r}.")
        if int(order) < 2 or int(grid) < 3:
            raise ValueError(f"`order` must be >= 2 and `grid` >= 3, got {order!r}, {grid!r}.")
        self.activation = activation
        self.s_a, self.s_b, self.s_c, self.s_w = float(s_a), float(s_b), float(s_c), float(s_w)
        self.method, self.order = method, int(order)
        with jax.ensure_compile_time_eval():  # plain floats even if built under a trace
            self._moments = self._compute_moments()
        self._nodes = self._values = self._slopes = None  # every field set: the quadratures take self
        if method == "table" or (method == "auto" and activation not in _CLOSED_FORM):
            # Chebyshev–Lobatto nodes: dense near ρ = ±1 where the kernel is least smooth.
            nodes = -np.cos(np.linspace(0.0, np.pi, int(grid)))
            nodes[0], nodes[-1] = -1.0, 1.0
            table = jnp.asarray(nodes)
            values, slopes = self.quadrature(table), self.quadrature_derivative(table)
            self._nodes, self._values, self._slopes = table, values, slopes

    # ----------------------------------------------------------------- basic quantities
    @property
    def variance(self) -> float:
        """$v = s_b^2 + s_c^2$, the variance of each pre-activation."""
        return self.s_b**2 + self.s_c**2

    @property
    def closed_form(self) -> bool:
        return self.activation in _CLOSED_FORM and self.method == "auto"

    def _correlation(self, rho):
        return (self.s_b**2 * rho + self.s_c**2) / self.variance

    @_compiled
    def __call__(self, rho: Float[ArrayLike, ...]) -> Float[Array, ...]:
        """κ(ρ), elementwise; ρ is clipped to [-1, 1]."""
        rho = jnp.clip(rho, -1.0, 1.0)
        if self.method == "quadrature":
            return self.quadrature(rho)
        if self._nodes is not None:
            return _hermite_interp(rho, self._nodes, self._values, self._slopes)
        c = self._correlation(rho)
        if self.activation == "linear":
            return self.s_a**2 * self.variance * c + self.s_w**2
        # ReLU: arc-cosine kernel of degree 1 at correlation c.
        c = jnp.clip(c, -1.0, 1.0)
        return (self.s_a**2 * self.variance / (2 * jnp.pi)) * (
            jnp.sqrt(jnp.maximum(1 - c**2, 0.0)) + (jnp.pi - jnp.arccos(c)) * c
        ) + self.s_w**2

    @_compiled
    def derivative(self, rho: Float[ArrayLike, ...]) -> Float[Array, ...]:
        """κ'(ρ), elementwise."""
        rho = jnp.clip(rho, -1.0, 1.0)
        if self.method == "quadrature" or self._nodes is not None:
            if self.method == "quadrature":
                return self.quadrature_derivative(rho)
            return _hermite_interp_slope(rho, self._nodes, self._values, self._slopes)
        if self.activation == "linear":
            return jnp.full_like(rho, self.s_a**2 * self.s_b**2)
        c = jnp.clip(self._correlation(rho), -1.0, 1.0)
        return (self.s_a**2 * self.s_b**2 / (2 * jnp.pi)) * (jnp.pi - jnp.arccos(c))

    @_compiled
    def deficit(self, r: Float[ArrayLike, ...]) -> Float[Array, ...]:
        """κ(1) − κ(1 − r) for r = ½‖x − y‖² ∈ [0, 2], with full relative precision as r → 0.

        Closed forms are rearranged to avoid the cancellation κ(1) − κ(ρ); other kernels use
        κ'(1) r − ½κ''(1) r² below r = 1e-3 (relative error O(r²)).
        """
        r = jnp.clip(r, 0.0, 2.0)
        if self.closed_form and self.activation == "linear":
            return self.s_a**2 * self.s_b**2 * r
        if self.closed_form:
            # c = 1 − q: π(1−c) − √(1−c²) + c·arccos c with arccos(1−q) = 2 arcsin √(q/2).
            q = jnp.clip(self.s_b**2 * r / self.variance, 0.0, 2.0)
            return (self.s_a**2 * self.variance / (2 * jnp.pi)) * (
                jnp.pi * q - jnp.sqrt(q * (2 - q)) + 2 * (1 - q) * jnp.arcsin(jnp.sqrt(q / 2))
            )
        taylor = self.dkappa1 * r - 0.5 * self.kappa2 * r**2
        return jnp.where(r < 1e-3, taylor, self.kappa1 - self(1.0 - r))

    def _compute_moments(self):
        if self.closed_form:
            half = 0.5 if self.activation == "relu" else 1.0
            k2 = 0.0 if self.activation == "linear" else float("inf")
            return (self.s_a**2 * self.variance * half + self.s_w**2, self.s_a**2 * self.s_b**2 * half, k2)
        z, w = _gauss_hermite(self.order)
        z = jnp.asarray(z, jax.dtypes.canonicalize_dtype(jnp.float64))  # float64 where enabled
        u = math.sqrt(self.variance) * z
        sig = _get_activation(self.activation)
        d1 = jax.vmap(jax.grad(sig))
        d2 = jax.vmap(jax.grad(jax.grad(sig)))
        e = lambda f: float(np.sum(w * np.asarray(f(u), np.float64) ** 2))  # noqa: E731
        return (
            self.s_a**2 * e(sig) + self.s_w**2,
            self.s_a**2 * self.s_b**2 * e(d1),
            self.s_a**2 * self.s_b**4 * e(d2),
        )

    @property
    def kappa1(self) -> float:
        """$κ(1) = s_a^2 E σ(u)^2 + s_w^2$."""
        return self._moments[0]

    @property
    def dkappa1(self) -> float:
        """$κ'(1) = s_a^2 s_b^2 E σ'(u)^2$."""
        return self._moments[1]

    @property
    def kappa2(self) -> float:
        """$κ''(1) = s_a^2 s_b^4 E σ''(u)^2$ (infinite for ReLU: its κ has an $r^{3/2}$ term)."""
        return self._moments[2]

    def lyapunov(self, d: int) -> float:
        """Top Lyapunov exponent of the noise flow on $S^{d-1}$: $½[(d−3)κ'(1) − (d−1)κ(1)]$."""
        return _lyapunov_exponent(self, d)

    @classmethod
    def paper(cls, activation: Activation, dim: int, sigma_u: float = 0.0, sigma_w: float = 0.0) -> NoiseKernel:
        """The second paper's MLP $G(y) = m^{-1/2} W σ(U y/√d + b_U) + b_W$ on $S^{d−1}$ (d = ``dim``).

        W, U standard normal, $b_U ∼ N(0, σ_U^2 I_m)$, $b_W ∼ N(0, σ_W^2 I_d)$: $s_a = 1$, $s_b = 1/√d$,
        $s_c$ = ``sigma_u``, $s_w$ = ``sigma_w``; so $κ(1) = E σ(X/√d + σ_U ξ)^2 + σ_W^2$ and
        $κ'(1) = (1/d) E σ'(X/√d + σ_U ξ)^2$ with X, ξ independent standard normals.
        ``activation``: one of :data:`PAPER_ACTIVATIONS` (any name in :data:`ACTIVATIONS` works).
        """
        if isinstance(dim, bool) or int(dim) != dim or int(dim) < 2:
            raise ValueError(f"`dim` must be an integer >= 2, got {dim!r}.")
        for name, val in (("sigma_u", sigma_u), ("sigma_w", sigma_w)):
            if not (math.isfinite(float(val)) and float(val) >= 0):
                raise ValueError(f"`{name}` must be finite and >= 0, got {val!r}.")
        return cls(activation, 1.0, 1.0 / math.sqrt(int(dim)), float(sigma_u), s_w=float(sigma_w))

    def dissipation(self, d: int) -> float:
        """λ̄ = (d − 1) κ'(1) − (d − 3) κ(1) (Assumption 1 of the paper asks λ̄ < 0); λ₁ = λ̄/2 − κ(1) − κ'(1)."""
        _check_dim(d)
        return float((d - 1) * self.dkappa1 - (d - 3) * self.kappa1)

    def energy_rate_function(self, u: Float[Array, ...], d: int, beta: float) -> Float[Array, ...]:
        """F(u) of the energy theorem (module docstring), robust near u = 1 where F → −λ̄."""
        return _energy_rate_function(self, u, d, beta)

    def energy_rate(self, d: int, beta: float) -> float:
        r"""$\bar λ' = −\inf_{u ∈ [−1, 1]} F(u)$: $E[E_β(μ_t)] ≤ \exp((ε + \bar λ') t)\, E[E_β(μ_0)]$."""
        return _energy_rate(self, d, beta)

    def moment_rate(self, d: int, p: float) -> float:
        r"""Exponential rate of $E‖x − y‖^{2p}$ for two nearby tokens under the noise flow.

        With $r = 1 − ⟨x, y⟩$, $dr = a r\, dt + σ r\, dB$ near the diagonal, $a = (d−1)κ'(1) − (d−3)κ(1)$,
        $σ^2 = 4(κ(1) + κ'(1))$; so $E r^p$ grows at $p[a + 2(p − 1)(κ(1) + κ'(1))]$ and the
        rate of log r is 2λ₁ (the p → 0 limit).
        """
        k1, dk1 = self.kappa1, self.dkappa1
        a = (d - 1) * dk1 - (d - 3) * k1
        return float(p * (a + 2 * (p - 1) * (k1 + dk1)))

    # ------------------------------------------------------------------- quadrature paths
    @_compiled
    def quadrature(self, rho: Float[Array, ...], order: int | None = None) -> Float[Array, ...]:
        """κ(ρ) by a tensor Gauss–Hermite rule (any activation; slow: order² points per ρ)."""
        return self._bivariate(rho, _get_activation(self.activation), self.s_a**2, order) + self.s_w**2

    @_compiled
    def quadrature_derivative(self, rho, order: int | None = None):
        """$κ'(ρ) = s_a^2 s_b^2 E[σ'(u) σ'(u')]$ by the same rule (Price's theorem)."""
        dsig = jnp.vectorize(jax.grad(_get_activation(self.activation)))
        return self._bivariate(rho, dsig, self.s_a**2 * self.s_b**2, order)

    def _bivariate(self, rho, f, scale, order):
        z, w = _gauss_hermite(order or self.order)
        z1 = jnp.asarray(z, rho.dtype)[:, None]
        z2 = jnp.asarray(z, rho.dtype)[None, :]
        ww = jnp.asarray(np.outer(w, w), rho.dtype)
        c = jnp.clip(self._correlation(rho), -1.0, 1.0)[..., None, None]
        sd = math.sqrt(self.variance)
        u = sd * z1
        u2 = sd * (c * z1 + jnp.sqrt(jnp.maximum(1 - c**2, 0.0)) * z2)
        return scale * jnp.sum(ww * f(u) * f(u2), axis=(-2, -1))


def _check_dim(d):
    if isinstance(d, bool) or int(d) != d or int(d) < 2:
        raise ValueError(f"`d` must be an integer >= 2, got {d!r}.")


def _lyapunov_exponent(kernel: NoiseKernel, d: int) -> float:
    """λ₁ = ½[(d − 3) κ'(1) − (d − 1) κ(1)] (docs/theory.md; checked by :func:`estimate_lyapunov`)."""
    _check_dim(d)
    return 0.5 * ((d - 3) * kernel.dkappa1 - (d - 1) * kernel.kappa1)


def _energy_rate_function(kernel: NoiseKernel, u: Float[Array, ...], d: int, beta: float) -> Float[Array, ...]:
    """F(u) = β e^{βu} G(u)/(e^β − e^{βu}) elementwise on [−1, 1], F(1) = −λ̄ (module docstring).

    Evaluated through r = 1 − u and ``kernel.deficit`` so that no difference of nearly equal
    numbers is formed: relative accuracy is that of the kernel for every u, including u → 1.
    """
    _check_dim(d)
    if not (math.isfinite(float(beta)) and float(beta) >= 0):
        raise ValueError(f"`beta` must be finite and >= 0, got {beta!r}.")
    return _energy_rate_values(kernel, u, jnp.asarray(int(d)), jnp.asarray(float(beta)))


@_compiled
def _energy_rate_values(kernel: NoiseKernel, u, d, beta):
    # d and β arrive as arrays, so one program serves every d and β (as Python numbers they would be
    # static: a program per value); taken in u's precision, as Python numbers would be
    d, beta = d.astype(u.dtype), beta.astype(u.dtype)
    u = jnp.clip(u, -1.0, 1.0)
    r = 1.0 - u
    k1 = kernel.kappa1
    safe = jnp.where(r > 0, r, 1.0)
    slope = jnp.where(r > 0, kernel.deficit(r) / safe, kernel.dkappa1)  # D(r)/r → κ'(1)
    s = r * (2.0 - r)  # 1 − u²
    g_over_r = k1 * (d - 3 + r + beta * r * (2.0 - r)) - slope * (d - 2 + u * u - beta * u * s)
    x = beta * r
    safe_x = jnp.where(x > 0, x, 1.0)
    ratio = jnp.where(x > 0, safe_x / -jnp.expm1(-safe_x), 1.0)  # βr/(1 − e^{−βr}) → 1
    return jnp.exp(-x) * g_over_r * ratio


def _energy_rate(kernel: NoiseKernel, d: int, beta: float, *, grid: int = 4001) -> float:
    """λ̄' = −inf_{u ∈ [−1, 1]} F(u): a dense grid in r = 1 − u (uniform plus geometric near
    r = 0), then a bounded Brent refinement around the best node (relative accuracy ~1e-9)."""
    from scipy.optimize import minimize_scalar

    with jax.ensure_compile_time_eval():
        r = np.unique(np.concatenate([[0.0], np.linspace(0.0, 2.0, int(grid)), np.geomspace(1e-9, 1e-2, 200)]))
        f = np.asarray(_energy_rate_function(kernel, jnp.asarray(1.0 - r), d, beta), dtype=np.float64)
        k = int(np.argmin(f))
        lo, hi = r[max(k - 1, 0)], r[min(k + 1, r.size - 1)]
        best = float(f[k])
        if hi > lo:
            res = minimize_scalar(
                lambda t: float(_energy_rate_function(kernel, jnp.asarray(1.0 - t), d, beta)),
                bounds=(lo, hi),
                method="bounded",
                options={"xatol": 1e-12 * max(1.0, hi)},
            )
            best = min(best, float(res.fun))  # pyright: ignore[reportAttributeAccessIssue]  (scipy's OptimizeResult)
    return -best


def kappa_monte_carlo(key, kernel: NoiseKernel, rho, samples: int = 100_000):
    """Monte Carlo estimate of κ(ρ) from the pre-activations (mean and standard error).

    ``rho``: ``(K,)``. Returns two ``(K,)`` arrays.
    """
    key = as_key(key, "key")
    if isinstance(samples, bool) or int(samples) != samples or int(samples) < 2:
        raise ValueError(f"`samples` must be an integer >= 2, got {samples!r}.")
    return _monte_carlo(kernel, jnp.atleast_1d(jnp.asarray(rho, dtype=float)), key, int(samples))


@eqx.filter_jit
def _monte_carlo(kernel: NoiseKernel, rho, key, samples: int):
    sig = _get_activation(kernel.activation)
    k1, k2 = jax.random.split(key)
    z1 = jax.random.normal(k1, (samples, 1), rho.dtype)
    z2 = jax.random.normal(k2, (samples, 1), rho.dtype)
    c = jnp.clip(kernel._correlation(rho), -1.0, 1.0)[None]
    sd = math.sqrt(kernel.variance)
    prod = kernel.s_a**2 * sig(sd * z1) * sig(sd * (c * z1 + jnp.sqrt(1 - c**2) * z2)) + kernel.s_w**2
    return prod.mean(0), prod.std(0) / math.sqrt(samples)


def _locate(rho, nodes):
    nodes = nodes.astype(rho.dtype)  # a float64 table must not promote float32 states
    i = jnp.clip(jnp.searchsorted(nodes, rho, side="right") - 1, 0, nodes.shape[0] - 2)
    x0, x1 = nodes[i], nodes[i + 1]
    h = x1 - x0
    return i, (rho - x0) / h, h


def _hermite_interp(rho, nodes, values, slopes):
    i, t, h = _locate(rho, nodes)
    values, slopes = values.astype(rho.dtype), slopes.astype(rho.dtype)
    t2, t3 = t * t, t * t * t
    h00, h10, h01, h11 = 2 * t3 - 3 * t2 + 1, t3 - 2 * t2 + t, -2 * t3 + 3 * t2, t3 - t2
    return h00 * values[i] + h10 * h * slopes[i] + h01 * values[i + 1] + h11 * h * slopes[i + 1]


def _hermite_interp_slope(rho, nodes, values, slopes):
    i, t, h = _locate(rho, nodes)
    values, slopes = values.astype(rho.dtype), slopes.astype(rho.dtype)
    t2 = t * t
    d00, d10, d01, d11 = 6 * t2 - 6 * t, 3 * t2 - 4 * t + 1, -6 * t2 + 6 * t, 3 * t2 - 2 * t
    return (d00 * values[i] + d01 * values[i + 1]) / h + d10 * slopes[i] + d11 * slopes[i + 1]
