"""The first paper's rates as claimed-vs-measured lines, with the verdict rules of ``cfm-jax rates``.

The claims (propagation of chaos in n, uniformly in depth): attention's token-level quantities
(the token, the coupled context, the token adjoint p, the measure adjoint ∇φ) deviate from the
infinite-context system as n^{-1/2} whatever d; W1 between the n-point and the infinite-context
measures as n^{-1/dʹ} (n^{-1/2} up to a log at dʹ = 2); a W1-Lipschitz control field, not of
the kernel form, drives its tokens at the same n^{-1/dʹ} (the curse of dimension attention
escapes).

The verdict of a claim from its fits is :mod:`cfm_experiments.verdicts.rates`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from cfm_jax.stats import Interval

from ..protocol import Claim
from ..verdicts.rates import agrees, counts, verdict

#: (claim, field, quantity): the claim's fits are the rows' of that quantity and field (None: every field).
CLAIMS: tuple[tuple[str, str | None, str], ...] = (
    (r"attention: the token deviation $\sup_s‖x_s − \hat x_s‖$ decays as $n^{-1/2}$ whatever d", "attention", "token"),
    ("attention: the coupled context particles deviate as $n^{-1/2}$ whatever d", "attention", "context"),
    ("attention: the token adjoint p deviates as $n^{-1/2}$ whatever d", "attention", "adjoint"),
    ("attention: the measure adjoint ∇φ deviates as $n^{-1/2}$ whatever d", "attention", "grad_phi"),
    ("W1 between the n-point and the infinite-context measures decays as $n^{-1/d'}$ (log at d' = 2)", None, "w1"),
    ("a W1-Lipschitz control field drives its tokens at $n^{-1/d'}$ (the curse of dimension)", "control", "token"),
)


def _label(f: dict) -> str:
    row = f"d={f['dim']}" + (f" (dʹ={f['intrinsic_dim']})" if f["intrinsic_dim"] != f["dim"] else "")
    if f["field"] == "control" and f["quantity"] == "w1":
        row = "control " + row
    return row


def measured(fits: Sequence[dict]) -> str:
    """Every fit of a claim: slope [95 % CI] against the allowed exponent(s), and why a fit does not count."""
    parts = []
    for f in fits:
        lo, hi = f["expected_band"]
        want = f"{lo:+.2f}" if lo == hi else f"{lo:+.2f}…{hi:+.2f}"
        text = f"{_label(f)}: {Interval(f['slope'], f['ci_low'], f['ci_high']):+.2f} vs {want}"
        if not f["meaningful"]:
            text += " (floor-limited, not counted)"
        elif not counts(f):
            text += " (CI contains 0, not counted)"
        elif not agrees(f):
            text += " (outside)"
        parts.append(text)
    return "; ".join(parts)


def sizes(fits: Sequence[dict], seeds: int, layers: int) -> str:
    """The sizes behind a claim line: the n ranges fitted, the rows' d, seeds and layers."""
    ranges = sorted({(int(f["ns"][0]), int(f["ns"][-1])) for f in fits})
    dims = sorted({f["dim"] for f in fits})
    n = ", ".join(f"{a}…{b}" for a, b in ranges)
    return f"n = {n}; d = {', '.join(map(str, dims))}; {seeds} seeds; L = {layers}"


def claims(fits: Sequence[dict], *, seeds: int, layers: int, figure: str) -> tuple[Claim, ...]:
    """One :class:`~cfm_experiments.Claim` per claim of :data:`CLAIMS` that has fits."""
    out = []
    for text, field, quantity in CLAIMS:
        mine = [f for f in fits if f["quantity"] == quantity and field in (None, f["field"])]
        if not mine:
            continue
        out.append(
            Claim(
                claim=text,
                measured=measured(mine),
                verdict=verdict(mine),
                figure=figure,
                sizes=sizes(mine, seeds, layers),
            )
        )
    return tuple(out)


__all__ = ["CLAIMS", "agrees", "claims", "counts", "measured", "sizes", "verdict"]
