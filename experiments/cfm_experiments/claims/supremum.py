"""What a search found (:mod:`.searches`), read on its held-out draws: the supremum, and whether it
is a measured constant.

The winner is the start whose ascent reached the largest training value; its held-out values are
paired with its start's and with the best trivial model's on the same draws (:func:`search`). A
supremum that does not beat its start (the gain's interval's lower edge not above :data:`MIN_GAIN`
of the start), that the best trivial model beats (the paired interval below 0), whose search did
not converge, or whose own n-slope (:func:`worst_slope`) lies outside the band of a decay like
n^{−½} (:func:`~cfm_experiments.verdicts.slopes.band`) is not a measured constant:
:func:`supremum` names the problem, and :func:`search_verdict` withholds the verdict (*not
tested*). A converged search whose winner never left its start (a construction at a stationary
point of the ascent) is not a problem.
"""

from __future__ import annotations

import numpy as np

from cfm_jax.stats import Interval, bootstrap

from ..verdicts import NOT_TESTED, REFUTED, slopes
from .statistics import ci

#: the least mean gain over the start, relative to the start's value, that counts as an improvement.
MIN_GAIN = 0.01


def _paired_mean_difference(a, b) -> Interval:
    return bootstrap(lambda x, y: float(np.mean(x - y)), np.asarray(a), np.asarray(b), paired=True)


def search(found, start, trivial) -> dict:
    """Whether a supremum found was searched, on paired per-context values: the gain over its start
    and the margin over the best trivial model (mean differences with their intervals), and the
    problems: *never improved on its start* (the gain's interval's lower edge not above
    :data:`MIN_GAIN` of the start's mean), *beaten by a trivial model* (the margin's interval below 0)."""
    gain, margin = _paired_mean_difference(found, start), _paired_mean_difference(found, trivial)
    problems = []
    if not gain.ci_low > MIN_GAIN * float(np.mean(start)):
        problems.append("never improved on its start")
    if margin.ci_high < 0:
        problems.append("beaten by a trivial model")
    return {"gain": gain, "margin": margin, "problems": problems}


def log_mean_slope(xs, per_config: list, paired: bool, n_boot: int = 2000) -> Interval:
    """Slope of log(mean over contexts) against log x, its 95 % interval by resampling the contexts
    (the same contexts at every x when ``paired``: one draw measured at several n). The mean, not
    the mean of logs: a context's deviation can be exactly 0 (a discrete law's shares equal to its
    weights). A mean of exactly 0 has no logarithm: at the point, no slope (a NaN interval, which the
    rules read *not measured*); in a resample, an infinite or NaN slope that the interval carries."""
    logx = np.log(np.asarray(xs, np.float64))
    centred = (logx - logx.mean()) / np.sum((logx - logx.mean()) ** 2)
    rng = np.random.default_rng(0)
    values = [np.asarray(v, np.float64) for v in per_config]
    if paired:
        idx = rng.integers(len(values[0]), size=(n_boot, len(values[0])))
        means = np.stack([v[idx].mean(axis=1) for v in values], axis=1)
    else:
        means = np.stack([v[rng.integers(len(v), size=(n_boot, len(v)))].mean(axis=1) for v in values], axis=1)
    point_means = np.array([v.mean() for v in values])
    if not np.all(point_means > 0):
        return Interval(np.nan, np.nan, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):  # log 0 = −inf, and −inf·0 at the middle size
        boots = np.log(means) @ centred
    point = float(np.log(point_means) @ centred)
    return Interval(point, float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5)))


def worst_ns(row) -> list[int]:
    """The sizes of the winner's slope, ``slope_ns``: the ball's from the ascent's n up, the Gaussian's ``eval_ns``."""
    return list(row["config"]["slope_ns"])


def worst_slope(row) -> Interval:
    """The n-slope of the winner's mean deviation on the held-out draws at :func:`worst_ns`
    (:func:`log_mean_slope`, paired)."""
    measured = list(row["worst_ns"])
    ns = worst_ns(row)
    cols = [measured.index(n) for n in ns]
    dev = np.asarray(row["worst_case"])[:, cols] / np.sqrt(np.asarray(ns, np.float64))  # (contexts, K)
    return log_mean_slope(ns, list(dev.T), paired=True)


def last_gain(row, index: int) -> float:
    """The relative gain of start ``index``'s best value over the ascent's last stretch (0 after one stretch)."""
    bests = np.asarray(row["stretch_best"])[:, index]
    return float(bests[-1] / bests[-2] - 1) if len(bests) >= 2 else 0.0


def supremum(row) -> dict:
    """The winner (largest training value) on the held-out draws at the ascent's n: its name, index,
    per-context values and interval, with :func:`search`'s gain, margin and problems, the best
    trivial start's interval, the ascent's steps and last stretch's gain, and the winner's n-slope;
    the problems also name a search that did not converge and a slope outside the band of n^{−½}.
    A converged search whose winner never left its start (``stationary``: a construction at a
    stationary point of the ascent, e.g. the aligned model on a corner law) is not a problem."""
    held = np.asarray(row["held_out"])
    S = len(row["starts"])
    i = int(np.argmax(row["train_best"]))
    trivial = [j for j, name in enumerate(row["starts"]) if name.startswith("trivial")]
    t = max(trivial, key=lambda j: held[S + j].mean())
    searched = search(held[i], held[S + i], held[S + t])
    slope = worst_slope(row)
    problems = list(searched["problems"])
    stationary = row["converged"] and "never improved on its start" in problems
    if stationary:  # a converged ascent that cannot leave its start: the start is a stationary point
        problems.remove("never improved on its start")
    if not row["converged"]:
        problems.append("search not converged")
    if slopes.slope_verdict([slope], worst_ns(row)) == REFUTED:
        problems.append(f"its n-slope {ci(slope, fmt='+.3f')} is outside the band of a decay like n^−1/2")
    return {
        "start": row["starts"][i],
        "index": i,
        "values": held[i],
        "interval": bootstrap(np.mean, held[i]),
        "trivial": bootstrap(np.mean, held[S + t]),
        "steps": len(row["stretch_best"]) * int(row["config"]["sup_steps"]),
        "stationary": stationary,
        "last_gain": last_gain(row, i),
        "slope": slope,
        **searched,
        "problems": problems,
    }


def random_mean(row) -> Interval:
    """Mean over random models and held-out draws of √n·dev at the ascent's n (models resampled)."""
    held = np.asarray(row["held_out"])[2 * len(row["starts"]) :]
    return bootstrap(np.mean, held.mean(axis=1))


#: what :func:`search_verdict` says when no supremum has a problem.
SEARCHED = (
    "every search converged, improved on its start (or converged at it), beats the trivial models and decays "
    "like $n^{-1/2}$"
)


def search_verdict(entries: list[tuple[str, dict]], rule, searched: str = SEARCHED):
    """The rule's verdict when no supremum has a problem, else *not tested*, and the sentence saying
    which (``searched`` when none has)."""
    failed = [f"{x} {p}" for x, s in entries for p in s["problems"]]
    if failed:
        return NOT_TESTED, "not a measured constant: " + "; ".join(failed)
    return rule, searched


__all__ = [
    "MIN_GAIN",
    "SEARCHED",
    "last_gain",
    "log_mean_slope",
    "random_mean",
    "search",
    "search_verdict",
    "supremum",
    "worst_ns",
    "worst_slope",
]
