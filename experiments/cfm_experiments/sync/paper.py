"""Part ``paper`` (optional): the second paper's appendix grid, its kernel table and its theorem's bound.

The discrete model with N = 64 tokens i.i.d. uniform on S^{d−1}, L = 150 layers, T = 5, β = 1,
the paper's MLP G(y) = m^{-1/2} W σ(U y/√d + b_U) + b_W (``NoiseKernel.paper``), σ_U = σ_W = σ,
softmax attention with Q = K = I and V = s·I for the attention scale s ∈ {1, 0, −1}. Each cell
(activation, d, σ, s) is one row holding, every 5 layers, quantiles of the pairwise cosine
similarities (pooled over realisations), the paper's energy E_β(X_ℓ) = ½∬(e^β − e^{β⟨x,y⟩}) of
every realisation with its mean and quantiles, and the exponential rate of E[E_β] fitted over
t ∈ [0, T] with its bootstrap interval over realisations (:func:`decay_rate`). Rows of a second
kind hold Assumption 2's ε for each attention scale and d (``attention_epsilon``: a lower
estimate; 0 without attention).

The paper does not state the MLP width m: the grid uses ``--width`` (256) and reruns a few cells
(d = 64, σ = 0.1, attention +1) at two other widths. ``--quick``: d = 16, σ = 0.1, N = 16, L = 30,
R = 4 runs, widths 16 and 64 for the check.

**Claims.** (1) The theorem, E[E_β(μ_t)] <= exp((ε + λ̄')t) E[E_β(μ_0)] where Assumption 1
holds (λ̄ < 0, G not odd): *holds* when every such cell's mean energy stays under the bound at
every saved layer and its rate's whole interval lies under ε + λ̄'; *not observed at these
sizes* when some cell's whole interval lies above (not *refuted*: ε is a lower estimate, so the
bound tested is below the theorem's, and the model is the discrete one, not the limit SDE);
*undecided* otherwise (*not measured* without such a cell). (2) The energy curves do not depend on m (G's
covariance is κ at every width): the rate differences between widths, paired over realisations
(the same starts), with the coverage rule of :mod:`.common`. (3) A code check: the grid's ReLU
λ₁ and λ̄ equal the paper's closed forms −1/(2d) − 3σ²(d−1)/4 and 1/d − 3σ²(d−3)/2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from cfm_jax import compiled
from cfm_jax.stats import Interval, bootstrap
from cfm_jax.stochastic import (
    NoiseKernel,
    SphereAttention,
    StochasticTransformer,
    attention_epsilon,
    energy_deficit,
    pairwise_cosines,
    simulate_many,
)

from ..declarations.sync import PAPER
from ..protocol import Part, Settings, Summary
from ..verdicts import CODE_PASSED
from .common import random_starts
from .paper_figures import SCALES, activation_figure, width_figure
from .paper_summary import (
    bound_claim,
    comparison,
    comparison_lines,
    kernel_lines,
    kernel_table,
    log_mean_slope,
    relu_claim,
    width_checks,
    width_claim,
    width_lines,
)

ACTIVATIONS = ("relu", "silu", "sigmoid", "tanh", "none")
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
ENERGY_QUANTILES = (0.1, 0.5, 0.9)
SAVE_EVERY = 5
#: the activations rerun at other widths, and those widths (full grid, --quick)
CHECK_ACTS = ("relu", "sigmoid", "tanh")
CHECK_WIDTHS = ((64, 1024), (16, 64))

Activation = Literal["relu", "silu", "sigmoid", "tanh", "none"]


def kernel_of(act: Activation, d: int, sigma: float) -> NoiseKernel | None:
    """The paper's kernel for a cell (None: no MLP)."""
    return None if act == "none" else NoiseKernel.paper(act, d, sigma, sigma)


def assumption_one(act: Activation, d: int, sigma: float) -> bool:
    """λ̄ < 0 and G not odd a.s. (tanh without biases is odd)."""
    k = kernel_of(act, d, sigma)
    return k is not None and k.dissipation(d) < 0 and not (act == "tanh" and sigma == 0.0)


def attention_of(scale: float, d: int, beta: float) -> SphereAttention:
    """Softmax attention with Q = K = I, V = scale·I (none at scale 0)."""
    return SphereAttention() if scale == 0.0 else SphereAttention("SA", beta, V=scale * jnp.eye(d))


def grid_configs(*, quick: bool, full: bool, width: int, realisations: int | None, seed: int) -> list[dict]:
    """The cells of the grid and of the width check, then the ε rows."""
    dims = (16,) if quick else (5, 64, 128)
    N, L = (16, 30) if quick else (64, 150)
    R = realisations or (64 if full else 4 if quick else 16)
    cell = dict(kind="cell", N=N, L=L, T=5.0, beta=1.0, R=R, seed=seed)
    cfgs = [
        dict(cell, act=act, d=d, sigma=sigma, scale=s, width=width)
        for act in ACTIVATIONS
        for d in dims
        for sigma in ((0.0,) if act == "none" else (0.1,) if quick else (0.0, 0.1))
        for s in SCALES
    ]
    check_d = dims[0 if quick else 1]
    cfgs += [
        dict(cell, act=act, d=check_d, sigma=0.1, scale=1.0, width=m)
        for act in CHECK_ACTS
        for m in CHECK_WIDTHS[quick]
        if m != width
    ]
    cfgs += [dict(kind="epsilon", scale=s, d=d, N=N, beta=1.0, seed=seed) for s in SCALES for d in dims]
    return cfgs


@compiled
def cell_statistics(model, x0, keys, beta: float):
    """``(ts, energy (R, S), cosine quantiles (S, 5))`` every ``SAVE_EVERY`` layers: E_β of every run,
    and the quantiles of the pairwise cosines pooled over runs. One program per model structure and
    shape (the attention scales ±1 share one: V is an array)."""
    ts, xs = simulate_many(model, x0, keys, save_every=SAVE_EVERY)  # (R, S, N, d)
    energy = jax.vmap(jax.vmap(lambda x: energy_deficit(x, beta)))(xs)
    cos = jax.vmap(jax.vmap(pairwise_cosines))(xs)  # (R, S, P)
    cos = jnp.moveaxis(cos, 1, 0).reshape(cos.shape[1], -1)
    return ts, energy, jnp.quantile(cos, jnp.asarray(QUANTILES), axis=1).T


def decay_rate(ts, energy, *, seed: int = 0) -> Interval:
    """Least-squares rate of log E[E_β](t) over every saved t and its percentile bootstrap interval,
    the realisations (rows of ``energy (R, S)``) resampled as whole curves."""
    return bootstrap(log_mean_slope(ts), np.asarray(energy, np.float64), paired=True, seed=seed)


def run_cell(c: dict) -> dict:
    """One cell of the grid (module docstring)."""
    d, R, beta = c["d"], c["R"], c["beta"]
    kernel = kernel_of(c["act"], d, c["sigma"])
    # "no MLP": a kernel with s_a = 0 draws all-zero MLPs, so the noise sublayer is the identity
    model = StochasticTransformer(
        kernel or NoiseKernel("relu", 0.0),
        width=c["width"],
        layers=c["L"],
        horizon=c["T"],
        attention=attention_of(c["scale"], d, beta),
    )
    kx, kr = jax.random.split(jax.random.fold_in(jax.random.key(c["seed"]), d))
    x0 = random_starts(kx, R, c["N"], d)  # the same starts in every cell of a d
    keys = jax.random.split(jax.random.fold_in(kr, c["width"]), R)
    ts, energy, cos_q = cell_statistics(model, x0, keys, beta)
    ts, energy = np.asarray(ts), np.asarray(energy, np.float64)
    rate = decay_rate(ts, energy)
    out = {
        "t": ts,
        "cos_quantiles": np.asarray(cos_q),
        "energy": energy,
        "energy_mean": energy.mean(0),
        "energy_quantiles": np.quantile(energy, ENERGY_QUANTILES, axis=0).T,
        "rate": rate.value,
        "rate_ci": [rate.ci_low, rate.ci_high],
        "log_ratio": np.log(energy.mean(0) / energy.mean(0)[0]),
        "assumption1": assumption_one(c["act"], d, c["sigma"]),
    }
    if kernel is not None:
        out.update(
            kappa1=kernel.kappa1,
            dkappa1=kernel.dkappa1,
            lambda1=kernel.lyapunov(d),
            lambda_bar=kernel.dissipation(d),
            lambda_bar_prime=kernel.energy_rate(d, beta),
        )
    return out


def epsilon_for(scale: float, n: int, d: int, beta: float, seed: int) -> float:
    """Assumption 2's ε for V = scale·I (0 without attention; a lower estimate otherwise)."""
    if scale == 0.0:
        return 0.0
    return attention_epsilon(jax.random.key(seed), attention_of(scale, d, beta), n, d, starts=32, steps=30).epsilon


class PaperGrid(Part):
    declaration = PAPER
    title = "The second paper's appendix grid: kernel table, energy decay against the theorem's bound, width check"
    float64 = True

    def check(self, settings: Settings) -> None:
        if settings["full_grid"] and settings["realisations"] is not None:
            raise ValueError("--full-grid and --realisations both set the realisations per cell: give one.")

    def configs(self, settings: Settings) -> list[dict]:
        return grid_configs(
            quick=settings.quick,
            full=settings["full_grid"],
            width=settings["width"],
            realisations=settings["realisations"],
            seed=settings.seed,
        )

    def run(self, config: dict) -> dict:
        c = config
        if c["kind"] == "epsilon":
            return {"epsilon": epsilon_for(c["scale"], c["N"], c["d"], c["beta"], c["seed"])}
        return run_cell(c)

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        width = settings["width"]
        eps = {(r["config"]["scale"], r["config"]["d"]): r["epsilon"] for r in rows if r["config"]["kind"] == "epsilon"}
        cells = [r for r in rows if r["config"]["kind"] == "cell"]
        table = kernel_table([r for r in cells if r["config"]["width"] == width])
        comp = comparison(cells, eps)
        checks = width_checks(cells, width)
        relu = relu_claim(table)
        claims = (bound_claim(comp, width), width_claim(checks)) + ((relu,) if relu is not None else ())
        text = "\n".join([*kernel_lines(table), "", *comparison_lines(comp, width), "", *width_lines(checks)])
        data = {
            "kernel_table": table,
            "comparison": comp,
            "epsilon": [{"scale": s, "d": d, "epsilon_lower_estimate": e} for (s, d), e in eps.items()],
            "width_check": checks,
            "width": width,
        }
        return Summary(text=text, data=data, claims=claims, passed=relu is None or relu.verdict == CODE_PASSED)

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        cells = [r for r in rows if r["config"]["kind"] == "cell"]
        width = summary.data["width"]
        main = [r for r in cells if r["config"]["width"] == width]
        acts = [a for a in ACTIVATIONS if any(r["config"]["act"] == a for r in main)]
        drawn = [activation_figure(main, act, out / f"paper_{act}.png") for act in acts]
        return drawn + ([width_figure(cells, out / "width_check.png", width)] if len(main) < len(cells) else [])


__all__ = [
    "ACTIVATIONS",
    "SCALES",
    "PaperGrid",
    "assumption_one",
    "attention_of",
    "cell_statistics",
    "decay_rate",
    "epsilon_for",
    "grid_configs",
    "kernel_of",
    "run_cell",
]
