"""Part ``prefactors``: the typical constant C vs d, the heads H and a linear MLP's width, and the rate.

C is the fit of the sup deviation ≈ C n^{-1/2} with the slope fixed, exp(mean over models and n of
log(√n · dev)), over random models at fixed operator norms (‖Q_h‖‖K_h‖ = 1, the heads' values at
‖[V_1 … V_H]‖ = 1 or Σ_h‖V_h‖ = 1, ‖W1‖ = ‖W2‖ = 1), a Gaussian context N(0, I/d) and its exact
limit. These are means over random models: they say what a typical model does, not what the
paper's constant (a supremum over parameters of given norms) is; the ``suprema`` part measures
that, and the d- and p-verdicts of the paper rest on it. The width line is a code check: a
linear MLP acts through W₂W₁ only, so each model is also run with its MLP collapsed to that
product (:func:`~.sampling.collapse_mlp`) and the two deviations must agree to round-off.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..declarations.claims import PREFACTORS
from ..draws import redrawn
from ..plotting import COLORS, figure, log_ticks, log_values, save
from ..protocol import Claim, Part, Settings, Summary
from ..verdicts import claims as V, slopes as SL
from .common import base_config, dim_of
from .deviation import deviations
from .sampling import param_count
from .statistics import LARGE_N, ci, growth, large_n_slope, log_prefactors, prefactor, ratio, slope_fit

#: relative agreement of the collapsed-MLP code check (float32 round-off, with margin).
COLLAPSE_TOLERANCE = 1e-4


def p_of(row) -> int:
    return param_count(row["config"])


@redrawn  # samples models or contexts: a verdict only where independent draws agree
class Prefactors(Part):
    declaration = PREFACTORS
    title = "Typical constant C (mean over random fixed-norm models) vs d, heads and MLP width; the $n^{-1/2}$ rate"

    def check(self, settings: Settings) -> None:
        if settings["at_dim"] not in settings["dims"]:
            raise ValueError(f"--at-dim must be one of --dims {list(settings['dims'])}, got {settings['at_dim']}.")
        if min(settings["widths"]) < settings["at_dim"]:
            raise ValueError(
                f"--widths must each be >= --at-dim ({settings['at_dim']}): the collapsed MLP needs m >= d."
            )

    def configs(self, settings: Settings) -> list[dict]:
        base = dict(ns=settings["ns"], seeds=settings["seeds"], layers=settings["layers"])
        at, seed = settings["at_dim"], settings.seed
        out = [base_config(seed, dim=d, **base) for d in settings["dims"]]
        for vnorm in ("concat", "sum"):  # H = 1: the two norms coincide
            out += [base_config(seed, dim=at, heads=h, vnorm=vnorm, **base) for h in settings["heads"]]
        for m in settings["widths"]:
            out += [
                base_config(seed, dim=at, width=m, **base),
                base_config(seed, dim=at, width=m, collapse=True, **base),
            ]
        return out

    def run(self, config: dict) -> dict:
        return deviations(config)

    @staticmethod
    def scans(rows):
        """(d scan, heads at fixed ‖[V_1 … V_H]‖, heads at fixed Σ_h‖V_h‖, widths, collapsed widths)."""
        plain = [r for r in rows if not r["config"].get("collapse")]
        dims = sorted((r for r in plain if r["config"]["heads"] == 1 and r["config"]["width"] == 0), key=dim_of)
        multi = [r for r in plain if r["config"]["heads"] > 1 or r["config"]["width"] > 0]
        at = max((dim_of(r) for r in multi), default=0)
        base = [r for r in dims if dim_of(r) == at]
        by_heads = lambda r: r["config"]["heads"]  # noqa: E731
        heads = [r for r in plain if r["config"]["heads"] > 1]
        concat = base + sorted((r for r in heads if r["config"].get("vnorm", "concat") == "concat"), key=by_heads)
        vsum = base + sorted((r for r in heads if r["config"].get("vnorm") == "sum"), key=by_heads)
        by_width = lambda r: r["config"]["width"]  # noqa: E731
        widths = base + sorted((r for r in plain if r["config"]["width"] > 0), key=by_width)
        collapsed = sorted((r for r in rows if r["config"].get("collapse")), key=by_width)
        return dims, concat, vsum, widths, collapsed

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        dims, concat, vsum, widths, collapsed = self.scans(rows)
        seeds, top_n = settings["seeds"], max(settings["ns"])
        claims, data = [], {}
        scans = (
            (dims, "d", "the dimension d", dim_of, {"seeds": 16, "largest d": 16}),
            (vsum, "p", "the parameter count p (heads H at fixed $Σ_h‖V_h‖$)", p_of, {"seeds": 16, "largest H": 4}),
            (
                concat,
                "p",
                "the parameter count p (heads H at fixed $‖[V_1 … V_H]‖ ≤ Σ_h‖V_h‖$)",
                p_of,
                {"seeds": 32, "largest H": 8},
            ),
        )
        have = {"seeds": seeds, "largest d": max(map(dim_of, dims), default=0), "largest H": max(settings["heads"])}
        for scan, label, what, x_of, need in scans:
            if len(scan) >= 2:
                claim, numbers = independence_line(scan, label, what, x_of, need, have)
                claims.append(claim)
                data[f"{label}: {what}"] = numbers
        if collapsed:
            claims.append(width_line(widths, collapsed))
        if rows:
            claims.append(rate_line([[r for r in rows if not r["config"].get("collapse")]], seeds, top_n))
        text = "\n".join(
            f"d={dim_of(r):3d} H={r['config']['heads']} m={r['config']['width']:3d} "
            f"{r['config'].get('vnorm', 'concat'):6s}{' collapsed' if r['config'].get('collapse') else ''}: "
            f"C = {ci(prefactor(r['config']['ns'], r['values']))}"
            for r in rows
        )
        return Summary(text=text, data=data, claims=tuple(claims))

    def pooled(self, rows: list[list[dict]], settings: Settings) -> list[Claim]:
        """The rate line, one slope pooled over every model of every draw."""
        if not rows[0]:
            return []
        plain = [[r for r in draw if not r["config"].get("collapse")] for draw in rows]
        return [rate_line(plain, settings["seeds"], max(settings["ns"]))]

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        dims, concat, vsum, widths, _ = self.scans(rows)
        return [save(prefactors_figure(dims, concat, vsum, widths), out / "prefactors.png")] if dims else []


def independence_line(scan, label, what, x_of, need, have) -> tuple[Claim, dict]:
    """C ∝ x^γ over a scan (mean over random models): γ's interval and the ratios to the first."""
    ref = scan[0]
    ns = ref["config"]["ns"]
    xs = [x_of(r) for r in scan]
    gamma = growth(np.log(xs), [log_prefactors(ns, r["values"]) for r in scan])[0]
    ratios = [ratio(ns, r["values"], ref["values"]) for r in scan[1:]]
    rtext = ", ".join(f"{x}: {ci(q, fmt='.2f')}" for x, q in zip(xs[1:], ratios))
    c0 = prefactor(ns, ref["values"])
    measured = (
        f"mean over random models: C({label}={xs[0]}) = {ci(c0)}; C/C({label}={xs[0]}) at {label} = {rtext}; "
        f"$C ∝ {label}^γ$, γ = {ci(gamma, fmt='+.3f')}"
    )
    verdict = V.independence(gamma)
    if gamma.ci_high < 0:
        measured += " (C decreases: a bound independent of it holds)"
    verdict, sizes = V.judge(verdict, need, have)
    claim = Claim(
        claim=f"the typical constant (mean over random models, not the paper's supremum) does not grow with {what}, "
        "at fixed ‖Q‖‖K‖ and ‖V‖",
        measured=measured,
        verdict=verdict,
        figure="prefactors.png",
        sizes=sizes,
    )
    return claim, {"C0": c0.as_dict(), "gamma": gamma.as_dict(), "ratios": [q.as_dict() for q in ratios]}


def width_line(widths, collapsed) -> Claim:
    """Code check: each width's deviations equal those of its collapsed MLP; the ratios beside it."""
    by_width = {r["config"]["width"]: r for r in widths[1:]}
    worst = 0.0
    for c in collapsed:
        a = np.asarray(by_width[c["config"]["width"]]["values"])
        worst = max(worst, float(np.max(np.abs(np.asarray(c["values"]) - a) / a)))
    ns = widths[0]["config"]["ns"]
    rtext = ", ".join(
        f"m = {r['config']['width']}: {ci(ratio(ns, r['values'], widths[0]['values']), fmt='.2f')}" for r in widths[1:]
    )
    return Claim(
        claim="a linear MLP acts through W₂W₁ only: the deviation with its width-m MLP equals that with the MLP "
        "collapsed to W₂W₁ (so its width cannot matter; a check of the code, not of the paper)",
        measured=f"largest relative difference {worst:.1e} over {len(collapsed)} widths × seeds × n "
        f"(tolerance {COLLAPSE_TOLERANCE:g}); C(m)/C(no MLP): {rtext}",
        verdict=V.code_check(worst <= COLLAPSE_TOLERANCE),
        figure="prefactors.png",
        sizes="any size (an identity)",
    )


def rate_line(rows, seeds: int, top_n: int) -> Claim:
    """The n^{−½} rate over every model (``rows``: one list per draw): each model's slope over all n,
    pooled over the models of every draw into one slope against the band of finite-n corrections
    (:func:`~cfm_experiments.verdicts.slopes.slope_verdict`); the first draw's slopes over all n and
    over the largest n, and how many of their intervals meet the band, beside it."""
    every = [r for draw in rows for r in draw]
    fits = [slope_fit(r["config"]["ns"], r["values"]) for r in every]
    first = fits[: len(rows[0])]
    large = [large_n_slope(r["config"]["ns"], r["values"]) for r in rows[0]]
    ns = sorted(every[0]["config"]["ns"])
    low, high = SL.band(ns)
    K = len(first)
    meets = sum(f.ci_low <= high and low <= f.ci_high for f in first)
    meets_large = sum(f.ci_low <= high and low <= f.ci_high for f in large)
    verdict, sizes = V.judge(
        SL.slope_verdict(fits, ns), {"seeds": 32, "largest n": 1000}, {"seeds": seeds, "largest n": top_n}
    )
    return Claim(
        claim="token deviation vs the exact infinite-context limit decays as $n^{-1/2}$ (sup over depth)",
        measured=f"fitted slopes {min(f.slope for f in first):+.3f} … {max(f.slope for f in first):+.3f} over the "
        f"{K} models of this part (n = {ns[0]} … {ns[-1]}); bootstrap 95 % CI meets the band in {meets}/{K} "
        f"(over n ≥ {ns[-LARGE_N]}: {meets_large}/{K}); {SL.describe(fits, ns)}",
        verdict=verdict,
        figure="prefactors.png",
        sizes=sizes,
    )


def prefactors_figure(dims, concat, vsum, widths):
    """Three panels: deviation vs n per d; C vs d; C vs the parameter count p (heads, widths)."""
    fig, (a0, a1, a2) = figure(3, ncols=3, width=4.4, height=3.9)
    ns = np.asarray(dims[0]["config"]["ns"], np.float64)
    for i, r in enumerate(dims):
        a0.plot(
            ns,
            np.exp(np.log(np.asarray(r["values"])).mean(axis=0)),
            "o-",
            color=COLORS[i % 8],
            label=f"d = {dim_of(r)}",
        )
    top = np.exp(np.log(np.asarray(dims[0]["values"])).mean(axis=0))
    a0.plot(ns, top[0] * (ns / ns[0]) ** -0.5, "--", color="0.35", lw=1.0, label="slope $-1/2$")
    log_ticks(a0, ns, "x")
    log_values(a0, "y")
    a0.set_xlabel("context size $n$")
    a0.set_ylabel(r"$\sup_s\,\|x_s-\hat x_s\|$ (geometric mean over models)")
    a0.set_title("deviation from the exact Gaussian limit")
    a0.legend(fontsize=7, ncol=2)

    def errbar(ax, scan, x_of, color, marker, label):
        xs = [x_of(r) for r in scan]
        cs = [prefactor(r["config"]["ns"], r["values"]) for r in scan]
        c = np.array([q.value for q in cs])
        err = [c - [q.ci_low for q in cs], np.array([q.ci_high for q in cs]) - c]
        ax.errorbar(xs, c, yerr=err, fmt=marker + "-", color=color, capsize=3, label=label)
        return xs, c

    xs, c = errbar(a1, dims, dim_of, COLORS[0], "o", "mean over random models (95 % CI)")
    a1.axhline(c[0], color="0.35", ls="--", lw=1.0, label=f"C at d = {xs[0]}")
    log_ticks(a1, xs, "x")
    a1.set_xlabel("dimension $d$")
    a1.set_ylabel(r"prefactor $C$ in deviation $\approx C\,n^{-1/2}$")
    a1.set_ylim(0, 1.5 * max(c))
    a1.set_title(r"C vs d at $\|Q\|\|K\| = 1$, $\|V\| = 1$")
    a1.legend(fontsize=7, loc="lower left")
    drawn = False
    for scan, color, marker, label in (
        (concat, COLORS[1], "s", r"heads $H$, $\|[V_1 \ldots V_H]\| = 1$"),
        (vsum, COLORS[3], "D", r"heads $H$, $\sum_h \|V_h\| = 1$"),
        (widths, COLORS[2], "^", r"linear-MLP width $m$, $\|W_1\| = \|W_2\| = 1$"),
    ):
        if len(scan) > 1:
            errbar(a2, scan, p_of, color, marker, label)
            drawn = True
    if drawn:
        from matplotlib.ticker import FuncFormatter

        log_values(a2, "x")
        a2.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}"))
        base_c = prefactor(concat[0]["config"]["ns"], concat[0]["values"]).value
        a2.axhline(base_c, color="0.35", ls="--", lw=1.0, label=f"C at H = 1, no MLP (d = {dim_of(concat[0])})")
        a2.set_ylim(0, 1.5 * base_c)
        a2.legend(fontsize=7, loc="lower left")
    a2.set_xlabel("parameter count $p$")
    a2.set_ylabel("prefactor $C$ (mean over random models)")
    a2.set_title("C vs the parameter count")
    return fig


__all__ = ["COLLAPSE_TOLERANCE", "Prefactors", "independence_line", "prefactors_figure", "rate_line", "width_line"]
