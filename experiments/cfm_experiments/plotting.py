"""One plotting style for every figure the experiments write.

Conventions: every axis is labelled with its quantity, log axes carry ticks at the values that
were actually run (n, L, m, N) with plain labels, reference slopes are drawn dashed and named
in the legend, maths is matplotlib mathtext (``$n^{-1/2}$``), never raw TeX, fonts are readable at
the saved size, and no empty panels are left.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator
from numpy.typing import ArrayLike

#: rcParams applied by :func:`figure`.
STYLE = {
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "legend.fontsize": 8,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "lines.markersize": 4,
    "savefig.dpi": 130,
}

#: colour-blind safe qualitative palette (Okabe–Ito), strong enough on white.
COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#999999")


def pyplot():
    """``matplotlib.pyplot`` with :data:`STYLE` applied.

    No backend is forced: matplotlib falls back to Agg on a headless machine, and notebooks
    keep their inline backend (forcing Agg is what hides figures in a notebook).
    """
    plt.rcParams.update(STYLE)  # pyright: ignore[reportCallIssue, reportArgumentType]  # stubs want Literal rc keys
    return plt


def figure(panels: int, *, ncols: int = 3, width: float = 4.3, height: float = 3.4):
    """A figure with exactly ``panels`` axes on a grid of at most ``ncols`` columns.

    Returns ``(fig, axes)`` with ``axes`` a flat list of length ``panels``; grid slots beyond
    ``panels`` are removed, so no empty panel is drawn.
    """
    pyplot()
    ncols = max(1, min(ncols, panels))
    nrows = -(-panels // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[panels:]:
        fig.delaxes(ax)
    return fig, flat[:panels]


def log_ticks(ax, values: ArrayLike, axis: str = "x") -> None:
    """Log scale on ``axis`` with major ticks at ``values`` (plain integers or %g) and no minor labels."""
    vals = np.unique(np.asarray(values, dtype=float))
    labels = [f"{v:.0f}" if float(v).is_integer() else f"{v:g}" for v in vals]
    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    target.set_major_locator(FixedLocator(vals.tolist()))
    target.set_ticklabels(labels)
    target.set_minor_locator(NullLocator())
    target.set_minor_formatter(NullFormatter())


def log_values(ax, axis: str = "y") -> None:
    """Log scale on ``axis`` for measured values: ticks at 1, 2, 5 × 10^k with plain labels
    (0.02, 0.05, 0.1, …), so that a range narrower than a decade still has labelled ticks."""
    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
    target.set_minor_formatter(NullFormatter())


def reference_slope(ax, x, anchor: tuple[float, float], slope: float, *, label: str | None = None, **kw):
    """Dashed line y = y₀ (x/x₀)^slope through ``anchor = (x₀, y₀)``; labelled for the legend."""
    x = np.asarray(x, dtype=float)
    x0, y0 = anchor
    kw = {"ls": "--", "lw": 1.0, "color": "0.35", **kw}
    return ax.plot(x, y0 * (x / x0) ** slope, label=label if label is not None else f"slope {slope:+.2f}", **kw)


def save(fig, path) -> Path:
    """Tight layout, save to ``path`` (parents created), close the figure; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


__all__ = ["COLORS", "STYLE", "figure", "log_ticks", "log_values", "pyplot", "reference_slope", "save"]
