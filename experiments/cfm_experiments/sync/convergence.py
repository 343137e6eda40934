"""Parts ``strong``, ``chaos``, ``weak_L`` and ``weak_m``: convergence rates, one row each.

* ``strong``: the exact-noise Euler scheme of the limit SDE with L steps against the same
  scheme with 128 (``--quick``) or 256 steps driven by the same Brownian increments
  (``integrate_increments``: a strong coupling); sup over t ∈ {0, ¼, ½, ¾, 1} of the RMS token
  error, log-log slope in L with its bootstrap interval over runs. Claim: strong order ½.
* ``chaos``: N tokens against an N_ref-token reference driven by the same random-feature
  noise (the same layer keys: the same MLPs), the N tokens being the reference's first N;
  sup_t RMS token deviation, slope in N. Claim: N^{-1/2}.
* ``weak_L`` / ``weak_m`` (not under ``--quick``): |E⟨x₁, x₂⟩_T(model) − E⟨x₁, x₂⟩_T(SDE)| for
  two tokens, each expectation a Monte Carlo mean over R runs; the discrete model (m = 64)
  against the exact-noise SDE (64 steps) in the depth L, and the discrete model at L = 2
  against the Gaussian-field scheme with the same step (m = ∞) in the width m, so that only
  the non-Gaussianity of the finite-width MLP separates them. An error is *resolved* where it
  exceeds twice its standard error; the slope is fitted on the resolved sizes, its interval a
  bootstrap over the runs (the reference's and each size's resampled independently). Claims:
  weak order 1 in L, and the 1/m width term of the paper's deep–wide rate.

Every interval is :func:`cfm_jax.stats.bootstrap` (directly or through ``fit_loglog``); the
verdicts follow the order rule of :mod:`.common`.
"""

from __future__ import annotations

import functools
import math
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from cfm_jax import compiled
from cfm_jax.stats import RateFit, bootstrap, fit_loglog
from cfm_jax.stochastic import (
    NoiseKernel,
    SphereAttention,
    SphereSDE,
    StochasticTransformer,
    brownian_increments,
    integrate_increments,
    random_tokens,
    simulate,
    simulate_many,
)

from ..declarations.sync import CHAOS, STRONG, WEAK_L, WEAK_M
from ..plotting import COLORS, figure, log_ticks, log_values, reference_slope, save
from ..protocol import Claim, Part, Settings, Summary
from ..verdicts.sync import order_verdict
from .common import interval_text, random_starts, sup_rms


@compiled
def coupled_paths(sde, x0, dB, save_every: int):
    """``(R, S, N, d)``: the exact-noise scheme from ``x0`` driven by each run's increments ``dB (R, K, N, d)``."""
    return jax.vmap(lambda b: integrate_increments(sde, x0, b, save_every=save_every))(dB)


@compiled
def feature_paths(sde, x0, keys, save_every: int):
    """``(R, S, N, d)``: one run per start ``x0 (R, N, d)`` and key; the same key drives systems of any size."""
    return jax.vmap(lambda x, k: simulate(sde, x, k, save_every=save_every)[1])(x0, keys)


@compiled
def overlaps(model, x0, keys):
    """``(R,)``: ⟨x₁, x₂⟩ at the horizon, one run per key, from the shared start ``x0 (2, d)``."""
    _, x = simulate_many(model, x0, keys)
    return jnp.sum(x[:, 0] * x[:, 1], -1)


@functools.partial(jax.jit, static_argnums=(1, 2))
def increments(keys, steps: int, shape: tuple[int, ...]):
    """``(R, steps, *shape)``: one run's Brownian increments on [0, 1] per key."""
    return jax.vmap(lambda k: brownian_increments(k, steps, shape, 1.0))(keys)


def weak_fit(values, reference, samples, *, seed: int = 0) -> dict:
    """The weak errors |mean(samples[k]) − mean(reference)| at ``values[k]``, their standard errors,
    the sizes where they are resolved (> 2 standard errors) and the log-log slope over those with
    its bootstrap interval (each sample resampled independently); ``reference`` and each sample:
    ``(R,)`` per-run values."""
    ref = np.asarray(reference, np.float64)
    runs = [np.asarray(s, np.float64) for s in samples]
    x = np.asarray(values, float)
    ref_se = ref.std() / math.sqrt(ref.size)
    errs = np.array([abs(s.mean() - ref.mean()) for s in runs])
    ses = np.array([math.hypot(s.std() / math.sqrt(s.size), ref_se) for s in runs])
    ok = errs > 2 * ses
    lx = np.log(x[ok])

    def slope(r, *ss):
        e = np.abs(np.array([s.mean() for s in ss]) - r.mean())
        return np.polyfit(lx, np.log(np.maximum(e, np.finfo(np.float64).tiny)), 1)[0]

    if ok.sum() >= 2:
        iv = bootstrap(slope, ref, *(s for s, k in zip(runs, ok) if k), seed=seed)
        resolved = [iv.value, iv.ci_low, iv.ci_high]
    else:
        resolved = [float("nan")] * 3
    return {
        "statistic": "E<x1,x2>_T",
        "errors": errs,
        "standard_errors": ses,
        "fit": fit_loglog(x, errs).as_dict(),  # every size, one mean each: no interval
        "resolved_sizes": x[ok],
        "slope_resolved": resolved[0],
        "slope_resolved_ci": resolved[1:],
    }


class _Rate(Part):
    """A convergence part: one row, a fitted slope, a claimed order and a one-panel figure."""

    float64 = True
    #: (x key in the config, x label, y label, claimed order p of error = O(x^{-p}), its name, the claim)
    axis: tuple[str, str, str, float, str, str]

    def slope(self, row: dict) -> tuple[float, float, float]:
        f = RateFit.from_dict(row["fit"])
        return f.slope, f.ci_low, f.ci_high

    def sizes(self, row: dict) -> str:
        return ""

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        if not rows:
            return Summary(text="not run under --quick")
        (r,) = rows
        xkey, xlabel, _, order, _, claim = self.axis
        x = list(r["config"][xkey])
        s, lo, hi = self.slope(r)
        errs = np.round(np.asarray(r["errors"], float), 5).tolist()
        text = f"{xlabel} {x}: mean errors {errs}; fitted slope {interval_text(s, lo, hi, 3)}"
        if "standard_errors" in r:
            text += f"\nresolved (> 2 standard errors) at {list(r['resolved_sizes'])}; the slope is fitted there"
        line = Claim(
            claim=claim,
            measured=f"slope {interval_text(s, lo, hi)} (95% bootstrap CI over runs) vs −{order:g}",
            verdict=order_verdict(lo, hi, order),
            figure=f"{self.name}.png",
            sizes=self.sizes(r),
        )
        data = {"errors": r["errors"], "slope": s, "ci": [lo, hi]}
        if "standard_errors" in r:
            data.update(standard_errors=r["standard_errors"], resolved_sizes=r["resolved_sizes"])
        return Summary(text=text, data=data, claims=(line,))

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [save(rate_figure(self, rows[0]), out / f"{self.name}.png")] if rows else []


class Strong(_Rate):
    declaration = STRONG
    title = "Strong convergence of the exact-noise scheme in its number of steps L (coupled to a fine scheme)"
    axis = (
        "Ls",
        "steps L",
        r"strong error $\sup_t$ RMS $|x_L - x_{\mathrm{fine}}|$",
        0.5,
        r"order $\frac{1}{2}$ (strong Euler)",
        "the exact-noise Euler scheme of the limit SDE converges strongly at order ½ ($\\sup_t$ RMS token "
        "error = $O(L^{-1/2})$)",
    )

    def configs(self, settings: Settings) -> list[dict]:
        quick = settings.quick
        return [
            dict(
                Ls=[4, 8, 16, 32] if quick else [4, 8, 16, 32, 64],
                fine=128 if quick else 256,
                N=4 if quick else 8,
                d=3,
                R=16 if quick else 32,
                seed=settings.seed,
            )
        ]

    def run(self, config: dict) -> dict:
        c = config
        k = NoiseKernel("relu", 1.0, 1.0, 0.5)
        att = SphereAttention("USA", 1.0)
        N, d, R, fine = c["N"], c["d"], c["R"], c["fine"]
        x0 = random_tokens(jax.random.key(c["seed"]), N, d)
        dB = increments(jax.random.split(jax.random.key(c["seed"] + 1), R), fine, (N, d))
        paths = lambda L: coupled_paths(SphereSDE(k, L, 1.0, att), x0, dB, L // 4)  # noqa: E731
        ref = paths(fine)  # states at t ∈ {0, ¼, ½, ¾, 1}
        errs = np.stack([np.asarray(sup_rms(paths(L), ref)) for L in c["Ls"]])
        return {"errors": errs.mean(1), "fit": fit_loglog(np.asarray(c["Ls"], float), errs).as_dict()}

    def sizes(self, row: dict) -> str:
        c = row["config"]
        return f"L ∈ {c['Ls']} vs {c['fine']} steps; N = {c['N']}, d = {c['d']}, {c['R']} runs"


class Chaos(_Rate):
    declaration = CHAOS
    title = "Propagation of chaos: N tokens against a large-N reference driven by the same noise"
    axis = (
        "Ns",
        "tokens N",
        r"deviation $\sup_t$ RMS $|x^N - x^{\mathrm{ref}}|$",
        0.5,
        r"$N^{-1/2}$",
        "the tokens of an N-token system approach those of the large-N system driven by the same noise at "
        "rate $N^{-1/2}$ ($\\sup_t$ RMS deviation)",
    )

    def configs(self, settings: Settings) -> list[dict]:
        quick = settings.quick
        return [
            dict(
                Ns=[8, 16, 32, 64] if quick else [8, 16, 32, 64, 128, 256],
                N_ref=256 if quick else 1024,
                d=3,
                width=256,
                steps=50 if quick else 100,
                T=2.0,
                R=4 if quick else 8,
                seed=settings.seed,
            )
        ]

    def run(self, config: dict) -> dict:
        c = config
        # random-feature noise: one layer key gives both systems the same field (the common noise)
        k = NoiseKernel("relu", 0.5, 1.0, 0.0)
        sde = SphereSDE(k, c["steps"], c["T"], SphereAttention("SA", 1.0), noise="features", width=c["width"])
        save_every = c["steps"] // 10
        keys = jax.random.split(jax.random.key(c["seed"]), c["R"])
        starts = random_starts(jax.random.key(c["seed"] + 1), c["R"], c["N_ref"], c["d"])
        ref = feature_paths(sde, starts, keys, save_every)
        errs = [
            np.asarray(sup_rms(feature_paths(sde, starts[:, :N], keys, save_every), ref[:, :, :N])) for N in c["Ns"]
        ]
        errs = np.stack(errs)
        return {"errors": errs.mean(1), "fit": fit_loglog(np.asarray(c["Ns"], float), errs).as_dict()}

    def sizes(self, row: dict) -> str:
        c = row["config"]
        return f"N ∈ {c['Ns']} vs N_ref = {c['N_ref']}; d = {c['d']}, {c['steps']} steps, T = {c['T']:g}, {c['R']} runs"


class _Weak(_Rate):
    def slope(self, row: dict) -> tuple[float, float, float]:
        lo, hi = (float("nan") if v is None else v for v in row["slope_resolved_ci"])
        s = row["slope_resolved"]
        return (float("nan") if s is None else s), lo, hi

    def weak_row(self, config: dict, reference, model, seed_of) -> dict:
        k = NoiseKernel("relu", 1.5, 1.0, 0.0)
        x0 = jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        runs = config["R"]
        keys = lambda seed: jax.random.split(jax.random.key(seed), runs)  # noqa: E731
        ref = overlaps(reference(k), x0, keys(config["seed"]))
        xkey = self.axis[0]
        samples = [overlaps(model(k, v), x0, keys(seed_of(v))) for v in config[xkey]]
        return weak_fit(config[xkey], ref, samples)


class WeakL(_Weak):
    declaration = WEAK_L
    title = "Weak convergence of the discrete model (m = 64) to the limit SDE in the depth L"
    axis = (
        "Ls",
        "layers L",
        r"weak error $|\mathbb{E}\langle x_1, x_2\rangle_T - \mathrm{SDE}|$",
        1.0,
        "order 1 (weak Euler)",
        "the discrete model converges weakly to the limit SDE at order 1 in the depth (|E⟨x₁,x₂⟩_T − SDE| = O(1/L))",
    )

    def configs(self, settings: Settings) -> list[dict]:
        if settings.quick:
            return []
        return [dict(Ls=[1, 2, 4, 8], width=64, ref_steps=64, R=settings["realisations"] or 8000, seed=settings.seed)]

    def run(self, config: dict) -> dict:
        c = config
        return self.weak_row(
            c,
            lambda k: SphereSDE(k, steps=c["ref_steps"], horizon=1.0),
            lambda k, L: StochasticTransformer(k, width=c["width"], layers=L, horizon=1.0),
            lambda L: c["seed"] + L,
        )

    def sizes(self, row: dict) -> str:
        c = row["config"]
        return f"L ∈ {c['Ls']}, resolved {list(row['resolved_sizes'])}; m = {c['width']}; {c['R']} runs per size"


class WeakM(_Weak):
    declaration = WEAK_M
    title = "Weak convergence in the MLP width m at fixed depth L = 2 (against the Gaussian field, m = ∞)"
    axis = (
        "ms",
        "MLP width m",
        r"weak error $|\mathbb{E}\langle x_1, x_2\rangle_T - \mathrm{Gaussian}|$",
        1.0,
        r"$m^{-1}$",
        "the width term of the deep–wide rate: at fixed depth the discrete model approaches the Gaussian-field "
        "scheme at rate 1/m (|E⟨x₁,x₂⟩_T − Gaussian| = O(1/m))",
    )

    def configs(self, settings: Settings) -> list[dict]:
        if settings.quick:
            return []
        return [dict(ms=[1, 2, 4, 16, 64], L=2, R=settings["realisations"] or 20000, seed=settings.seed)]

    def run(self, config: dict) -> dict:
        c = config
        # noise only, the same step: the model at width m vs the Gaussian-field scheme (m = ∞)
        return self.weak_row(
            c,
            lambda k: SphereSDE(k, steps=c["L"], horizon=1.0),
            lambda k, m: StochasticTransformer(k, width=m, layers=c["L"], horizon=1.0),
            lambda m: c["seed"] + 7 * m,
        )

    def sizes(self, row: dict) -> str:
        c = row["config"]
        return f"m ∈ {c['ms']}, resolved {list(row['resolved_sizes'])}; L = {c['L']}; {c['R']} runs per size"


def rate_figure(part: _Rate, row: dict):
    """Mean error against size on log-log axes, the claimed slope and (weak errors) twice the standard error."""
    xkey, xlabel, ylabel, order, order_name, _ = part.axis
    x = np.asarray(row["config"][xkey], float)
    e = np.asarray(row["errors"], float)
    fig, (ax,) = figure(1, width=4.6, height=3.8)
    ax.plot(x, e, "o-", color=COLORS[0], label="measured (mean over runs)")
    if "standard_errors" in row:  # weak errors: the statistical resolution
        ax.plot(x, 2 * np.asarray(row["standard_errors"]), ":", color=COLORS[1], label="2 standard errors")
    reference_slope(ax, x, (x[0], e[0]), -order, label=f"reference slope $-{order:g}$: {order_name}")
    log_ticks(ax, x, "x")
    log_values(ax, "y")
    s, lo, hi = part.slope(row)
    where = " (resolved sizes)" if "standard_errors" in row else ""
    fitted = (
        f"fitted slope{where} {interval_text(s, lo, hi)} (95% CI)"
        if np.isfinite(s)
        else "fewer than two resolved sizes"
    )
    # the title wrapped to the axes' width (a long one is clipped at the figure's edges otherwise)
    ax.set_title(f"{textwrap.fill(part.title.split(' (')[0], 60)}\n{fitted}", fontsize=8)
    words, symbol = xlabel.rsplit(" ", 1)
    ax.set_xlabel(f"{words} ${symbol}$")
    ax.set_ylabel(ylabel, fontsize=8)
    ax.legend(fontsize=7)
    return fig


__all__ = [
    "Chaos",
    "Strong",
    "WeakL",
    "WeakM",
    "coupled_paths",
    "feature_paths",
    "increments",
    "overlaps",
    "rate_figure",
    "weak_fit",
]
