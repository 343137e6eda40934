"""``cfm-jax sync``: synchronisation by common noise, Lyapunov table, convergence rates (docs/theory.md).

Sections (each configuration one resumable row of ``OUT/rows.jsonl``):

* ``sync`` — exact-noise SDE, N tokens on S^{d−1} with SA attention, several noise strengths
  s_a and two ReLU kernels (without bias: decay in mean fails; with bias: it holds). Mean,
  median and log-mean over realisations of the paper's energy E_β = ½∬(e^β − e^{β<x,y>}), ∬‖x−y‖^{2p} (p = ¼, 1), order
  parameter, diameter, fraction synchronised; fitted exponential rates.
* ``lyapunov`` — d ∈ {2, 3, 5, 10} × {relu, tanh, linear}: Benettin on the discrete model
  (and twin trajectories on the exact SDE, plus SA attention switched on, outside ``--quick``)
  vs λ₁ = ½[(d−3)κ'(1) − (d−1)κ(1)].
* ``strong`` / ``weak_L`` / ``weak_m`` / ``chaos`` — discrete (L, m) → SDE and N-token system →
  large-N reference driven by the same noise, with fitted log-log rates (outside ``--quick``
  only the strong and chaos sections run, reduced).

Runs in float64 (needed to resolve nearly merged tokens and the twin separation).

``--paper`` runs the second paper's appendix grid instead (into ``OUT/paper``) and ``--figure1``
its Figure 1 (into ``OUT/figure1``) and ``--chaos`` propagation of chaos in its metric
E sup_t W₂² (into ``OUT/chaos_w2``); see :mod:`cfm_jax.experiments.sync_paper`.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from cfm_jax.stats import RateFit

ACTS = ("relu", "tanh", "linear")
DIMS = (2, 3, 5, 10)


def add_arguments(parser):
    from .options import add_experiment_arguments

    add_experiment_arguments(parser, "cfm_out/sync")
    parser.add_argument("--realisations", type=int, default=None, help="override runs per configuration")
    parser.add_argument(
        "--paper",
        action="store_true",
        help="the second paper's appendix grid (kernel table, one figure per activation, "
        "energy decay vs the theorem's bound) into OUT/paper",
    )
    parser.add_argument(
        "--figure1", action="store_true", help="the second paper's Figure 1 (ReLU vs tanh) into OUT/figure1"
    )
    parser.add_argument(
        "--chaos",
        action="store_true",
        help="propagation of chaos in the paper's metric E sup_t W2^2 vs N for several d into OUT/chaos_w2",
    )
    parser.add_argument("--full-grid", action="store_true", help="with --paper: 64 realisations per cell instead of 16")
    parser.add_argument(
        "--width", type=int, default=256, help="with --paper: MLP width m of the main grid (default: 256)"
    )


# ------------------------------------------------------------------------------ configs
def _configs(quick: bool, seed: int, R: int | None):
    cfgs = []
    sync_R = R or (16 if quick else 64)
    for bias in (0.0, 1.5):
        for s_a in (0.0, 0.5, 1.0) if quick else (0.0, 0.25, 0.5, 1.0):
            cfgs.append(
                dict(
                    section="sync",
                    s_a=s_a,
                    s_c=bias,
                    d=5,
                    N=16 if quick else 32,
                    T=4.0 if quick else 8.0,
                    dt=0.02 if quick else 0.01,
                    beta=1.0,
                    R=sync_R,
                    seed=seed,
                )
            )
    lyap_R = R or (32 if quick else 128)
    for act in ACTS:
        for d in DIMS:
            cfgs.append(
                dict(
                    section="lyapunov",
                    method="benettin",
                    act=act,
                    d=d,
                    attention="none",
                    T=3.0 if quick else 8.0,
                    R=lyap_R,
                    seed=seed,
                    dt_base=0.02 if quick else 0.01,
                )
            )
    if not quick:
        for act in ACTS:
            for d in DIMS:
                cfgs.append(
                    dict(section="lyapunov", method="twin", act=act, d=d, attention="none", T=8.0, R=lyap_R, seed=seed)
                )
        for d in DIMS:
            cfgs.append(
                dict(
                    section="lyapunov",
                    method="benettin",
                    act="relu",
                    d=d,
                    attention="SA",
                    T=8.0,
                    R=lyap_R // 2,
                    seed=seed,
                )
            )
    cfgs.append(
        dict(
            section="strong",
            Ls=[4, 8, 16, 32] if quick else [4, 8, 16, 32, 64],
            fine=128 if quick else 256,
            N=4 if quick else 8,
            d=3,
            R=16 if quick else 32,
            seed=seed,
        )
    )
    cfgs.append(
        dict(
            section="chaos",
            Ns=[8, 16, 32, 64] if quick else [8, 16, 32, 64, 128, 256],
            N_ref=256 if quick else 1024,
            d=3,
            width=256,
            steps=50 if quick else 100,
            T=2.0,
            R=4 if quick else 8,
            seed=seed,
        )
    )
    if not quick:
        cfgs.append(dict(section="weak_L", Ls=[1, 2, 4, 8], width=64, ref_steps=64, R=R or 8000, seed=seed))
        cfgs.append(dict(section="weak_m", ms=[1, 2, 4, 16, 64], L=2, R=R or 20000, seed=seed))
    return cfgs


def _dt_for(kernel, d, base=0.01):
    # keep the per-step noise energy d·κ(1)·Δt ≲ 3·base: the O(Δt) bias of the estimators.
    return min(base, 3 * base / (d * kernel.kappa1))


# ------------------------------------------------------------------------------ sections
def _run_sync(c):
    import jax

    from cfm_jax.stochastic import (
        NoiseKernel,
        SphereAttention,
        SphereSDE,
        fit_exponential_rate,
        random_tokens,
        realisation_stats,
        simulate_many,
        trajectory_observables,
    )

    k = NoiseKernel("relu", c["s_a"], 1.0, c["s_c"])  # s_a = 0: attention only
    steps = int(round(c["T"] / c["dt"]))
    sde = SphereSDE(k, steps=steps, horizon=c["T"], attention=SphereAttention("SA", c["beta"]))
    key = jax.random.key(c["seed"])
    kx, kr = jax.random.split(key)
    R = c["R"]
    x0 = jax.vmap(lambda kk: random_tokens(kk, c["N"], c["d"]))(jax.random.split(kx, R))
    save = max(1, steps // 40)
    ts, xs = jax.jit(lambda x, ks: simulate_many(sde, x, ks, save_every=save))(x0, jax.random.split(kr, R))
    obs = jax.jit(lambda x: trajectory_observables(x, c["beta"]))(xs)
    ts = np.asarray(ts)
    out = {"t": ts, "lambda1": k.lyapunov(c["d"]), "mean_rate_theory_noise_only": k.moment_rate(c["d"], 1.0)}
    for name in ("deficit", "dist_energy_p0.25", "dist_energy_p1", "order", "diameter"):
        st = realisation_stats(obs[name])
        out[name] = {s: v for s, v in st.items()}
        if name in ("deficit", "dist_energy_p0.25", "dist_energy_p1"):
            # fit over t ≥ T/4 and above the float64 floor of merged tokens (r ~ 1e-32)
            out[name]["rates"] = {s: fit_exponential_rate(ts, v, t_min=ts[-1] / 4, floor=1e-28) for s, v in st.items()}
    out["frac_synchronised"] = np.mean(np.asarray(obs["diameter"]) < 1e-6, axis=0)
    return out


def _run_lyapunov(c):
    import jax

    from cfm_jax.stochastic import (
        NoiseKernel,
        SphereAttention,
        SphereSDE,
        StochasticTransformer,
        estimate_lyapunov,
        random_tokens,
    )

    k = NoiseKernel(c["act"], 1.0, 1.0, 0.0)
    d = c["d"]
    dt = _dt_for(k, d, c.get("dt_base", 0.01))
    steps = int(round(c["T"] / dt))
    att = SphereAttention(c["attention"], 1.0) if c["attention"] != "none" else SphereAttention()
    N = 4 if att.active else 1
    x0 = random_tokens(jax.random.key(c["seed"] + 1000 * d), N, d)
    key = jax.random.fold_in(
        jax.random.key(c["seed"]), 100 * d + 10 * ACTS.index(c["act"]) + (c["method"] == "twin") + 2 * att.active
    )
    t0 = time.perf_counter()
    if c["method"] == "benettin":
        model = StochasticTransformer(k, width=32, layers=steps, horizon=c["T"], attention=att)
        est = estimate_lyapunov(model, key, x0, realisations=c["R"], burn_in=0.5 if att.active else 0.0)
    else:
        model = SphereSDE(k, steps=steps, horizon=c["T"], attention=att)
        est = estimate_lyapunov(model, key, x0, method="twin", realisations=c["R"], delta=1e-6)
    closed = k.lyapunov(d)
    return {
        "estimate": est.estimate,
        "ci_half_width": est.ci_half_width,
        "closed_form": closed,
        "within_ci": bool(abs(est.estimate - closed) <= est.ci_half_width),
        "dt": dt,
        "steps": steps,
        "seconds": time.perf_counter() - t0,
    }


def _run_strong(c):
    import jax
    import jax.numpy as jnp

    from cfm_jax.stats import fit_loglog
    from cfm_jax.stochastic import (
        NoiseKernel,
        SphereAttention,
        SphereSDE,
        brownian_increments,
        integrate_increments,
        random_tokens,
    )

    k = NoiseKernel("relu", 1.0, 1.0, 0.5)
    att = SphereAttention("USA", 1.0)
    N, d, R, fine = c["N"], c["d"], c["R"], c["fine"]
    x0 = random_tokens(jax.random.key(c["seed"]), N, d)
    dB = jax.vmap(lambda kk: brownian_increments(kk, fine, (N, d), 1.0))(
        jax.random.split(jax.random.key(c["seed"] + 1), R)
    )

    def path(L):
        sde = SphereSDE(k, L, 1.0, att)
        return jax.jit(jax.vmap(lambda b: integrate_increments(sde, x0, b, save_every=L // 4)))(dB)

    ref4 = path(fine)  # states at t ∈ {0, ¼, ½, ¾, 1}
    errs = []
    for L in c["Ls"]:
        xl = path(L)
        # sup over the common save times t ∈ {0, ¼, ½, ¾, 1} of the RMS token error
        errs.append(np.asarray(jnp.max(jnp.sqrt(jnp.mean(jnp.sum((xl - ref4) ** 2, -1), -1)), axis=1)))
    fit = fit_loglog(np.asarray(c["Ls"], float), np.stack(errs))
    return {"errors": np.stack(errs).mean(1), "fit": fit.as_dict()}


def _overlap_mean_and_se(model, x0, seed: int, R: int) -> tuple[float, float]:
    """Monte Carlo mean and standard error of <x_1, x_2> at the horizon over R noise realisations."""
    import jax
    import jax.numpy as jnp

    from cfm_jax.stochastic import simulate_many

    _, x = jax.jit(lambda ks: simulate_many(model, x0, ks))(jax.random.split(jax.random.key(seed), R))
    rho = np.asarray(jnp.sum(x[:, 0] * x[:, 1], -1))
    return rho.mean(), rho.std() / math.sqrt(R)


def _weak_errors(c, values, reference_steps, make_model, seed_of):
    """|E<x1,x2>_T(model(v)) − E<x1,x2>_T(SDE)| for each v in ``values``, with a log-log fit."""
    import jax.numpy as jnp

    from cfm_jax.stats import fit_loglog
    from cfm_jax.stochastic import NoiseKernel, SphereSDE

    k = NoiseKernel("relu", 1.5, 1.0, 0.0)
    x0 = jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    ref, ref_se = _overlap_mean_and_se(SphereSDE(k, steps=reference_steps, horizon=1.0), x0, c["seed"], c["R"])
    errs, ses = [], []
    for v in values:
        m, se = _overlap_mean_and_se(make_model(k, v), x0, seed_of(v), c["R"])
        errs.append(abs(m - ref))
        ses.append(math.hypot(se, ref_se))
    fit = fit_loglog(np.asarray(values, float), np.asarray(errs))
    return {"statistic": "E<x1,x2>_T", "errors": errs, "standard_errors": ses, "fit": fit.as_dict()}


def _run_weak_L(c):
    from cfm_jax.stochastic import StochasticTransformer

    return _weak_errors(
        c,
        c["Ls"],
        c["ref_steps"],
        lambda k, L: StochasticTransformer(k, width=c["width"], layers=L, horizon=1.0),
        lambda L: c["seed"] + L,
    )


def _run_weak_m(c):
    from cfm_jax.stochastic import StochasticTransformer

    # Noise only, same step: the discrete model at width m vs the Gaussian-field scheme (m = ∞),
    # so only the non-Gaussianity of the finite-width MLP separates them.
    return _weak_errors(
        c,
        c["ms"],
        c["L"],
        lambda k, m: StochasticTransformer(k, width=m, layers=c["L"], horizon=1.0),
        lambda m: c["seed"] + 7 * m,
    )


def _run_chaos(c):
    import jax
    import jax.numpy as jnp

    from cfm_jax.stats import fit_loglog
    from cfm_jax.stochastic import NoiseKernel, SphereAttention, SphereSDE, random_tokens, simulate

    # Random-feature noise: the same layer key gives the same field to both systems, so the
    # N-token system and the N_ref reference are driven by one common noise (docs/theory.md).
    k = NoiseKernel("relu", 0.5, 1.0, 0.0)
    att = SphereAttention("SA", 1.0)
    sde = SphereSDE(k, steps=c["steps"], horizon=c["T"], attention=att, noise="features", width=c["width"])
    save = c["steps"] // 10
    keys = jax.random.split(jax.random.key(c["seed"]), c["R"])
    ref_all = jax.vmap(lambda kk: random_tokens(kk, c["N_ref"], c["d"]))(
        jax.random.split(jax.random.key(c["seed"] + 1), c["R"])
    )
    _, ref = jax.jit(jax.vmap(lambda x, kk: simulate(sde, x, kk, save_every=save)))(ref_all, keys)
    errs = []
    for N in c["Ns"]:
        _, xs = jax.jit(jax.vmap(lambda x, kk: simulate(sde, x[:N], kk, save_every=save)))(ref_all, keys)
        e = jnp.sqrt(jnp.mean(jnp.sum((xs - ref[:, :, :N]) ** 2, -1), -1)).max(axis=1)  # sup_t RMS
        errs.append(np.asarray(e))
    fit = fit_loglog(np.asarray(c["Ns"], float), np.stack(errs))
    return {"errors": np.stack(errs).mean(1), "fit": fit.as_dict()}


_SECTIONS = {
    "sync": _run_sync,
    "lyapunov": _run_lyapunov,
    "strong": _run_strong,
    "weak_L": _run_weak_L,
    "weak_m": _run_weak_m,
    "chaos": _run_chaos,
}


def _run_config(c):
    return _SECTIONS[c["section"]](c)


# ------------------------------------------------------------------------------ output
def lyapunov_table(rows) -> list[dict]:
    """The Lyapunov rows as records {d, activation, method, attention, estimate, ci_half_width, closed_form}."""
    out = []
    for r in rows:
        c = r["config"]
        if c["section"] != "lyapunov":
            continue
        out.append(
            {
                "d": c["d"],
                "activation": c["act"],
                "method": c["method"],
                "attention": c["attention"],
                "estimate": r["estimate"],
                "ci_half_width": r["ci_half_width"],
                "closed_form": r["closed_form"],
                "within_ci": r["within_ci"],
            }
        )
    return out


def _print_table(table):
    print("\nTop Lyapunov exponent λ₁: estimate with its 95% Student-t confidence half-width over the runs,")
    print("vs the closed form ½[(d−3)κ'(1) − (d−1)κ(1)]; 'in CI' says whether the closed form lies in that interval")
    print(f"{'act':>7} {'d':>3} {'method':>9} {'attn':>5} {'estimate':>10} {'95% CI ±':>9} {'closed':>9} {'in CI':>5}")
    for t in table:
        print(
            f"{t['activation']:>7} {t['d']:>3} {t['method']:>9} {t['attention']:>5} {t['estimate']:>10.4f} "
            f"{t['ci_half_width']:>9.4f} {t['closed_form']:>9.4f} {'yes' if t['within_ci'] else 'NO':>5}"
        )


#: Per convergence section: x key, x label, y label, reference slope (theory) and its name.
_CONV = {
    "strong": ("Ls", "layers L", "strong error sup_t RMS |x_L − x_SDE|", -0.5, "order ½ (strong Euler)"),
    "weak_L": ("Ls", "layers L", "weak error |E<x₁,x₂>_T − SDE|", -1.0, "order 1 (weak Euler)"),
    "weak_m": ("ms", "MLP width m", "weak error |E<x₁,x₂>_T − SDE|", -1.0, "m⁻¹"),
    "chaos": ("Ns", "tokens N", "chaos deviation sup_t RMS |x^N − x^ref|", -0.5, "N^(−1/2)"),
}
_TITLES = {
    "strong": "discrete depth L → SDE (strong)",
    "weak_L": "depth L → SDE (weak)",
    "weak_m": "width m → Gaussian field (weak)",
    "chaos": "N tokens → large-N reference",
}


def _figures(out: Path, rows) -> list[Path]:
    from matplotlib.lines import Line2D

    from .plotting import COLORS, figure, log_ticks, reference_slope, save

    written = []
    sync = [r for r in rows if r["config"]["section"] == "sync"]
    if sync:
        biases = sorted({r["config"]["s_c"] for r in sync})
        fig, axes = figure(len(biases), ncols=2, width=5.2, height=4.0)
        styles = (("mean", "-"), ("median", "--"), ("logmean", ":"))
        for ax, b in zip(axes, biases):
            cells = [r for r in sync if r["config"]["s_c"] == b]
            for i, r in enumerate(cells):
                t = np.asarray(r["t"])
                for stat, ls in styles:
                    ax.semilogy(t, np.maximum(r["deficit"][stat], 1e-300), color=COLORS[i], ls=ls)
            handles = [
                Line2D([], [], color=COLORS[i], label=f"noise s_a = {r['config']['s_a']:g}")
                for i, r in enumerate(cells)
            ]
            handles += [
                Line2D([], [], color="0.3", ls=ls, label=f"{name} over runs")
                for name, ls in (("mean", "-"), ("median", "--"), ("log-mean (exp of mean log)", ":"))
            ]
            ax.legend(handles=handles, fontsize=7)
            ax.set_title(f"ReLU noise, s_b = 1, bias s_c = {b:g}, softmax attention β = 1")
            ax.set_xlabel("time t")
            ax.set_ylabel(r"energy $E_\beta = \frac{1}{2}\iint (e^\beta - e^{\beta\langle x,y\rangle})$")
        written.append(save(fig, out / "energy_deficit.png"))
    table = lyapunov_table(rows)
    if table:
        fig, (ax,) = figure(1, width=5.2, height=4.6)
        markers = {"benettin": "o", "twin": "s"}
        for j, act in enumerate(ACTS):
            for t in (t for t in table if t["activation"] == act):
                ax.errorbar(
                    t["closed_form"],
                    t["estimate"],
                    yerr=t["ci_half_width"],
                    fmt=markers[t["method"]],
                    color=COLORS[j],
                    mfc="none" if t["attention"] != "none" else COLORS[j],
                    ms=5,
                )
        lo = min(t["closed_form"] for t in table) - 0.1
        ax.plot([lo, 0], [lo, 0], "k:", lw=1)
        handles = [Line2D([], [], color=COLORS[j], marker="o", ls="", label=act) for j, act in enumerate(ACTS)]
        handles.append(Line2D([], [], color="k", ls=":", label="estimate = closed form"))
        present = {(t["method"], t["attention"] != "none") for t in table}
        for (method, att), text in (
            ((("benettin", False)), "o: Benettin, discrete model"),
            ((("twin", False)), "□: twin, exact SDE"),
            ((("benettin", True)), "hollow: softmax attention on"),
        ):
            if (method, att) in present:
                handles.append(
                    Line2D([], [], color="0.3", marker=markers[method], mfc="none" if att else "0.3", ls="", label=text)
                )
        ax.legend(handles=handles, fontsize=7)
        ax.set_xlabel("closed form λ₁ = ½[(d−3)κ'(1) − (d−1)κ(1)]")
        ax.set_ylabel("estimated λ₁ (95% CI over runs)")
        ax.set_title("Top Lyapunov exponent of the noise flow, d ∈ {2, 3, 5, 10}")
        written.append(save(fig, out / "lyapunov.png"))
    conv = [r for r in rows if r["config"]["section"] in _CONV]
    if conv:
        fig, axes = figure(len(conv), ncols=4, width=4.0, height=3.4)
        for ax, r in zip(axes, conv):
            c = r["config"]
            xkey, xlabel, ylabel, ref, ref_name = _CONV[c["section"]]
            x = np.asarray(c[xkey], float)
            e = np.asarray(r["errors"], float)
            ax.plot(x, e, "o-", color=COLORS[0], label="measured (mean over runs)")
            if "standard_errors" in r:  # weak errors: the statistical resolution
                ax.plot(x, 2 * np.asarray(r["standard_errors"]), ":", color=COLORS[1], label="2 standard errors")
            reference_slope(ax, x, (x[0], e[0]), ref, label=f"reference slope {ref:+g}: {ref_name}")
            log_ticks(ax, x, "x")
            ax.set_yscale("log")
            f = RateFit.from_dict(r["fit"])  # rows store NaN as null
            ci = (
                f"[{f.ci_low:.2f}, {f.ci_high:.2f}] (95% CI)" if np.isfinite(f.ci_low) else "(one mean per size: no CI)"
            )
            ax.set_title(f"{_TITLES[c['section']]}\nfitted slope {f.slope:.2f} {ci}", fontsize=9)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel, fontsize=8)
            ax.legend(fontsize=7)
        written.append(save(fig, out / "convergence.png"))
    return written


def run(args) -> int:
    import jax

    jax.config.update("jax_enable_x64", True)
    from .options import configuration, results_mode
    from .results import ResultsFolder

    if getattr(args, "paper", False) or getattr(args, "figure1", False) or getattr(args, "chaos", False):
        from . import sync_paper

        base = args.out
        rc = 0
        if args.paper:
            args.out = str(Path(base) / "paper")
            rc = sync_paper.run_paper(args)
        if args.figure1:
            args.out = str(Path(base) / "figure1")
            rc = rc or sync_paper.run_figure1(args)
        if args.chaos:
            args.out = str(Path(base) / "chaos_w2")
            rc = rc or sync_paper.run_chaos(args)
        return rc

    folder = ResultsFolder(args.out, "sync", configuration(args), mode=results_mode(args))
    out = folder.path
    cfgs = _configs(args.quick, args.seed, args.realisations)
    t0 = time.perf_counter()
    rows = folder.sweep(progress=not args.no_progress).run(cfgs, _run_config, desc="sync")
    table = lyapunov_table(rows)
    _print_table(table)
    print("\nSynchronisation (exact-noise SDE, softmax attention β = 1): fitted exponential rates (t ≥ T/4) of the")
    print("paper's energy E_β = ½∬(e^β − e^{β<x,y>}): of its mean, median and log-mean over runs; 'sync frac' is the")
    print("fraction of runs with diameter < 1e-6 at T")
    print(f"{'s_c':>4} {'s_a':>5} {'λ₁':>8} {'mean':>9} {'median':>9} {'log-mean':>9} {'sync frac':>9}")
    sync_summary = []
    for r in rows:
        c = r["config"]
        if c["section"] != "sync":
            continue
        rates = r["deficit"]["rates"]
        frac = float(np.asarray(r["frac_synchronised"])[-1])
        print(
            f"{c['s_c']:>4g} {c['s_a']:>5g} {r['lambda1']:>8.3f} {rates['mean']:>9.3f} {rates['median']:>9.3f} "
            f"{rates['logmean']:>9.3f} {frac:>9.2f}"
        )
        sync_summary.append(
            {
                "s_a": c["s_a"],
                "s_c": c["s_c"],
                "lambda1": r["lambda1"],
                "deficit_rates": rates,
                "dist_energy_p0.25_rates": r["dist_energy_p0.25"]["rates"],
                "final_frac_synchronised": frac,
            }
        )
    conv = {}
    if any(r["config"]["section"] in _CONV for r in rows):
        print("\nConvergence: mean errors at each size and the fitted log-log slope [95% bootstrap CI over runs]")
    for r in rows:
        c = r["config"]
        if c["section"] in ("strong", "weak_L", "weak_m", "chaos"):
            conv[c["section"]] = {
                "errors": r["errors"],
                "slope": r["fit"]["slope"],
                "ci": [r["fit"]["ci_low"], r["fit"]["ci_high"]],
            }
            print(
                f"{c['section']:>8}: {_CONV[c['section']][1]} {list(c[_CONV[c['section']][0]])}: errors "
                f"{np.round(np.asarray(r['errors'], float), 5).tolist()}  fitted slope "
                f"{r['fit']['slope']:.3f} [{RateFit.from_dict(r['fit']).ci_low:.3f}, "
                f"{RateFit.from_dict(r['fit']).ci_high:.3f}]"
            )
            if "standard_errors" in r:
                # weak errors: fit only the sizes where the error is resolved (> 2 standard errors)
                x = np.asarray(c["Ls"] if "Ls" in c else c["ms"], float)
                e, se = np.asarray(r["errors"], float), np.asarray(r["standard_errors"], float)
                ok = e > 2 * se
                conv[c["section"]]["standard_errors"] = r["standard_errors"]
                conv[c["section"]]["resolved_sizes"] = x[ok]
                conv[c["section"]]["slope_resolved"] = (
                    float(np.polyfit(np.log(x[ok]), np.log(e[ok]), 1)[0]) if ok.sum() >= 2 else float("nan")
                )
                print(
                    f"{'':>8}  resolved (> 2 SE) at {x[ok].tolist()}: slope {conv[c['section']]['slope_resolved']:.3f}"
                )
    written = _figures(out, rows)
    folder.write_summary(
        {
            "lyapunov": table,
            "synchronisation": sync_summary,
            "convergence": conv,
            "all_within_ci": all(t["within_ci"] for t in table),
            "quick": args.quick,
            "seconds_this_invocation": time.perf_counter() - t0,
        },
        *written,
    )
    print("\nwrote " + ", ".join(str(p) for p in [out / "rows.jsonl", *written, out / "summary.json"]))
    return 0
