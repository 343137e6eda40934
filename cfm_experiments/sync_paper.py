"""``cfm-jax sync --paper`` / ``--figure1``: the second paper's appendix grid and its Figure 1.

Appendix grid (docs/stochastic.md): the discrete model with N = 64 tokens i.i.d. uniform on
S^{d−1}, L = 150 layers, T = 5, β = 1, the paper's MLP G(y) = m^{-1/2} W σ(U y/√d + b_U) + b_W
(``NoiseKernel.paper``), σ_U = σ_W = σ, softmax attention with Q = K = I and V = s·I for the
attention scale s ∈ {1, 0, −1}. Each cell (activation, d, σ, s) is one resumable row of
``OUT/rows.jsonl`` holding, every 5 layers, quantiles of the pairwise cosine similarities
(pooled over realisations) and the mean and quantiles over realisations of the paper's energy
E_β(X_ℓ) = ½∬(e^β − e^{β<x,y>}).

The theorem (continuous time) bounds E[E_β(μ_t)] ≤ exp((ε + λ̄')t) E[E_β(μ_0)] under
Assumption 1 (λ̄ < 0 and G not odd, i.e. not tanh with σ = 0) and Assumption 2 (ε). We print,
per cell, the exponential rate of E[E_β] fitted over t ∈ [0, T] with a bootstrap CI over
realisations, next to ε + λ̄' (ε: ``attention_epsilon``, a lower estimate; 0 without attention),
and whether log(E[E_β(t)]/E[E_β(0)]) ≤ (ε + λ̄')t at every saved layer.

The paper does not state the MLP width m; we use m = 256 and rerun a few cells at m = 64 and
m = 1024 (section ``width``) to check that the energy curves do not depend on it (the
covariance of G is κ for every m; only its non-Gaussianity changes).

Figure 1: N = 64 tokens on S³, L = 2000, T = 20, m = 2048, no attention, σ = 0, ReLU and tanh;
the first two coordinates of every token over depth and the polar order |mean x| and nematic
order (top eigenvalue of mean x xᵀ) at the end. An odd field (tanh without bias) keeps
antipodal pairs antipodal: the paper's two-point random attractor; ReLU gives one cluster.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np

from cfm_jax.stats import RateFit

#: the second paper's activations (a subset of the library's)
Activation = Literal["relu", "silu", "sigmoid", "tanh"]

ACTIVATIONS = ("relu", "silu", "sigmoid", "tanh", "none")
SCALES = (1.0, 0.0, -1.0)
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
ENERGY_QUANTILES = (0.1, 0.5, 0.9)
WIDTH = 256
SAVE_EVERY = 5


# ------------------------------------------------------------------------------ configs
def grid_configs(*, quick: bool, full: bool, width: int, realisations: int | None, seed: int) -> list[dict]:
    """The cells of the appendix grid (and the width check), one dict per resumable row.

    Default: the paper's full grid d ∈ {5, 64, 128}, σ ∈ {0, 0.1}, five activations ("none":
    no MLP, σ irrelevant), three attention scales, R = 16 realisations. ``quick``: d = 16, σ = 0.1,
    N = 16, L = 30, R = 4. ``full`` (R = 64) tightens the CIs.
    """
    dims = (16,) if quick else (5, 64, 128)
    N, L = (16, 30) if quick else (64, 150)
    R = realisations or (4 if quick else (64 if full else 16))
    cfgs = []
    for act in ACTIVATIONS:
        for d in dims:
            for sigma in (0.0,) if act == "none" else ((0.1,) if quick else (0.0, 0.1)):
                for s in SCALES:
                    cfgs.append(
                        dict(
                            section="cell",
                            act=act,
                            d=d,
                            sigma=sigma,
                            scale=s,
                            N=N,
                            L=L,
                            T=5.0,
                            beta=1.0,
                            width=width,
                            R=R,
                            seed=seed,
                        )
                    )
    check_d = dims[0 if quick else 1]
    for act in ("relu", "sigmoid", "tanh"):
        for m in (16, 64) if quick else (64, 1024):
            cfgs.append(
                dict(
                    section="cell",
                    act=act,
                    d=check_d,
                    sigma=0.1,
                    scale=1.0,
                    N=N,
                    L=L,
                    T=5.0,
                    beta=1.0,
                    width=m,
                    R=R,
                    seed=seed,
                )
            )
    return cfgs


def _attention(scale: float, d: int, beta: float):
    import jax.numpy as jnp

    from cfm_jax.stochastic import SphereAttention

    if scale == 0.0:
        return SphereAttention()
    return SphereAttention("SA", beta, V=scale * jnp.eye(d))


def kernel_of(act: Activation | Literal["none"], d: int, sigma: float):
    """The paper's kernel for a cell (None for "no MLP")."""
    from cfm_jax.stochastic import NoiseKernel

    return None if act == "none" else NoiseKernel.paper(act, d, sigma, sigma)


def assumption_one(act: Activation | Literal["none"], d: int, sigma: float) -> bool:
    """λ̄ < 0 and G not odd a.s. (tanh without biases is odd)."""
    k = kernel_of(act, d, sigma)
    return k is not None and k.dissipation(d) < 0 and not (act == "tanh" and sigma == 0.0)


# ------------------------------------------------------------------------------ physics
def run_cell(c: Mapping[str, Any]) -> dict:
    """Simulate one cell: cosine quantiles and E_β statistics every ``SAVE_EVERY`` layers."""
    import jax
    import jax.numpy as jnp

    from cfm_jax.stochastic import (
        NoiseKernel,
        StochasticTransformer,
        energy_deficit,
        pairwise_cosines,
        random_tokens,
        simulate_many,
    )

    d, N, R, beta = c["d"], c["N"], c["R"], c["beta"]
    kernel = kernel_of(c["act"], d, c["sigma"])
    # "no MLP": a kernel with s_a = 0 draws all-zero MLPs, i.e. the noise sublayer is the identity.
    model = StochasticTransformer(
        kernel or NoiseKernel("relu", 0.0),
        width=c["width"],
        layers=c["L"],
        horizon=c["T"],
        attention=_attention(c["scale"], d, beta),
    )
    key = jax.random.fold_in(jax.random.key(c["seed"]), d)
    kx, kr = jax.random.split(key)
    x0 = jax.vmap(lambda k: random_tokens(k, N, d))(jax.random.split(kx, R))  # same starts in every cell of a d
    kr = jax.random.fold_in(kr, c["width"])

    @jax.jit
    def stats(x0, keys):
        ts, xs = simulate_many(model, x0, keys, save_every=SAVE_EVERY)  # (R, S, N, d)
        energy = jax.vmap(jax.vmap(lambda x: energy_deficit(x, beta)))(xs)  # (R, S)
        cos = jax.vmap(jax.vmap(pairwise_cosines))(xs)  # (R, S, P)
        cos = jnp.moveaxis(cos, 1, 0).reshape(cos.shape[1], -1)
        return ts, energy, jnp.quantile(cos, jnp.asarray(QUANTILES), axis=1).T

    t0 = time.perf_counter()
    ts, energy, cos_q = stats(x0, jax.random.split(kr, R))
    ts, energy, cos_q = np.asarray(ts), np.asarray(energy, np.float64), np.asarray(cos_q)
    rate, lo, hi = energy_rate_fit(ts, energy)
    out = {
        "t": ts,
        "cos_quantiles": cos_q,
        "energy_mean": energy.mean(0),
        "energy_quantiles": np.quantile(energy, ENERGY_QUANTILES, axis=0).T,
        "rate": rate,
        "rate_ci": [lo, hi],
        "log_ratio": np.log(energy.mean(0) / energy.mean(0)[0]),
        "seconds": time.perf_counter() - t0,
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


def energy_rate_fit(ts, energy, *, n_boot: int = 1000, level: float = 0.95, seed: int = 0):
    """Least-squares rate of log E[E_β](t) over all saved t, and its percentile bootstrap CI
    (realisations resampled with replacement; ``energy``: ``(R, S)``). Returns ``(rate, lo, hi)``."""
    ts = np.asarray(ts, np.float64)
    e = np.asarray(energy, np.float64)
    tc = ts - ts.mean()

    def slope(mean_curves):  # (..., S) -> (...)
        return (np.log(np.maximum(mean_curves, 1e-300)) * tc).sum(-1) / (tc**2).sum()

    rate = float(slope(e.mean(0)))
    if e.shape[0] < 2:
        return rate, float("nan"), float("nan")
    idx = np.random.default_rng(seed).integers(0, e.shape[0], (int(n_boot), e.shape[0]))
    boots = slope(e[idx].mean(1))
    lo, hi = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return rate, float(lo), float(hi)


def epsilon_for(scale: float, n: int, d: int, beta: float, seed: int) -> float:
    """Assumption 2's ε for V = scale·I (0 without attention; a lower estimate otherwise)."""
    import jax

    from cfm_jax.stochastic import attention_epsilon

    if scale == 0.0:
        return 0.0
    return attention_epsilon(jax.random.key(seed), _attention(scale, d, beta), n, d, starts=32, steps=30).epsilon


# ------------------------------------------------------------------------------ tables
def comparison(rows, eps: dict) -> list[dict]:
    """Measured rate vs the bound ε + λ̄' for every cell (the bound only where Assumption 1 holds)."""
    out = []
    for r in rows:
        c = r["config"]
        if c["act"] == "none":
            continue
        a1 = assumption_one(c["act"], c["d"], c["sigma"])
        e = eps[(c["scale"], c["d"])]
        bound = e + r["lambda_bar_prime"]
        t = np.asarray(r["t"], float)
        log_ratio = np.asarray(r["log_ratio"], float)
        rec = {
            "act": c["act"],
            "d": c["d"],
            "sigma": c["sigma"],
            "scale": c["scale"],
            "width": c["width"],
            "assumption1": a1,
            "epsilon": e,
            "lambda_bar_prime": r["lambda_bar_prime"],
            "bound": bound,
            "rate": r["rate"],
            "rate_ci": r["rate_ci"],
        }
        rec["holds_pointwise"] = bool(np.all(log_ratio <= bound * t + 1e-12)) if a1 else None
        rec["rate_below_bound"] = bool(r["rate_ci"][0] <= bound) if a1 else None
        rec["bound_over_rate"] = bound / r["rate"] if (a1 and r["rate"] != 0) else None
        out.append(rec)
    return out


def print_kernel_table(rows) -> list[dict]:
    seen, table = set(), []
    for r in rows:
        c = r["config"]
        if c["act"] == "none" or (c["act"], c["d"], c["sigma"]) in seen:
            continue
        seen.add((c["act"], c["d"], c["sigma"]))
        table.append(
            {
                "act": c["act"],
                "d": c["d"],
                "sigma": c["sigma"],
                "kappa1": r["kappa1"],
                "dkappa1": r["dkappa1"],
                "lambda1": r["lambda1"],
                "lambda_bar": r["lambda_bar"],
                "lambda_bar_prime": r["lambda_bar_prime"],
                "assumption1": assumption_one(c["act"], c["d"], c["sigma"]),
            }
        )
    print(
        "\nKernel table (the paper's MLP, σ_U = σ_W = σ): κ(1), κ'(1), "
        "Lyapunov exponent λ₁ = ½[(d−3)κ'(1) − (d−1)κ(1)],"
    )
    print("λ̄ = (d−1)κ'(1) − (d−3)κ(1) (Assumption 1: λ̄ < 0 and G not odd), energy rate λ̄' = −inf F")
    print(f"{'act':>8} {'d':>4} {'σ':>4} {'κ(1)':>9} {'κ′(1)':>9} {'λ₁':>9} {'λ̄':>9} {'λ̄′':>9} {'A1':>4}")
    for t in table:
        print(
            f"{t['act']:>8} {t['d']:>4} {t['sigma']:>4g} {t['kappa1']:>9.5f} {t['dkappa1']:>9.5f} {t['lambda1']:>9.5f} "
            f"{t['lambda_bar']:>9.5f} {t['lambda_bar_prime']:>9.5f} {'yes' if t['assumption1'] else 'no':>4}"
        )
    return table


def print_comparison(comp, width: int):
    print("\nDecay of E[E_β] (fitted rate over t ∈ [0, T], 95% bootstrap CI over realisations) vs the bound ε + λ̄'")
    print("(cells where Assumption 1 holds; ε: largest observed (dE_β/dt)/E_β of the noiseless flow, a lower estimate;")
    print(f" 'pointwise': log(E[E_t]/E[E_0]) ≤ (ε + λ̄')t at every saved layer; m = {width})")
    print(
        f"{'act':>8} {'d':>4} {'σ':>4} {'attn':>5} {'ε':>8} {'λ̄′':>8} {'bound':>8} {'rate':>8} "
        f"{'95% CI':>19} {'pointwise':>9}"
    )
    for c in comp:
        if not c["assumption1"] or c["width"] != width:
            continue
        lo, hi = c["rate_ci"]
        print(
            f"{c['act']:>8} {c['d']:>4} {c['sigma']:>4g} {c['scale']:>+5g} {c['epsilon']:>8.4f} "
            f"{c['lambda_bar_prime']:>8.4f} {c['bound']:>8.4f} {c['rate']:>8.4f} [{lo:>8.4f}, {hi:>8.4f}] "
            f"{'holds' if c['holds_pointwise'] else 'FAILS':>9}"
        )


# ------------------------------------------------------------------------------ figures
_SCALE_LABEL = {1.0: "attention +1", 0.0: "no attention", -1.0: "attention −1"}


def _cell_label(c):
    return f"d={c['d']}, σ={c['sigma']:g}, {_SCALE_LABEL[c['scale']]}"


def activation_figure(rows, act: str, path: Path, width: int):
    """Rows (d, σ) × columns (attention scale × {cosines, E_β}) for one activation."""
    from .plotting import COLORS, figure, save

    cells = [r for r in rows if r["config"]["act"] == act and r["config"]["width"] == width]
    keys = sorted({(r["config"]["d"], r["config"]["sigma"]) for r in cells})
    fig, axes = figure(6 * len(keys), ncols=6, width=2.5, height=2.0)
    L = cells[0]["config"]["L"]
    T = cells[0]["config"]["T"]
    for i, (d, sigma) in enumerate(keys):
        for j, s in enumerate(SCALES):
            r = next(
                r for r in cells if (r["config"]["d"], r["config"]["sigma"], r["config"]["scale"]) == (d, sigma, s)
            )
            layer = np.asarray(r["t"]) * L / T
            q = np.asarray(r["cos_quantiles"])
            ax = axes[6 * i + 2 * j]
            ax.fill_between(layer, q[:, 0], q[:, 4], color=COLORS[0], alpha=0.2, lw=0, label="5–95%")
            ax.fill_between(layer, q[:, 1], q[:, 3], color=COLORS[0], alpha=0.45, lw=0, label="25–75%")
            ax.plot(layer, q[:, 2], color=COLORS[0], lw=1.2, label="median")
            ax.set_ylim(-1.05, 1.05)
            ax.set_title(_cell_label(r["config"]), fontsize=8)
            ax.set_ylabel("cosine <x_i, x_j>", fontsize=8)
            ax = axes[6 * i + 2 * j + 1]
            eq = np.maximum(np.asarray(r["energy_quantiles"]), 1e-300)
            ax.fill_between(layer, eq[:, 0], eq[:, 2], color=COLORS[1], alpha=0.3, lw=0, label="10–90% of runs")
            ax.plot(layer, np.maximum(r["energy_mean"], 1e-300), color=COLORS[1], lw=1.2, label="mean")
            ax.plot(layer, eq[:, 1], color=COLORS[1], lw=1.0, ls="--", label="median")
            if eq.max() / eq.min() > 10:  # log only when the energy spans decades
                from matplotlib.ticker import NullFormatter

                ax.set_yscale("log")
                ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_ylabel("E_β(X_ℓ)", fontsize=8)
            ax.set_title(_cell_label(r["config"]), fontsize=8)
            if i == len(keys) - 1:
                axes[6 * i + 2 * j].set_xlabel("layer ℓ")
                ax.set_xlabel("layer ℓ")
            if i == 0 and j == 0:
                axes[0].legend(fontsize=6, loc="lower right")
                ax.legend(fontsize=6, loc="lower left")
    name = "no MLP" if act == "none" else act
    R = cells[0]["config"]["R"]
    fig.suptitle(
        f"{name}: pairwise cosines (pooled over {R} runs) and "
        f"$E_\\beta = \\frac{{1}}{{2}}\\iint(e^\\beta - e^{{\\beta\\langle x,y\\rangle}})$, "
        f"N={cells[0]['config']['N']}, L={L}, T={T:g}, β=1, m={width}",
        fontsize=10,
    )
    return save(fig, path)


def width_figure(rows, path: Path):
    """Mean E_β over depth for the width-check cells at every width run."""
    from .plotting import COLORS, figure, save

    check = sorted(
        {
            (r["config"]["act"], r["config"]["d"])
            for r in rows
            if r["config"]["width"] != WIDTH and r["config"]["act"] != "none"
        }
    )
    fig, axes = figure(len(check), ncols=3)
    for ax, (act, d) in zip(axes, check):
        cells = sorted(
            (
                r
                for r in rows
                if (r["config"]["act"], r["config"]["d"], r["config"]["sigma"], r["config"]["scale"])
                == (act, d, 0.1, 1.0)
            ),
            key=lambda r: r["config"]["width"],
        )
        for i, r in enumerate(cells):
            c = r["config"]
            layer = np.asarray(r["t"]) * c["L"] / c["T"]
            lo, hi = r["rate_ci"]
            ax.semilogy(
                layer,
                r["energy_mean"],
                color=COLORS[i],
                label=f"m={c['width']}: rate {r['rate']:.3f} [{lo:.3f}, {hi:.3f}]",
            )
        ax.set_title(f"{act}, d={d}, σ=0.1, attention +1", fontsize=9)
        ax.set_xlabel("layer ℓ")
        ax.set_ylabel("mean E_β over runs")
        ax.legend(fontsize=7)
    fig.suptitle("MLP width check: mean energy and fitted rate (95% bootstrap CI) at each width m", fontsize=10)
    return save(fig, path)


# ------------------------------------------------------------------------------ figure 1
def figure1_run(
    act: Activation,
    *,
    n: int = 64,
    d: int = 4,
    layers: int = 2000,
    horizon: float = 20.0,
    width: int = 2048,
    seed: int = 0,
    save_every: int = 10,
):
    """One Figure 1 run (no attention, σ = 0): ``(ts, xs (S, n, d), polar, nematic)`` at the end."""
    import jax

    from cfm_jax.stochastic import (
        NoiseKernel,
        StochasticTransformer,
        nematic_order,
        order_parameter,
        random_tokens,
        simulate,
    )

    model = StochasticTransformer(NoiseKernel.paper(act, d), width=width, layers=layers, horizon=horizon)
    x0 = random_tokens(jax.random.key(seed), n, d)
    ts, xs = jax.jit(lambda k: simulate(model, x0, k, save_every=save_every))(jax.random.key(seed + 1))
    return np.asarray(ts), np.asarray(xs), float(order_parameter(xs[-1])), float(nematic_order(xs[-1]))


def figure1(out: Path, *, quick: bool, seed: int, before_write=None) -> list[dict]:
    """The second paper's Figure 1 into ``out/figure1.png``; ``before_write()`` (when given) is
    called once everything is computed, just before the file is written."""
    from .plotting import figure, save

    kw = dict(n=16, layers=200, width=64) if quick else {}
    res = []
    fig, axes = figure(4, ncols=2, width=4.4, height=2.5)
    for i, act in enumerate(("relu", "tanh")):
        ts, xs, polar, nematic = figure1_run(act, seed=seed, **kw)
        layer = ts * kw.get("layers", 2000) / 20.0
        res.append(
            {
                "act": act,
                "polar_order": polar,
                "nematic_order": nematic,
                "n": xs.shape[1],
                "layers": kw.get("layers", 2000),
                "width": kw.get("width", 2048),
            }
        )
        for j in range(2):
            ax = axes[2 * i + j]
            ax.plot(layer, xs[:, :, j], lw=0.6)
            ax.set_ylim(-1.05, 1.05)
            ax.set_xlabel("layer ℓ")
            ax.set_ylabel(f"coordinate x_{j + 1}")
            ax.set_title(
                f"{act}: coordinate {j + 1} of every token (polar {polar:.3f}, nematic {nematic:.3f})", fontsize=8
            )
    r0 = res[0]
    fig.suptitle(
        f"Figure 1: N={r0['n']} tokens on S³, no attention, σ=0, L={r0['layers']}, T=20, m={r0['width']}", fontsize=10
    )
    if before_write is not None:
        before_write()
    save(fig, out / "figure1.png")
    print("\nFigure 1 (no attention, σ = 0): order parameters at the last layer")
    print(f"{'act':>6} {'polar |mean x|':>15} {'nematic λ_max(mean xxᵀ)':>24}")
    for r in res:
        print(f"{r['act']:>6} {r['polar_order']:>15.4f} {r['nematic_order']:>24.4f}")
    return res


# ------------------------------------------------------------------------------ chaos in W₂
def w2_squared_uniform(y, z) -> float:
    """Exact W₂² between the uniform measures on the rows of ``y (N, d)`` and ``z (M, d)``, N | M.

    Each point of y carries mass k/M with k = M/N, so an optimal plan is an assignment between z
    and y repeated k times (Birkhoff): solved exactly by ``scipy.optimize.linear_sum_assignment``.
    """
    from scipy.optimize import linear_sum_assignment

    y, z = np.asarray(y, np.float64), np.asarray(z, np.float64)
    if z.shape[0] % y.shape[0]:
        raise ValueError(f"the size of `y` ({y.shape[0]}) must divide that of `z` ({z.shape[0]}).")
    yy = np.repeat(y, z.shape[0] // y.shape[0], axis=0)
    cost = ((yy[:, None, :] - z[None, :, :]) ** 2).sum(-1)
    r, c = linear_sum_assignment(cost)
    return float(cost[r, c].mean())


def chaos_configs(*, quick: bool, seed: int) -> list[dict]:
    """Propagation of chaos in the paper's metric: one row per dimension d."""
    dims = (2, 5) if quick else (2, 3, 5, 8)
    return [
        dict(
            section="chaos_w2",
            d=d,
            act="tanh",
            sigma=0.1,
            Ns=[4, 8, 16, 32] if quick else [8, 16, 32, 64, 128],
            N_ref=64 if quick else 512,
            L=20 if quick else 50,
            T=2.0,
            width=64 if quick else 256,
            R=4 if quick else 8,
            save_every=5 if quick else 10,
            seed=seed,
        )
        for d in dims
    ]


def run_chaos_w2(c: Mapping[str, Any]) -> dict:
    """E sup_t W₂²(μ^N_t, μ^{N_ref}_t) for each N: the N-token system is the first N tokens of the
    reference start, driven by the same layer keys (the same MLPs: the common noise)."""
    import jax

    from cfm_jax.stats import fit_loglog
    from cfm_jax.stochastic import StochasticTransformer, random_tokens, simulate_many

    d, M, R = c["d"], c["N_ref"], c["R"]
    model = StochasticTransformer(
        kernel_of(c["act"], d, c["sigma"]),
        width=c["width"],
        layers=c["L"],
        horizon=c["T"],
        attention=_attention(1.0, d, 1.0),
    )
    key = jax.random.fold_in(jax.random.key(c["seed"]), 1000 + d)
    kx, kr = jax.random.split(key)
    x0 = jax.vmap(lambda k: random_tokens(k, M, d))(jax.random.split(kx, R))
    keys = jax.random.split(kr, R)
    run = jax.jit(lambda x, ks: simulate_many(model, x, ks, save_every=c["save_every"])[1])
    ref = np.asarray(run(x0, keys))  # (R, S, M, d)
    sup = np.empty((len(c["Ns"]), R))
    for i, n in enumerate(c["Ns"]):
        xs = np.asarray(run(x0[:, :n], keys))
        sup[i] = [max(w2_squared_uniform(xs[r, s], ref[r, s]) for s in range(xs.shape[1])) for r in range(R)]
    fit = fit_loglog(np.asarray(c["Ns"], float), sup)
    return {"sup_w2_squared": sup, "mean": sup.mean(1), "fit": fit.as_dict()}


def print_chaos(rows):
    print("\nPropagation of chaos: E sup_t W₂²(μ^N_t, μ^{N_ref}_t) (exact W₂, same common noise), fitted slope in N")
    print("[95% bootstrap CI over runs]; the paper states N^{−1/2}, N^{−1/2} log N or N^{−2/d} depending on d")
    for r in rows:
        c, f = r["config"], RateFit.from_dict(r["fit"])  # a missing CI is null in the row
        means = ", ".join(f"{m:.4f}" for m in r["mean"])
        print(
            f"  d = {c['d']}: N = {c['Ns']} (N_ref = {c['N_ref']}): {means}; slope {f.slope:.3f} "
            f"[{f.ci_low:.3f}, {f.ci_high:.3f}]  (−2/d = {-2 / c['d']:.3f})"
        )


def chaos_figure(rows, path: Path):
    from .plotting import COLORS, figure, log_ticks, reference_slope, save

    fig, (ax,) = figure(1, width=5.4, height=4.0)
    for i, r in enumerate(rows):
        c = r["config"]
        Ns = np.asarray(c["Ns"], float)
        f = RateFit.from_dict(r["fit"])
        ax.plot(
            Ns,
            r["mean"],
            "o-",
            color=COLORS[i],
            label=f"d = {c['d']}: slope {f.slope:.2f} [{f.ci_low:.2f}, {f.ci_high:.2f}]",
        )
    Ns = np.asarray(rows[0]["config"]["Ns"], float)
    reference_slope(ax, Ns, (Ns[0], rows[0]["mean"][0]), -0.5, label="reference slope −1/2")
    reference_slope(ax, Ns, (Ns[0], rows[0]["mean"][0]), -1.0, label="reference slope −1", ls=":")
    log_ticks(ax, Ns, "x")
    ax.set_yscale("log")
    ax.set_xlabel("tokens N")
    ax.set_ylabel("E sup_t W₂²(μ^N_t, μ^ref_t)")
    c = rows[0]["config"]
    ax.set_title(
        f"Propagation of chaos, tanh σ={c['sigma']:g}, attention +1, L={c['L']}, T={c['T']:g}, N_ref={c['N_ref']}",
        fontsize=8,
    )
    ax.legend(fontsize=7)
    return save(fig, path)


def _folder(args, name: str):
    from .options import configuration, results_mode
    from .results import ResultsFolder

    # which of --paper/--figure1/--chaos ran alongside does not change this section's results
    config = {k: v for k, v in configuration(args).items() if k not in ("paper", "figure1", "chaos")}
    return ResultsFolder(args.out, name, config, mode=results_mode(args))


def run_chaos(args) -> int:
    folder = _folder(args, "sync --chaos")
    out = folder.path
    cfgs = chaos_configs(quick=args.quick, seed=args.seed)
    rows = folder.sweep(progress=not getattr(args, "no_progress", False)).run(cfgs, run_chaos_w2, desc="sync --chaos")
    print_chaos(rows)
    folder.record("chaos_w2.png")
    fig = chaos_figure(rows, out / "chaos_w2.png")
    folder.write_summary(
        {
            "chaos_w2": [
                {"d": r["config"]["d"], "Ns": r["config"]["Ns"], "mean": r["mean"], "fit": r["fit"]} for r in rows
            ],
            "quick": args.quick,
        }
    )
    print(f"\nwrote {out / 'rows.jsonl'}, {fig}, {out / 'summary.json'}")
    return 0


# ------------------------------------------------------------------------------ entry points
def run_paper(args) -> int:
    folder = _folder(args, "sync --paper")
    out = folder.path
    t0 = time.perf_counter()
    cfgs = grid_configs(
        quick=args.quick, full=args.full_grid, width=args.width, realisations=args.realisations, seed=args.seed
    )
    rows = folder.sweep(progress=not getattr(args, "no_progress", False)).run(cfgs, run_cell, desc="sync --paper")
    main = [r for r in rows if r["config"]["width"] == args.width]
    table = print_kernel_table(main)
    N = cfgs[0]["N"]
    eps = {(s, d): epsilon_for(s, N, d, 1.0, args.seed) for s in SCALES for d in sorted({c["d"] for c in cfgs})}
    comp = comparison(rows, eps)
    print_comparison(comp, args.width)
    print("\nWidth check (d = {}, σ = 0.1, attention +1): fitted rate of E[E_β] at each width".format(cfgs[-1]["d"]))
    for act in ("relu", "sigmoid", "tanh"):
        cells = sorted(
            (
                c
                for c in comp
                if c["act"] == act and c["d"] == cfgs[-1]["d"] and c["sigma"] == 0.1 and c["scale"] == 1.0
            ),
            key=lambda c: c["width"],
        )
        print(
            f"{act:>8}: "
            + "  ".join(
                f"m={c['width']}: {c['rate']:.3f} [{c['rate_ci'][0]:.3f}, {c['rate_ci'][1]:.3f}]" for c in cells
            )
        )
    written = [out / "rows.jsonl"]
    folder.record(*(f"paper_{act}.png" for act in ACTIVATIONS), "width_check.png")
    for act in ACTIVATIONS:
        written.append(activation_figure(main, act, out / f"paper_{act}.png", args.width))
    written.append(width_figure(rows, out / "width_check.png"))
    folder.write_summary(
        {
            "kernel_table": table,
            "comparison": comp,
            "epsilon": [{"scale": s, "d": d, "epsilon_lower_estimate": e} for (s, d), e in eps.items()],
            "width": args.width,
            "quick": args.quick,
            "seconds_this_invocation": time.perf_counter() - t0,
        }
    )
    written.append(out / "summary.json")
    print("\nwrote " + ", ".join(str(p) for p in written))
    return 0


def run_figure1(args) -> int:
    folder = _folder(args, "sync --figure1")
    out = folder.path
    # an --overwrite removes the old figure and summary only now, when the new ones are computed
    res = figure1(out, quick=args.quick, seed=args.seed, before_write=lambda: folder.record("figure1.png"))
    folder.write_summary({"figure1": res, "quick": args.quick})
    print(f"\nwrote {out / 'figure1.png'}, {out / 'summary.json'}")
    return 0


__all__ = [
    "ACTIVATIONS",
    "SCALES",
    "WIDTH",
    "assumption_one",
    "chaos_configs",
    "comparison",
    "energy_rate_fit",
    "epsilon_for",
    "figure1",
    "figure1_run",
    "grid_configs",
    "kernel_of",
    "run_chaos",
    "run_chaos_w2",
    "run_cell",
    "run_figure1",
    "run_paper",
    "w2_squared_uniform",
]
