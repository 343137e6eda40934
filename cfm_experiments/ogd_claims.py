"""The first paper's OGD claims measured against the exact infinite-context limit (``docs/ogd.md``).

The population trajectory θ̂_k follows the *exact* infinite-context loss: its context is the
Gaussian law μ = N(0, (s²/d) I) itself (s = ``context_scale``), through ``cfm_jax.forward``'s
Gaussian limit (the moment recursion, differentiated by autodiff; ``coupled_run(...,
population=μ)``). The n-context trajectories θ^{(n)}_k see n i.i.d. points of μ (the first n of
each sample's context); all of them see the same stream (x_0^k ~ N(0, I), y^k = the teacher's
exact population output). The ridge OGD step is θ ← (1 − ηλ)θ − η L·∂ℓ/∂θ_l. Students and
teachers: attention-only transformers (H = 1, L layers, ``Transformer.init`` scales). The context
covariance ∝ I/d keeps the attention logits' variance uᵀΣu = O(1) at every d, so that d does not
also change the softmax's effective temperature.

Rows (one per (d, regime), part ``"ogd"``; the seeds are vmapped, each drawing its own teacher,
student and stream from ``fold_in(key(seed), d)``):

* regime ``zero`` (λ = 0) at every d: the deviations ‖θ^{(n)}_k − θ̂_k‖_{L∞} and, per seed, C
  estimated on the region θ̂ visited (:func:`cfm_jax.ogd.estimate_lipschitz` with the exact
  population gradient); λ_c = 2C per seed;
* ``weak`` (λ = weak·λ_c, at d0 only) and ``strong`` (λ = min(strong·λ_c, 0.9/η), at every d):
  the same, each seed with its own λ from the ``zero`` computation of that d (cached in-process;
  recomputed when the ``zero`` row was written by an earlier process). λ is traced: one
  compilation per d serves every regime.

Each row keeps, per seed and n: the sup over all k, the sup over k ≤ k_c = 1/η (the paper's
horizon) and over k ≤ 1/(ηC) (where the worst-case factor (1 + ηC)^k reaches e), and the maxima
over 8 equal windows of k spanning (k_c, K] (their log-log trend in k is the growth exponent β:
0 for a bounded deviation, 1 for linear growth); plus the seed-mean curve for the figure. η is
chosen so that ηC is a few percent at d0: the ridge acts on the time scale 1/(ηλ), which K must
exceed several times for a bounded-or-not verdict.

Summary (:func:`summarize`): the n-slope (claim −1/2), the d-exponent at fixed n (claim +1/2,
i.e. √(d/n)), C and λ_c, and the growth exponent after k_c per regime, with 95 % bootstrap CIs
over seeds. Verdicts: a decay exponent at least as steep as the bound's holds, a slower decay is
"not observed", none is "refuted"; a d-exponent whose CI lies above +1/2 is "refuted"; "bounded"
means every n's growth-exponent CI reaches 0 or lies below it.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

PART = "ogd"
COMMAND = "cfm-jax constants --parts ogd"
REGIMES = ("zero", "weak", "strong")
DEFAULTS: dict[str, Any] = dict(
    d0=4,
    dims=(2, 4, 8, 16),
    layers=2,
    batch=4,
    ns=(4, 16, 64, 256, 512),
    context_scale=0.5,
    eta=0.5,
    steps=400,
    seeds=6,
    weak=1 / 8,
    strong=1.5,
    curve_points=160,
)
QUICK: dict[str, Any] = dict(DEFAULTS, d0=2, dims=(2, 4), ns=(4, 16, 64), steps=48, seeds=3, curve_points=60)
FIGURES = ("ogd_claims_n.png", "ogd_claims_d.png", "ogd_claims_k.png")


def configs(quick: bool, seed: int) -> list[dict]:
    """One JSON-able row configuration per (d, regime): ``zero`` and ``strong`` at every d,
    ``weak`` at d0 only; ``seed`` fixes teacher, student and the seeds' streams."""
    base: dict[str, Any] = {
        k: (list(v) if isinstance(v, tuple) else v) for k, v in (QUICK if quick else DEFAULTS).items()
    }
    base["seed"] = int(seed)
    out = []
    for d in base["dims"]:
        for regime in REGIMES:
            if regime == "weak" and d != base["d0"]:
                continue
            out.append({"part": PART, "dim": int(d), "regime": regime, **base})
    return out


# --- the problem -------------------------------------------------------------------------------


def _population(config: dict):
    """μ = N(0, (context_scale²/d) I)."""
    import jax.numpy as jnp

    from cfm_jax import GaussianMeasure

    d = config["dim"]
    dtype = jnp.result_type(float)
    return GaussianMeasure(jnp.zeros(d, dtype), (config["context_scale"] ** 2 / d) * jnp.eye(d, dtype=dtype))


def _models(config: dict, key, population):
    """Teacher, student and stream of one seed (pure in ``key``: traceable, vmappable)."""
    import jax
    import jax.numpy as jnp

    from cfm_jax import Transformer

    kt, ks, kstream = jax.random.split(key, 3)
    dtype = jnp.result_type(float)
    mk = lambda k: Transformer.init(k, config["dim"], heads=1, mlp_width=0, layers=config["layers"], dtype=dtype)  # noqa: E731
    teacher, student = mk(kt), mk(ks)
    stream = PopulationStream(teacher, population, kstream, batch=config["batch"], context_size=max(config["ns"]))
    return teacher, student, stream


def seed_keys(config: dict):
    """``(S,)`` keys, one per seed: each draws its own teacher, student and stream."""
    import jax

    base = jax.random.fold_in(jax.random.key(config["seed"]), config["dim"])
    return jax.random.split(base, config["seeds"])


@functools.cache
def _stream_class():
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    from jaxtyping import Array

    from cfm_jax import AbstractCFM, AbstractStream, GaussianMeasure, Sample, forward

    class _PopulationStream(AbstractStream):
        """Sample k: x_0 ~ N(0, I) ``(batch, d)``, ``context_size`` i.i.d. points of μ, y = the
        teacher's x_1 on the population μ itself (the exact infinite-context output)."""

        teacher: AbstractCFM
        population: GaussianMeasure
        key: Array
        batch: int = eqx.field(static=True)
        context_size: int = eqx.field(static=True)

        def __call__(self, k) -> Sample:
            kx, kz = jax.random.split(jax.random.fold_in(self.key, k))
            mu = self.population
            x0 = jax.random.normal(kx, (self.batch, mu.dim), mu.mean.dtype)
            z = (
                mu.mean
                + jax.random.normal(kz, (self.context_size, mu.dim), mu.mean.dtype) @ jnp.linalg.cholesky(mu.cov).T
            )
            y = forward(self.teacher, x0, mu, throw=False).x1  # generated inputs: cacheable, unchecked
            return Sample(x0, z, jax.lax.stop_gradient(y))

    return _PopulationStream


def PopulationStream(teacher, population, key, *, batch: int, context_size: int):
    """The stream of the measurement (a ``cfm_jax`` stream; see the module docstring)."""
    return _stream_class()(teacher, population, key, batch, context_size)


@functools.lru_cache(maxsize=8)
def _runner(shape_key: str):
    """The compiled all-seeds run ``(μ, keys (S,), λ (S,)) -> (deviations, losses, ‖θ̂‖, C)``.

    Per seed: the coupled run at its λ, then C on the region its θ̂ visited (16 points along the
    path, 16 pairs, samples after the ones the run used, exact population gradients). λ is traced,
    so one compilation serves every regime of a d.
    """
    import equinox as eqx
    import jax
    import optax

    from cfm_jax import loss_and_grad, ogd

    config = json.loads(shape_key)
    ns, eta, K = tuple(config["ns"]), config["eta"], config["steps"]
    stride = max(1, K // 16)

    @eqx.filter_jit
    def all_seeds(population, keys, lams):
        def one(key, lam, s):
            _, student, stream = _models(config, key, population)
            # ogd.ridge_sgd's step θ ← (1 − ηλ)θ − η g, with λ traced
            opt = optax.chain(optax.add_decayed_weights(lam), optax.sgd(eta))
            # inputs generated here: the gradient without value checks keeps the program cacheable
            grad_fn = functools.partial(loss_and_grad, throw=False)
            r = ogd.coupled_run(student, stream, ns, opt, K, record_params=True, population=population, grad_fn=grad_fn)
            visited = jax.tree.map(lambda a: a[stride - 1 :: stride], r.ref_params)
            est = ogd.estimate_lipschitz(
                student,
                visited,
                stream,
                jax.random.fold_in(jax.random.key(0), s),
                num_pairs=16,
                first_step=K,
                population=population,
                grad_fn=grad_fn,
            )
            return r.deviations, r.losses, r.ref_norms, est.C

        return jax.vmap(one)(keys, lams, jax.numpy.arange(lams.shape[0]))

    return all_seeds


def _runs(config: dict, lams):
    """All seeds' coupled runs, seed s at ridge ``lams[s]`` (vmapped), and C on their regions."""
    import jax
    import jax.numpy as jnp

    fn = _runner(_shape_key(config))
    lams = jnp.asarray(lams, jnp.result_type(float))
    return jax.block_until_ready(fn(_population(config), seed_keys(config), lams))


def _shape_key(config: dict) -> str:
    return json.dumps({k: v for k, v in config.items() if k != "regime"}, sort_keys=True)


@functools.lru_cache(maxsize=16)
def _pilot(shape_key: str) -> dict:
    """The λ = 0 row of a configuration (cached: the weak and strong rows need its λ_c)."""
    config = json.loads(shape_key)
    t0 = time.perf_counter()
    devs, losses, norms, C = _runs(config, np.zeros(config["seeds"]))
    Cs = [float(c) for c in np.asarray(C)]
    return {
        **_measure(config, np.asarray(devs), np.asarray(losses), np.asarray(norms), Cs),
        "lam": [0.0] * config["seeds"],
        "C_seeds": Cs,
        "region_C_seeds": Cs,
        "seconds": time.perf_counter() - t0,
    }


def ridges(C: float, eta: float, weak: float = 1 / 8, strong: float = 1.5) -> dict:
    """λ per regime from λ_c = 2C: 0, weak·λ_c, min(strong·λ_c, 0.9/η)."""
    lam_c = 2 * C
    return {"zero": 0.0, "weak": weak * lam_c, "strong": min(strong * lam_c, 0.9 / eta)}


def _windows(config: dict, devs: np.ndarray):
    """Maxima over 8 equal windows of k spanning (k_c, K]: (each window's last step (8,), maxima
    (S, 8, len(ns))); against the last step, a growth ∝ k^β has log-log slope exactly β."""
    K = devs.shape[1]
    kc = _kc(config)
    if K < kc + 16:
        raise ValueError(f"steps = {K} must exceed k_c + 16 = {kc + 16} to measure the growth after k_c.")
    edges = np.linspace(kc, K, 9).round().astype(int)
    maxima = np.stack([devs[:, a:b].max(1) for a, b in zip(edges[:-1], edges[1:])], axis=1)  # steps a+1 … b
    return edges[1:].astype(float), maxima


def _kc(config: dict) -> int:
    """k_c = 1/η (rounded, >= 1): the paper's horizon."""
    return max(1, round(1 / config["eta"]))


def _measure(config: dict, devs: np.ndarray, losses: np.ndarray, norms: np.ndarray, Cs) -> dict:
    """Per-seed statistics of deviations ``devs (S, K, len(ns))`` (JSON-able lists); ``Cs`` the
    seeds' C on their λ = 0 region (for the horizon 1/(ηC))."""
    S, K, _ = devs.shape
    kc = _kc(config)
    kC = [int(min(K, max(1, round(1 / (config["eta"] * c))))) for c in Cs]
    ends, maxima = _windows(config, devs)
    stride = max(1, K // config["curve_points"])
    curve = np.exp(np.log(np.maximum(devs, 1e-300)).mean(0))[stride - 1 :: stride]  # (P, len(ns)) geometric mean
    return {
        "sup_dev": devs.max(1).tolist(),  # (S, len(ns))
        "sup_dev_kc": devs[:, :kc].max(1).tolist(),
        "k_C": kC,  # 1/(ηC) per seed, capped at K
        "sup_dev_kC": [devs[s, : kC[s]].max(0).tolist() for s in range(S)],
        "argmax_k": (devs.argmax(1) + 1).tolist(),
        "window_k": ends.tolist(),
        "window_max": maxima.tolist(),  # (S, W, len(ns))
        "curve_k": list(range(stride, K + 1, stride)),
        "curve": curve.tolist(),
        "loss_late": losses[:, -max(1, K // 4) :].mean((0, 1)).tolist(),  # per trajectory (ns..., population)
        "ref_norm_final": float(norms[:, -1].mean()),
    }


def run_config(config: dict) -> dict:
    """One row: the coupled runs of every seed at the row's ridge, and C on their region."""
    pilot = _pilot(_shape_key(config))
    if config["regime"] == "zero":
        return pilot
    lams = [ridges(C, config["eta"], config["weak"], config["strong"])[config["regime"]] for C in pilot["C_seeds"]]
    t0 = time.perf_counter()
    devs, losses, norms, C = _runs(config, lams)
    return {
        **_measure(config, np.asarray(devs), np.asarray(losses), np.asarray(norms), pilot["C_seeds"]),
        "lam": lams,
        "C_seeds": pilot["C_seeds"],
        "region_C_seeds": [float(c) for c in np.asarray(C)],
        "seconds": time.perf_counter() - t0,
    }


# --- summary -----------------------------------------------------------------------------------


def _rows(rows, regime, dim=None):
    return [
        r
        for r in rows
        if r["config"]["part"] == PART
        and r["config"]["regime"] == regime
        and (dim is None or r["config"]["dim"] == dim)
    ]


def _fmt(fit) -> str:
    return f"{fit.slope:+.2f} [{fit.ci_low:+.2f}, {fit.ci_high:+.2f}]"


def growth_fit(row: dict):
    """Growth exponent β of the window maxima in k after k_c (per n; fit over seeds)."""
    from cfm_jax.stats import fit_loglog

    k = np.asarray(row["window_k"])
    w = np.asarray(row["window_max"])  # (S, W, len(ns))
    return [fit_loglog(k, w[:, :, i].T) for i in range(w.shape[2])]


def _slope_verdict(fit, claim: float) -> str:
    """A decay exponent against the bound's: at least as fast (CI reaches or passes below the
    claim) holds; slower but decaying: not observed; no decay: refuted."""
    if fit.ci_low <= claim:
        return "holds"
    if fit.ci_high < 0:
        return "not observed at these sizes"
    return "refuted at these sizes"


def _bounded(fits) -> bool:
    """Bounded after k_c: every n's growth-exponent CI reaches 0 or lies below it."""
    return all(f.ci_low <= 0.0 for f in fits)


def summarize(rows: list[dict]) -> list[dict]:
    """Claim lines (claim, command, figure, measured, verdict) from the part's rows."""
    from cfm_jax.stats import fit_loglog, mean_ci

    zero = _rows(rows, "zero")
    if not zero:
        return []
    cfg = zero[0]["config"]
    ns = np.asarray(cfg["ns"], float)
    d0, eta = cfg["d0"], cfg["eta"]
    kc = _kc(cfg)
    lines = []
    by = {reg: {r["config"]["dim"]: r for r in _rows(rows, reg)} for reg in REGIMES}

    # 1. n-slope, strong ridge (all k) and λ = 0 up to k_c
    parts = []
    verdicts = []
    for reg, key, what in (
        ("strong", "sup_dev", "sup over all k"),
        ("zero", "sup_dev_kc", f"sup over k ≤ k_c = 1/η = {kc}"),
        ("zero", "sup_dev_kC", "sup over k ≤ 1/(ηC)"),
    ):
        r = by[reg].get(d0)
        if r is None:
            continue
        fit = fit_loglog(ns, np.asarray(r[key]).T)
        parts.append(f"{reg} ({what}): n-slope {_fmt(fit)}")
        verdicts.append(_slope_verdict(fit, -0.5))
    if parts:
        lines.append(
            dict(
                claim=f"sup_k ‖θ_k − θ̂_k‖_L∞ = O(n^-1/2) (λ > λ_c: all k; λ = 0: k ≤ k_c ≈ 1/η), d = {d0}",
                command=COMMAND,
                figure=FIGURES[0],
                measured=f"n = {int(ns[0])}…{int(ns[-1])}, {len(zero[0]['sup_dev'])} seeds: " + "; ".join(parts),
                verdict=_worst(verdicts),
            )
        )

    # 2. d-exponent at fixed n (strong ridge, sup over all k)
    dims = sorted(by["strong"])
    if len(dims) >= 2:
        sup = np.asarray([by["strong"][d]["sup_dev"] for d in dims])  # (D, S, len(ns))
        fits = [fit_loglog(np.asarray(dims, float), sup[:, :, i]) for i in range(len(ns))]
        n_fits = [fit_loglog(ns, sup[j].T) for j in range(len(dims))]
        ver = ["holds" if f.ci_low <= 0.5 else "refuted at these sizes" for f in fits]
        lines.append(
            dict(
                claim="sup_k ‖θ_k − θ̂_k‖_L∞ = O(√(d/n)): d-exponent ≤ +1/2 at fixed n (λ > λ_c)",
                command=COMMAND,
                figure=FIGURES[1],
                measured=f"d = {dims[0]}…{dims[-1]}, d-exponent: "
                + ", ".join(f"n={int(n)} {_fmt(f)}" for n, f in zip(ns, fits))
                + "; n-slope per d: "
                + ", ".join(f"d={d} {_fmt(f)}" for d, f in zip(dims, n_fits)),
                verdict=_worst(ver),
            )
        )

    # 3. λ > λ_c = 2C: bounded uniformly in k
    cs = {d: mean_ci(by["zero"][d]["C_seeds"]) for d in sorted(by["zero"])}
    strong = by["strong"].get(d0)
    if strong is not None:
        gs = growth_fit(strong)
        own = np.asarray(strong["lam"]) / (2 * np.asarray(strong["region_C_seeds"]))
        lines.append(
            dict(
                claim="λ > λ_c = 2C (C: Lipschitz constant on the visited region): "
                "the deviation is bounded uniformly in k",
                command=COMMAND,
                figure=FIGURES[2],
                measured="C on the λ = 0 region (mean ± 95 % t over seeds): "
                + ", ".join(f"d={d} {m:.3g} ± {h:.2g}" for d, (m, h) in cs.items())
                + f"; d = {d0}: λ = {_ratios(strong)} λ_c per seed, i.e. λ/2C on the region it visits "
                f"{own.min():.3g}…{own.max():.3g}; growth exponent β after k_c (0: bounded, 1: linear): "
                + ", ".join(f"n={int(n)} {_fmt(g)}" for n, g in zip(ns, gs)),
                verdict="holds" if _bounded(gs) else "refuted at these sizes",
            )
        )

    # 4. weak ridge after k_c
    weak = by["weak"].get(d0)
    if weak is not None:
        gs = growth_fit(weak)
        lines.append(
            dict(
                claim="0 < λ < λ_c: the bound holds only up to k_c ≈ 1/η; beyond, the deviation degrades",
                command=COMMAND,
                figure=FIGURES[2],
                measured=f"d = {d0}, λ = {_ratios(weak)} λ_c, K = {cfg['steps']} = {cfg['steps'] * eta:.0f}/η; "
                "growth exponent β of window maxima after k_c: "
                + ", ".join(f"n={int(n)} {_fmt(g)}" for n, g in zip(ns, gs)),
                verdict="not observed at these sizes" if _bounded(gs) else "holds",
            )
        )

    # 5. λ = 0 after k_c: exponential (1 + ηC)^k or not
    z = by["zero"].get(d0)
    if z is not None:
        gs = growth_fit(z)
        w = np.asarray(z["window_max"])  # (S, W, len(ns))
        factor = np.exp(np.log(w[:, -1] / w[:, 0]).mean(0))  # (len(ns),) geometric mean over seeds
        k = np.asarray(z["window_k"])
        bound = float(np.exp(np.mean((k[-1] - k[0]) * np.log1p(eta * np.asarray(z["C_seeds"])))))
        if _bounded(gs):
            verdict = "refuted at these sizes"
        elif np.all(factor >= bound):
            verdict = "holds"
        else:
            verdict = "not observed at these sizes"
        lines.append(
            dict(
                claim="λ = 0: beyond k_c ≈ 1/η the deviation diverges (step factor 1 + ηC, exponential in k)",
                command=COMMAND,
                figure=FIGURES[2],
                measured=f"d = {d0}, K = {cfg['steps']} = {cfg['steps'] * eta:.0f}/η; growth exponent β: "
                + ", ".join(f"n={int(n)} {_fmt(g)}" for n, g in zip(ns, gs))
                + f"; growth from k = {k[0]:.0f} to {k[-1]:.0f}: ×"
                + "/".join(f"{f:.2g}" for f in factor)
                + f" (n = {'/'.join(str(int(n)) for n in ns)}) against (1 + ηC)^Δk = ×{bound:.3g}",
                verdict=verdict,
            )
        )
    return lines


def _ratios(row) -> str:
    """λ/λ_c over the seeds (λ_c = 2C of each seed's λ = 0 region): one value or a range."""
    r = np.asarray(row["lam"]) / (2 * np.asarray(row["C_seeds"]))
    return f"{r.min():.3g}" if np.ptp(r) <= 1e-6 * r.max() else f"{r.min():.3g}…{r.max():.3g}"


def _worst(verdicts: list[str]) -> str:
    order = ["refuted at these sizes", "not observed at these sizes", "holds with a different constant", "holds"]
    return min(verdicts, key=order.index)


# --- figures -----------------------------------------------------------------------------------


def figures(rows: list[dict], out_dir: Path) -> list[Path]:
    """``ogd_claims_n.png`` (sup deviation vs n per regime), ``ogd_claims_d.png`` (vs d per n,
    and C vs d), ``ogd_claims_k.png`` (deviation vs step k per regime); the paths written."""
    from .plotting import save

    out_dir = Path(out_dir)
    zero = _rows(rows, "zero")
    if not zero:
        return []
    cfg = zero[0]["config"]
    paths = [save(_figure_n(rows, cfg), out_dir / FIGURES[0])]
    if len({r["config"]["dim"] for r in _rows(rows, "strong")}) >= 2:
        paths.append(save(_figure_d(rows, cfg), out_dir / FIGURES[1]))
    paths.append(save(_figure_k(rows, cfg), out_dir / FIGURES[2]))
    return paths


def _geo(a, axis=0):
    a = np.asarray(a, float)
    return np.exp(np.log(np.maximum(a, 1e-300)).mean(axis))


def _figure_n(rows, cfg):
    from cfm_jax.stats import fit_loglog

    from .plotting import COLORS, figure, log_ticks, log_values, reference_slope

    ns = np.asarray(cfg["ns"], float)
    kc = _kc(cfg)
    fig, axes = figure(1, ncols=1, width=6.4, height=4.4)
    ax = axes[0]
    series = [
        ("strong", "sup_dev", "λ > λ_c, sup over all k", "o"),
        ("weak", "sup_dev", "0 < λ < λ_c, sup over all k", "s"),
        ("zero", "sup_dev_kc", f"λ = 0, sup over k ≤ k_c = 1/η = {kc}", "^"),
        ("zero", "sup_dev_kC", "λ = 0, sup over k ≤ 1/(ηC)", "D"),
        ("zero", "sup_dev", "λ = 0, sup over all k", "v"),
    ]
    anchor = None
    for i, (reg, key, label, marker) in enumerate(series):
        rs = _rows(rows, reg, cfg["d0"])
        if not rs:
            continue
        sup = np.asarray(rs[0][key])  # (S, len(ns))
        y = _geo(sup)
        fit = fit_loglog(ns, sup.T)
        ax.errorbar(
            ns, y, yerr=np.stack([y - sup.min(0), sup.max(0) - y]), marker=marker, ls="none", capsize=2, color=COLORS[i]
        )
        ax.plot(
            ns,
            fit.prefactor * ns**fit.slope,
            color=COLORS[i],
            lw=1.2,
            marker=marker,
            markevery=[],
            label=f"{label}: slope {_fmt(fit)}",
        )
        anchor = anchor or (ns[0], y[0])
    if anchor is not None:
        reference_slope(ax, ns, anchor, -0.5, label="reference slope −1/2")
    log_values(ax, "y")
    log_ticks(ax, ns, "x")
    ax.set_xlabel("context size n")
    ax.set_ylabel("sup ‖θ_k^(n) − θ̂_k‖_L∞ (bars: range over seeds)")
    ax.set_title(f"OGD against the exact population gradient, d = {cfg['d0']}")
    ax.legend(fontsize=7, title="markers: data; lines: fits [95 % CI]", title_fontsize=7)
    fig.tight_layout()
    return fig


def _figure_d(rows, cfg):
    from cfm_jax.stats import fit_loglog

    from .plotting import COLORS, figure, log_ticks, log_values, reference_slope

    ns = cfg["ns"]
    strong = {r["config"]["dim"]: r for r in _rows(rows, "strong")}
    dims = np.asarray(sorted(strong), float)
    fig, axes = figure(2, ncols=2, width=5.2, height=4.2)
    ax = axes[0]
    sup = np.asarray([strong[int(d)]["sup_dev"] for d in dims])  # (D, S, len(ns))
    for i, n in enumerate(ns):
        y = _geo(sup[:, :, i], axis=1)
        fit = fit_loglog(dims, sup[:, :, i])
        ax.plot(dims, y, marker="o", ls="none", color=COLORS[i % len(COLORS)])
        ax.plot(
            dims,
            fit.prefactor * dims**fit.slope,
            color=COLORS[i % len(COLORS)],
            lw=1.2,
            label=f"n = {n}: d-exponent {_fmt(fit)}",
        )
        if i == 0:
            reference_slope(ax, dims, (dims[0], y[0]), 0.5, label="reference slope +1/2 (√d)")
    log_values(ax, "y")
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi * (hi / lo) ** 0.6)  # head room: the legend sits above the data
    log_ticks(ax, dims, "x")
    ax.set_xlabel("dimension d")
    ax.set_ylabel("sup_k ‖θ_k^(n) − θ̂_k‖_L∞ (geometric mean)")
    ax.set_title(f"λ = {cfg['strong']:g}·λ_c: d-dependence at fixed n (dots: data, lines: fits)", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[1]
    zero = {r["config"]["dim"]: r for r in _rows(rows, "zero")}
    dz = np.asarray(sorted(zero), float)
    C = [np.asarray(zero[int(d)]["C_seeds"]) for d in dz]
    ax.errorbar(
        dz,
        [c.mean() for c in C],
        yerr=np.stack([[c.mean() - c.min() for c in C], [c.max() - c.mean() for c in C]]),
        marker="o",
        capsize=3,
        color=COLORS[0],
        label="C on the λ = 0 region (mean; bars: range over seeds)",
    )
    log_values(ax, "y")
    log_ticks(ax, dz, "x")
    ax.set_xlabel("dimension d")
    ax.set_ylabel("Lipschitz estimate C (λ_c = 2C)")
    ax.set_title("C of the exact population gradient map")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _figure_k(rows, cfg):
    from .plotting import COLORS, figure, log_values

    regs = [reg for reg in REGIMES if _rows(rows, reg, cfg["d0"])]
    fig, axes = figure(len(regs), ncols=len(regs), width=4.2, height=3.8)
    for ax in axes[1:]:
        ax.sharey(axes[0])
    kc = 1 / cfg["eta"]
    for ax, reg in zip(axes, regs):
        r = _rows(rows, reg, cfg["d0"])[0]
        k = np.asarray(r["curve_k"])
        curve = np.asarray(r["curve"])
        for i, n in enumerate(cfg["ns"]):
            ax.plot(k, curve[:, i], color=COLORS[i % len(COLORS)], lw=1.3, label=f"n = {n}")
        ax.axvline(kc, color="0.3", ls=":", lw=1.2, label="k_c = 1/η")
        kC = np.exp(np.mean(np.log(r["k_C"])))
        ax.axvline(kC, color="0.3", ls="--", lw=1.0, label="1/(ηC) (geometric mean over seeds)")
        log_values(ax, "y")
        lam = "λ = 0" if reg == "zero" else f"λ = {_ratios(r)}·λ_c (λ_c = 2C per seed)"
        ax.set_title(f"{reg}: {lam}, d = {cfg['d0']}", fontsize=9)
        ax.set_xlabel("OGD step k")
    axes[0].legend(fontsize=7, loc="lower right")  # the same line styles in every panel
    axes[0].set_ylabel("‖θ_k^(n) − θ̂_k‖_L∞ (geometric mean over seeds)")
    fig.tight_layout()
    return fig


__all__ = [
    "COMMAND",
    "DEFAULTS",
    "PART",
    "QUICK",
    "configs",
    "figures",
    "ridges",
    "run_config",
    "summarize",
]
