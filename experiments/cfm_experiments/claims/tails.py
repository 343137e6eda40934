"""Part ``tails``: the quantiles of the sup deviation over contexts for one model, across n.

One fixed model and token (d = 4), ``contexts`` independent contexts per n (prefixes of one sample
each, as in the other n-sweeps); q_δ is the (1 − δ)-quantile of the sup deviation, δ ∈ {0.5, 0.2,
0.1, 0.05, 0.01}. The high-probability form q_δ ≲ C√(log(1/δ)/n) has an n-part (every q_δ decays
like n^{-1/2}), which this part tests, and a δ-part (q_δ grows like √log(1/δ)), on which 512
contexts and δ ≥ 0.01 have no power: the affine fit q_δ√n ≈ a + b√log(1/δ) and its curvature are
reported, but a log(1/δ) (sub-exponential) tail fits as well here. The ``tail_exponent`` part
tests the δ-part with 10⁵ contexts down to δ = 10⁻⁴.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..declarations.claims import TAILS
from ..draws import redrawn
from ..plotting import COLORS, figure, log_ticks, log_values, save
from ..protocol import Claim, Part, Settings, Summary
from ..verdicts import NOT_OBSERVED, claims as V, slopes as SL, worst
from .common import base_config
from .deviation import deviations
from .statistics import ci, tail_fits


@redrawn  # samples models or contexts: a verdict only where independent draws agree
class Tails(Part):
    declaration = TAILS
    title = (
        "Tail quantiles of the sup deviation over contexts (one model): the n-dependence of the high-probability form"
    )

    def configs(self, settings: Settings) -> list[dict]:
        return [
            base_config(
                settings.seed,
                ns=settings["ns"],
                seeds=settings["contexts"],
                fixed_model=True,
                layers=settings["layers"],
            )
        ]

    def run(self, config: dict) -> dict:
        return deviations(config)

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        claims, data = [], {}
        for r in rows:
            f = tail_fits(r["config"]["ns"], r["values"])
            data = f
            claims.append(tails_line(r, [f], *sizes_of(r)))
        text = ""
        if rows:
            f = data
            text = "\n".join(
                f"n={int(n):5d}: q_δ√n ≈ a + b√log(1/δ), a = {_at(f['intercept'], k)}, b = {_at(f['coefficient'], k)}"
                for k, n in enumerate(f["ns"])
            )
        return Summary(text=text, data={"fits": data}, claims=tuple(claims))

    def pooled(self, rows: list[list[dict]], settings: Settings) -> list[Claim]:
        """The line, every δ's slope of every draw pooled into one (the δ of one draw correlated)."""
        if not rows[0] or not all(rows):
            return []
        fits = [tail_fits(draw[0]["config"]["ns"], draw[0]["values"]) for draw in rows]
        return [tails_line(rows[0][0], fits, *sizes_of(rows[0][0]))]

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        return [save(tails_figure(rows[0], summary.data["fits"]), out / "tails.png")] if rows else []


def _at(entry: dict, k: int) -> str:
    """Entry ``k`` of one of :func:`~.statistics.tail_fits`'s statistics, with its interval."""
    return ci(entry["value"][k], entry["ci_low"][k], entry["ci_high"][k])


def sizes_of(row) -> tuple[dict, dict]:
    """(the sizes from which the line's verdict is stable, the row's sizes)."""
    return {"contexts": 256, "largest n": 500}, {
        "contexts": row["config"]["seeds"],
        "largest n": max(row["config"]["ns"]),
    }


def tails_line(row, fits, need, have) -> Claim:
    """Every quantile's slope in n (``fits``: :func:`~.statistics.tail_fits` of each draw) pooled into
    one slope against the band of finite-n corrections (the δ of one draw are statistics of the same
    contexts: ``correlated``), and the quantiles ordered in δ in every draw; the first draw's affine
    fit and its curvature beside it."""
    f = fits[0]
    cur, co, sl, ic = f["curvature"], f["coefficient"], f["slopes"], f["intercept"]
    K = len(f["ns"])
    n_affine = sum(lo <= 0 <= hi for lo, hi in zip(cur["ci_low"], cur["ci_high"]))
    slopes = ", ".join(
        f"δ={dl:g}: {ci(v, lo, hi, '+.2f')}"
        for dl, v, lo, hi in zip(f["deltas"], sl["value"], sl["ci_low"], sl["ci_high"])
    )
    measured = (
        f"{row['config']['seeds']} contexts, one model (d = {row['config']['dim']}); slope of $q_δ$ in n: {slopes}; "
        f"quantiles ordered in δ at every n: {f['ordered']}; $q_δ√n ≈ a + b\\sqrt{{\\log(1/δ)}}$: "
        f"at n = {int(f['ns'][-1])} "
        f"a = {_at(ic, -1)}, b = {_at(co, -1)}; "
        f"curvature CI contains 0 at {n_affine}/{K} n (no power against a log(1/δ) tail at δ ≥ 0.01)"
    )
    every = [
        {"slope": v, "ci_low": lo, "ci_high": hi}
        for g in fits
        for v, lo, hi in zip(g["slopes"]["value"], g["slopes"]["ci_low"], g["slopes"]["ci_high"])
    ]
    measured += f"; {SL.describe(every, f['ns'], correlated=True)}"
    rate = SL.slope_verdict(every, f["ns"], correlated=True)
    verdict, sizes = V.judge(worst([rate, *(NOT_OBSERVED for g in fits if not g["ordered"])]), need, have)
    return Claim(
        claim="every tail quantile $q_δ$ (δ ≥ 0.01) of the sup deviation decays like $n^{-1/2}$ (the n-part of "
        r"the high-probability form $C\sqrt{\log(1/\delta)/n}$)",
        measured=measured,
        verdict=verdict,
        figure="tails.png",
        sizes=sizes,
    )


def tails_figure(row, f):
    """q_δ√n vs √log(1/δ) per n with the affine fits; q_δ vs n per δ with slope −1/2."""
    ns = np.asarray(f["ns"])
    t = np.sqrt(np.log(1.0 / np.asarray(f["deltas"])))
    q = np.asarray(f["quantiles"])  # (D, K)
    fig, (a0, a1) = figure(2, ncols=2, width=4.8, height=3.9)
    for k, n in enumerate(ns):
        color = COLORS[k % len(COLORS)]
        a0.plot(t, q[:, k] * np.sqrt(n), "o", color=color, label=f"n = {int(n)}")
        a0.plot(t, f["intercept"]["value"][k] + f["coefficient"]["value"][k] * t, "-", color=color, lw=1.0)
    a0.plot([], [], "-", color="0.35", lw=1.0, label=r"affine fit $a + b\,t$ (same colour)")
    a0.set_xticks(t)
    a0.set_xticklabels([f"{v:.2f}\n(δ={d:g})" for v, d in zip(t, f["deltas"])], fontsize=7)
    a0.set_xlabel(r"$t = \sqrt{\log(1/\delta)}$")
    a0.set_ylabel(r"$q_\delta\sqrt{n}$  ($q_\delta$: $(1-\delta)$-quantile of the sup deviation)")
    a0.set_title(f"tails over {row['config']['seeds']} contexts, one model")
    a0.legend(fontsize=7)
    for j, d in enumerate(f["deltas"]):
        a1.plot(ns, q[j], "o-", color=COLORS[j % len(COLORS)], label=f"δ = {d:g}")
    a1.plot(ns, q[-1, 0] * (ns / ns[0]) ** -0.5, "--", color="0.35", lw=1.0, label="slope $-1/2$")
    log_ticks(a1, ns, "x")
    log_values(a1, "y")
    a1.set_xlabel("context size $n$")
    a1.set_ylabel(r"$q_\delta$ of $\sup_s\,\|x_s-\hat x_s\|$")
    a1.set_title("quantiles vs n")
    a1.legend(fontsize=7)
    return fig


__all__ = ["Tails", "sizes_of", "tails_figure", "tails_line"]
