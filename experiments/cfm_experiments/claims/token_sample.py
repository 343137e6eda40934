"""Part ``token_sample``: one attention layer's token sample complexity against the exact
infinite-context value, and what a Monte-Carlo reference does to it.

The Gaussian experiment of Bohbot, Letrouit, Peyré and Vialard (*Token sample complexity of
attention*, arXiv:2512.10656), as their code runs it: tokens in d = 50 drawn from μ = N(0, ρI),
ρ = 0.1; one random layer of one head, W_q, W_k, W_v with entries N(0, 1/d), logits scaled by
1/√d; at attention scale s the layer is (√s·W_q, √s·W_k, W_v), of horizon

    H = ‖Σ^{1/2} W_kᵀW_q Σ^{1/2}‖₂ = ρ s ‖W_kᵀW_q‖₂

as their code computes it (the logits' own matrix is W_qᵀW_k/√d, whose horizon is H/√d). For a
context of n tokens the layer's self-attention outputs y_j = T_{μ_n}(z_j) have mean m_n and
covariance C_n (:func:`cfm_jax.attention_output_moments`); the errors ‖m_n − m‖ and ‖C_n − C‖_F,
averaged over k contexts, are fitted as err ≈ c·n^β (slope β, prefactor c), against two references:

- **exact**: the infinite-context law T_μ#μ = N(c + Mm, MΣMᵀ) (m = 0 here; the Gaussian limit of docs/theory.md,
  :func:`cfm_jax.attention_output_moments` at a ``GaussianMeasure``), no sampling error;
- **Monte-Carlo** (theirs): the moments of one context of n_ref tokens. The error measured is then
  that of m_n − m_ref = (m_n − m) − (m_ref − m): the reference's own error, of order n_ref^{-1/2}
  (or slower at large H), enters every size's, so the fit no longer measures the layer alone.

Each seed repeats the measurement with its own k contexts per n and its own reference, on the same
layer; the contexts and the reference are the same at every scale (the token law does not depend
on s). Both references are fitted on the same contexts: per seed, β and log c by least squares of
log err on log n, and the differences Δβ = β_MC − β_exact and c_MC/c_exact with Student-t
intervals over seeds (:func:`cfm_jax.stats.mean_ci`); each slope's interval is
:func:`cfm_jax.stats.fit_loglog`'s. Computed in float32 (the errors are 10⁻³ and more of their
quantities, far above its round-off).

What the Monte-Carlo numbers measure follows mostly from arithmetic: the reference's own error adds
to every size's (the floor model, :mod:`.token_floor`), which predicts Δβ, the prefactor ratio and
err_MC/err from the exact reference's own fit; the line prints each prediction beside the measured
number. Where the measured numbers follow the prediction, the reference adds its own error and
nothing else.

At small horizons the layer is linear in its logits' scale (the softmax is uniform to first order),
so its errors do not change with s: such a horizon repeats a smaller one. :func:`distinct` keeps a
horizon as information when its errors (both quantities, both references) differ from those of the
last distinct horizon by more than :data:`REPEAT` at some n, and the table and the line say which
horizons repeat.

The claim line, per quantity: the Monte-Carlo reference biases the fitted slope beyond what its own
error's addition predicts (the floor model), by more than :data:`NEGLIGIBLE`, at every horizon. The
floor model alone predicts a Δβ of several NEGLIGIBLE at these sizes (+0.049 for the mean at the
default grid), so the rule reads the measured Δβ minus the floor model's, with an interval that
holds both (:func:`~.token_floor.beyond_floor`): *holds* when every such interval lies outside
±NEGLIGIBLE, *refuted* when one lies inside it, *undecided* otherwise; withheld below the sizes at
which it was found stable (:data:`STABLE`).

Sizes: the default (n = 300…3000, 8 contexts, 6 seeds, the 12 scales) takes minutes on a CPU;
``--token-paper-grid`` runs the paper's n = 1000…30000 with 200 contexts per n (a GPU's job).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from cfm_jax import GaussianMeasure, attention_output_moments
from cfm_jax.stats import Interval, fit_loglog

from ..declarations.claims import TOKEN_SAMPLE
from ..draws import redrawn
from ..plotting import COLORS, figure, log_ticks, log_values, save
from ..protocol import Claim, Part, Settings, Summary
from ..verdicts import claims as V
from .common import checked_jit
from .token_floor import beyond_floor, floor_model, paired

DTYPE = jnp.float32
#: a slope change below this is negligible (the size of a slope's own interval at the paper's sizes).
NEGLIGIBLE = 0.01
QUANTITIES = {"mean": "mean", "cov": "covariance"}
REFERENCES = {"exact": "exact", "mc": "Monte-Carlo"}
#: a horizon repeats the last distinct one when its errors differ from them by less than this (relative) at every n.
REPEAT = 0.02
#: the paper's sizes (``--token-paper-grid``): 12 context sizes from 1000 to 30000, 200 contexts each.
PAPER_NS = tuple(int(n) for n in np.geomspace(1000, 30000, 12).astype(int))
PAPER_CONTEXTS = 200
#: score entries per block of contexts (their self-attention) mapped at once: bounds the memory.
BLOCK_ENTRIES = 1 << 24


def base_layer(seed: int, dim: int) -> dict:
    """The unscaled layer ``{"Q": W_q, "K": W_k, "V": W_v}``, ``(d, d)`` each, entries N(0, 1/d)."""
    keys = jax.random.split(jax.random.fold_in(jax.random.key(seed), 0), 3)
    return {k: jax.random.normal(key, (dim, dim), DTYPE) / math.sqrt(dim) for k, key in zip("QKV", keys)}


def scaled(base: dict, s) -> dict:
    """The layer at attention scale s: (√s·W_q, √s·W_k, W_v)."""
    root = jnp.sqrt(jnp.asarray(s, DTYPE))
    return {"Q": root * base["Q"], "K": root * base["K"], "V": base["V"]}


def horizon(base: dict, s: float, rho: float) -> float:
    """H = ‖Σ^{1/2} W_kᵀW_q Σ^{1/2}‖₂ at Σ = ρI and scale s (the peer's convention, module docstring)."""
    A = np.asarray(base["K"], np.float64).T @ np.asarray(base["Q"], np.float64)
    return float(rho * s * np.linalg.norm(A, 2))


def _tokens(key, rho, n: int, dim: int):
    return jnp.sqrt(rho) * jax.random.normal(key, (n, dim), DTYPE)


@functools.partial(checked_jit, static_argnames=("n", "dim"))
def reference(base, s, rho, key, *, n: int, dim: int):
    """The Monte-Carlo reference: the output moments ``(mean (d,), cov (d, d))`` of one context of n tokens."""
    return attention_output_moments(scaled(base, s), _tokens(key, rho, n, dim))


@functools.partial(checked_jit, static_argnames=("n", "contexts", "dim"))
def errors(base, s, rho, key, exact, mc, *, n: int, contexts: int, dim: int):
    """``(4,)``: ‖m_n − m‖, ‖C_n − C‖_F against ``exact`` then against ``mc`` (each ``(mean, cov)``),
    averaged over ``contexts`` contexts of n tokens drawn from ``key``."""
    params = scaled(base, s)

    def one(k):
        m, c = attention_output_moments(params, _tokens(k, rho, n, dim))
        norm = jnp.linalg.norm  # of a (d, d) array: Frobenius's
        return jnp.stack([norm(m - exact[0]), norm(c - exact[1]), norm(m - mc[0]), norm(c - mc[1])])

    batch = max(1, min(contexts, BLOCK_ENTRIES // (n * n)))
    return jnp.mean(jax.lax.map(one, jax.random.split(key, contexts), batch_size=batch), axis=0)


def sizes(settings: Settings) -> tuple[list[int], int]:
    """The run's context sizes and contexts per n: the options', or the paper's with ``--token-paper-grid``."""
    if settings["token_paper_grid"]:
        return list(PAPER_NS), PAPER_CONTEXTS
    return sorted(settings["token_ns"]), settings["token_contexts"]


@redrawn  # samples models or contexts: a verdict only where independent draws agree
class TokenSample(Part):
    declaration = TOKEN_SAMPLE
    title = "One attention layer's token sample complexity: the exact reference against a Monte-Carlo one"

    def check(self, settings: Settings) -> None:
        if settings["token_paper_grid"]:
            by_option = {o.name: o.default_for(settings.quick) for o in self.options}
            changed = [
                f"--{k.replace('_', '-')}" for k in ("token_ns", "token_contexts") if settings[k] != by_option[k]
            ]
            if changed:
                raise ValueError(f"--token-paper-grid sets the sizes itself: drop {' and '.join(changed)}.")

    def configs(self, settings: Settings) -> list[dict]:
        ns, contexts = sizes(settings)
        keep = ("token_seeds", "token_n_ref", "token_dim", "token_rho")
        fixed = {k.removeprefix("token_"): settings[k] for k in keep}
        return [
            {"scale": s, "seed": settings.seed, "ns": ns, "contexts": contexts, **fixed}
            for s in settings["token_scales"]
        ]

    def run(self, config: dict) -> dict:
        d, rho, s, seed = int(config["dim"]), float(config["rho"]), float(config["scale"]), int(config["seed"])
        base = base_layer(seed, d)
        exact = attention_output_moments(
            scaled(base, s), GaussianMeasure(np.zeros(d, np.float32), rho * np.eye(d, dtype=np.float32))
        )
        ns, S = [int(n) for n in config["ns"]], int(config["seeds"])
        out = np.zeros((S, len(ns), 4))
        ref_err = np.zeros((S, 2))
        s_, rho_ = jnp.asarray(s, DTYPE), jnp.asarray(rho, DTYPE)
        for r in range(S):
            key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), 1), r)
            mc = reference(base, s_, rho_, jax.random.fold_in(key, 0), n=int(config["n_ref"]), dim=d)
            ref_err[r] = [float(jnp.linalg.norm(mc[0] - exact[0])), float(jnp.linalg.norm(mc[1] - exact[1]))]
            for k, n in enumerate(ns):
                e = errors(
                    base, s_, rho_, jax.random.fold_in(key, n), exact, mc, n=n, contexts=int(config["contexts"]), dim=d
                )
                out[r, k] = np.asarray(e, np.float64)
        cov_norm = float(np.linalg.norm(np.asarray(exact[1], np.float64)))
        return {
            "ns": ns,
            "horizon": horizon(base, s, rho),
            **{
                f"{q}_{ref}": out[:, :, 2 * j + i].tolist()
                for j, ref in enumerate(REFERENCES)
                for i, q in enumerate(QUANTITIES)
            },
            "ref_mean_error": ref_err[:, 0].tolist(),
            "ref_cov_error": ref_err[:, 1].tolist(),
            "cov_norm": cov_norm,
        }

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        if not rows:
            return Summary()
        rows = sorted(rows, key=lambda r: r["horizon"])
        data = [per_horizon(r) for r in rows]
        ns, contexts = sizes(settings)
        have = {"seeds": settings["token_seeds"], "contexts per n": contexts, "largest n": max(ns)}
        claims = tuple(bias_line(q, data, have, settings["token_n_ref"]) for q in QUANTITIES)
        return Summary(
            text=table(data), data={"horizons": data}, claims=claims, files={"token_sample.txt": table(data)}
        )

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [save(token_figure(rows, summary.data["horizons"]), out / "token_sample.png")] if rows else []


def per_horizon(row: dict) -> dict:
    """One scale's fits: per quantity, each reference's :func:`cfm_jax.stats.fit_loglog` and the paired
    differences (:func:`~.token_floor.paired`); the Monte-Carlo reference's own errors, ‖m_ref − m‖·√n_ref and
    ‖C_ref − C‖_F/‖C‖_F, mean over seeds."""
    ns, cfg = row["ns"], row["config"]
    out: dict = {
        "scale": cfg["scale"],
        "horizon": row["horizon"],
        "horizon_logits": row["horizon"] / math.sqrt(cfg["dim"]),
    }
    for q in QUANTITIES:
        fits = {ref: fit_loglog(ns, np.asarray(row[f"{q}_{ref}"]).T).as_dict() for ref in REFERENCES}
        ratio = np.exp(np.log(np.asarray(row[f"{q}_mc"]) / np.asarray(row[f"{q}_exact"])).mean(axis=0))
        out[q] = {
            **fits,
            **paired(ns, row[f"{q}_exact"], row[f"{q}_mc"]),
            "error_ratio": ratio.tolist(),  # err_MC/err at each n, geometric mean over seeds
            "floor": floor_model(ns, fits["exact"]["slope"], int(cfg["n_ref"])),
        }
    out["ref_mean_error"] = float(np.mean(row["ref_mean_error"]) * math.sqrt(cfg["n_ref"]))
    out["ref_cov_error"] = float(np.mean(row["ref_cov_error"]) / row["cov_norm"])
    out["ns"] = ns
    # for the figure: geometric means over seeds; the covariance's relative to ‖C‖_F (C grows like s²)
    scale = {"mean": 1.0, "cov": row["cov_norm"]}
    out["errors"] = {
        q: {ref: (np.exp(np.log(row[f"{q}_{ref}"]).mean(0)) / scale[q]).tolist() for ref in REFERENCES}
        for q in QUANTITIES
    }
    return out


def distinct(data: list[dict]) -> list[bool]:
    """Per horizon (in increasing order), whether it adds information: its errors (both quantities and
    references, geometric means over seeds) differ by more than :data:`REPEAT` at some n from those
    of the last distinct horizon (the first always does)."""
    keep, last = [], None
    for h in data:
        e = np.log([h["errors"][q][ref] for q in QUANTITIES for ref in REFERENCES])
        new = last is None or bool(np.max(np.abs(e - last)) > np.log1p(REPEAT))
        keep.append(new)
        last = e if new else last
    return keep


def _ci(entry: dict, fmt: str = "+.3f") -> str:
    return format(Interval.from_dict(entry), fmt)


def table(data: list[dict]) -> str:
    """Rows per horizon × quantity × reference: slope [95 % CI], prefactor; for the Monte-Carlo
    reference its Δβ and prefactor ratio against the exact one."""
    head = (
        f"{'s':>7} {'H':>7} {'H/√d':>6}  {'quantity':<10} {'reference':<11} {'slope β [95 % CI]':<26} "
        f"{'prefactor':>9}  {'Δβ = β_MC − β_exact':<26} {'(floor)':>7}  {'c_MC / c_exact':<22} {'(floor)':>7}  "
        f"{'err_MC/err, n first…last':<24} {'(floor)':<13}"
    )
    lines = [head]
    for h, new in zip(data, distinct(data)):
        for q, label in QUANTITIES.items():
            for ref, name in REFERENCES.items():
                f, fl = h[q][ref], h[q]["floor"]
                slope = _ci({"value": f["slope"], "ci_low": f["ci_low"], "ci_high": f["ci_high"]})
                er = h[q]["error_ratio"]
                extra = (
                    f"{_ci(h[q]['delta']):<26} {fl['delta']:+7.3f}  {_ci(h[q]['ratio'], '.3f'):<22} "
                    f"{fl['ratio']:7.3f}  {f'{er[0]:.3f} … {er[-1]:.3f}':<24} "
                    f"{fl['error_ratio'][0]:.3f} … {fl['error_ratio'][-1]:.3f}"
                    if ref == "mc"
                    else ""
                )
                lines.append(
                    f"{h['scale']:7.3g} {h['horizon']:7.3g} {h['horizon_logits']:6.3g}  {label:<10} {name:<11} "
                    f"{slope:<26} {f['prefactor']:9.3g}  {extra}".rstrip()
                )
        if not new:
            lines.append(f"{'':>7} (H = {h['horizon']:.3g} repeats a smaller horizon: errors within {REPEAT:.0%})")
    lines.append(
        "Monte-Carlo reference's own error: ‖m_ref − m‖·√n_ref "
        + ", ".join(f"{h['ref_mean_error']:.2f}" for h in data)
        + "; ‖C_ref − C‖_F/‖C‖_F "
        + ", ".join(f"{100 * h['ref_cov_error']:.0f} %" for h in data)
        + " (by horizon)"
    )
    return "\n".join(lines)


#: per quantity, the sizes from which its line's verdict was found stable: the mean's at the default
#: sizes (*holds* there and at 12 seeds × 16 contexts); the covariance's Δβ at H ≈ 6 is +0.014
#: [+0.006, +0.022] at the default sizes (*undecided*), +0.020 [+0.014, +0.027] at 12 × 16 (*holds*).
STABLE = {
    "mean": {"seeds": 6, "contexts per n": 8, "largest n": 3000},
    "cov": {"seeds": 12, "contexts per n": 16, "largest n": 3000},
}


def bias_line(q: str, data: list[dict], have: dict, n_ref: int) -> Claim:
    """The quantity ``q``'s line: the effect beyond the floor model at every horizon (module docstring)."""
    deltas = [h[q]["delta"] for h in data]
    beyond = [beyond_floor(h[q]["delta"], h[q]["exact"], h["ns"], n_ref) for h in data]
    ratios = [h[q]["ratio"]["value"] for h in data]
    flat = sum(d["ci_low"] > NEGLIGIBLE for d in deltas)
    steep = sum(d["ci_high"] < -NEGLIGIBLE for d in deltas)
    first, last = data[0], data[-1]
    keep = distinct(data)
    fl = [h[q]["floor"] for h in data]
    er = [h[q]["error_ratio"] for h in data]
    if q == "mean":
        own = [h["ref_mean_error"] for h in data]
        own_text = f"‖m_ref − m‖·√n_ref from {min(own):.2f} to {max(own):.2f}"
    else:
        own = [100 * h["ref_cov_error"] for h in data]
        own_text = f"‖C_ref − C‖_F/‖C‖_F from {min(own):.0f} to {max(own):.0f} %"
    ns = first["ns"]
    measured = (
        f"{len(data)} horizons H = {first['horizon']:.3g}…{last['horizon']:.3g}, {sum(keep)} of them distinct "
        f"(the others repeat a smaller one: the layer is linear there); Δβ = β_MC − β_exact at the smallest "
        f"{_ci(first[q]['delta'], '+.3f')} (floor model {fl[0]['delta']:+.3f}), at the largest "
        f"{_ci(last[q]['delta'], '+.3f')} (floor model {fl[-1]['delta']:+.3f}) (slopes "
        f"{first[q]['exact']['slope']:+.2f} → {first[q]['mc']['slope']:+.2f} and "
        f"{last[q]['exact']['slope']:+.2f} → {last[q]['mc']['slope']:+.2f}); flatter at {flat}, steeper at {steep} "
        f"of {len(data)} horizons; the fitted prefactor ratio c_MC/c_exact (an intercept at n = 1) "
        f"{min(ratios):.2f}…{max(ratios):.2f} (floor model {min(f['ratio'] for f in fl):.2f}…"
        f"{max(f['ratio'] for f in fl):.2f}); the measured error ratio err_MC/err at n = {ns[0]} "
        f"{min(e[0] for e in er):.3f}…{max(e[0] for e in er):.3f} and at n = {ns[-1]} "
        f"{min(e[-1] for e in er):.3f}…{max(e[-1] for e in er):.3f} (floor model "
        f"{fl[0]['error_ratio'][0]:.3f} and {fl[0]['error_ratio'][-1]:.3f} at the smallest horizon); the "
        f"reference's own error: {own_text}; Δβ beyond the floor model at the smallest "
        f"{_ci(beyond[0], '+.3f')}, at the largest {_ci(beyond[-1], '+.3f')} (the rule's)"
    )
    verdict, sizes_text = V.judge(V.bias_verdict(beyond, NEGLIGIBLE), STABLE[q], have)
    return Claim(
        claim=f"a Monte-Carlo reference of $n_{{ref}}$ = {n_ref} tokens biases the fitted slope of the output "
        f"{QUANTITIES[q]}'s error beyond what its own error's addition predicts (the floor model; by more than "
        f"{NEGLIGIBLE:g}, at every horizon)",
        measured=measured,
        verdict=verdict,
        figure="token_sample.png",
        sizes=sizes_text,
    )


def token_figure(rows, data):
    """Errors vs n at the smallest and the two largest horizons (solid: exact reference, dashed:
    Monte-Carlo), one panel per quantity; the fitted slopes vs H for both references with the peer's
    law −1/(2(1 + H²))."""
    fig, axes = figure(3, ncols=3, width=4.4, height=3.8)
    picks = sorted({0, max(0, len(data) - 2), len(data) - 1})  # the small horizons' errors coincide
    n_ref = rows[0]["config"]["n_ref"]
    for ax, q in zip(axes[:2], QUANTITIES):
        for c, i in enumerate(picks):
            h, color = data[i], COLORS[c % len(COLORS)]
            ax.plot(h["ns"], h["errors"][q]["exact"], "o-", color=color, label=f"H = {h['horizon']:.3g}")
            ax.plot(h["ns"], h["errors"][q]["mc"], "s--", color=color, mfc="none")
        ax.plot([], [], "o-", color="0.3", label="exact reference")
        ax.plot([], [], "s--", color="0.3", mfc="none", label=f"Monte-Carlo reference ($n_{{ref}}$ = {n_ref})")
        log_ticks(ax, data[0]["ns"], "x")
        log_values(ax, "y")
        ax.set_xlabel("context size $n$")
        what = r"$\|m_n - m\|$" if q == "mean" else r"$\|C_n - C\|_F\,/\,\|C\|_F$"
        ax.set_ylabel(f"{what} (geometric mean over seeds)")
        ax.set_title(f"output {QUANTITIES[q]}: error vs n")
        ax.legend(fontsize=7)
    ax = axes[2]
    H = np.asarray([h["horizon"] for h in data])
    for c, q in enumerate(QUANTITIES):
        for k, (ref, (marker, fill)) in enumerate(zip(REFERENCES, (("o", None), ("s", "none")))):
            y = np.asarray([h[q][ref]["slope"] for h in data])
            err = [y - [h[q][ref]["ci_low"] for h in data], [h[q][ref]["ci_high"] for h in data] - y]
            ax.errorbar(
                H * 1.06 ** (2 * c + k - 1.5),  # side by side at each horizon
                y,
                yerr=err,
                fmt=marker,
                mfc=fill,
                color=COLORS[c],
                capsize=2,
                label=f"{QUANTITIES[q]}, {REFERENCES[ref]}",
            )
    grid = np.geomspace(H.min() / 1.5, H.max() * 1.5, 200)
    ax.plot(grid, -0.5 / (1 + grid**2), "-", color="0.3", lw=1, label=r"the peer's law $-1/(2(1+H^2))$")
    d = rows[0]["config"]["dim"]
    ax.plot(grid, -0.5 / (1 + grid**2 / d), ":", color="0.3", lw=1, label=r"the same law at $H/\sqrt{d}$")
    ax.axhline(-0.5, color="0.6", lw=0.8, ls="--", label=r"$-1/2$")
    ax.set_xscale("log")
    ax.set_xlabel(r"horizon $H = \rho\, s\, \|W_k^\top W_q\|_2$")
    ax.set_ylabel(r"fitted slope $\beta$ (95 % CI)")
    ax.set_title("slopes vs horizon: filled exact, open Monte-Carlo")
    ax.legend(fontsize=7)
    return fig


__all__ = [
    "NEGLIGIBLE",
    "PAPER_CONTEXTS",
    "PAPER_NS",
    "REPEAT",
    "STABLE",
    "TokenSample",
    "base_layer",
    "bias_line",
    "distinct",
    "errors",
    "horizon",
    "per_horizon",
    "reference",
    "scaled",
    "sizes",
    "table",
    "token_figure",
]
