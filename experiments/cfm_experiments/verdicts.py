"""The verdicts of every claim line, and the one function that writes a claim line.

A claim line concludes with one :class:`Verdict`. Three are statements about the claim
(*holds*, *holds with a different constant*, *refuted at these sizes*), one a finite-size
statement (*not observed at these sizes*: a finite run cannot refute an asymptotic claim), two
check the implementation (*code check passed* / *failed*), and four **withhold** the verdict,
each named for its reason:

- *inconclusive at these sizes*: the run is below the sizes at which the rule's verdict is stable
  (:func:`cfm_experiments.claims.verdicts.judge`), and only that;
- *undecided: interval straddles the boundary*: an interval reaches both sides of the claim's
  boundary (or the sizes' intervals disagree, or two independent draws read different verdicts:
  :func:`agree`), so a larger run could go either way;
- *not tested: the claimed regime is not reached*: the run never puts the claim to the test
  (e.g. a ridge so far above its threshold that the student collapses);
- *not measured: no usable rows*: nothing the rule can use was measured (no row, no interval,
  every fit floor-limited).

:func:`claim_line` writes a line in Markdown for ``claims.md`` (the maths as written) or as plain
text for the terminal (``$…$`` maths rendered by :func:`plain`).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .protocol import Claim


class Verdict(enum.StrEnum):
    """The verdict of a claim line; its value is the text printed."""

    HOLDS = "holds"
    DIFFERENT = "holds with a different constant"
    NOT_OBSERVED = "not observed at these sizes"
    REFUTED = "refuted at these sizes"
    BELOW_STABLE_SIZES = "inconclusive at these sizes"
    UNDECIDED = "undecided: interval straddles the boundary"
    NOT_TESTED = "not tested: the claimed regime is not reached"
    NOT_MEASURED = "not measured: no usable rows"
    CODE_PASSED = "code check passed"
    CODE_FAILED = "code check failed"

    @property
    def withheld(self) -> bool:
        """Whether the verdict is withheld (one of the four named reasons)."""
        return self in WITHHELD


HOLDS = Verdict.HOLDS
DIFFERENT = Verdict.DIFFERENT
NOT_OBSERVED = Verdict.NOT_OBSERVED
REFUTED = Verdict.REFUTED
BELOW_STABLE_SIZES = Verdict.BELOW_STABLE_SIZES
UNDECIDED = Verdict.UNDECIDED
NOT_TESTED = Verdict.NOT_TESTED
NOT_MEASURED = Verdict.NOT_MEASURED
CODE_PASSED = Verdict.CODE_PASSED
CODE_FAILED = Verdict.CODE_FAILED

WITHHELD = frozenset({BELOW_STABLE_SIZES, UNDECIDED, NOT_TESTED, NOT_MEASURED})
#: every verdict's text.
VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict)
#: from the weakest to the strongest statement: the worst of several verdicts is the first.
ORDER: tuple[Verdict, ...] = (
    CODE_FAILED,
    REFUTED,
    NOT_OBSERVED,
    NOT_MEASURED,
    NOT_TESTED,
    UNDECIDED,
    BELOW_STABLE_SIZES,
    DIFFERENT,
    HOLDS,
    CODE_PASSED,
)


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """The weakest of several verdicts (:data:`ORDER`); none: *not measured*."""
    return min(verdicts, key=ORDER.index, default=NOT_MEASURED)


def agree(verdicts: Sequence[Verdict]) -> Verdict:
    """The verdict of independent draws of one line (:mod:`cfm_experiments.draws`): their common
    verdict when every draw reads the same, a failed code check when any draw's failed, else
    *undecided* (a verdict a new draw overturns is no verdict: never *holds*, *holds with a different
    constant* nor *refuted*); no draw → *not measured*."""
    verdicts = [Verdict(v) for v in verdicts]
    if not verdicts:
        return NOT_MEASURED
    if len(set(verdicts)) == 1:
        return verdicts[0]
    return CODE_FAILED if CODE_FAILED in verdicts else UNDECIDED


def code_check(passed: bool) -> Verdict:
    """An identity of the implementation: no sizes involved."""
    return CODE_PASSED if passed else CODE_FAILED


def measured(ci_low: float, ci_high: float) -> bool:
    """Whether ``[ci_low, ci_high]`` is an interval a rule can use: both edges finite and ordered (a
    NaN, an infinite edge or a reversed pair carries no information)."""
    return math.isfinite(ci_low) and math.isfinite(ci_high) and ci_low <= ci_high


def against_band(ci_low: float, ci_high: float, low: float = -float("inf"), high: float = float("inf")) -> Verdict:
    """An interval against the claimed band ``[low, high]``: inside it *holds*, wholly outside it
    *refuted*, across an edge *undecided*; no interval (:func:`measured`) is *not measured*."""
    if not measured(ci_low, ci_high):
        return NOT_MEASURED
    if low <= ci_low and ci_high <= high:
        return HOLDS
    if ci_high < low or ci_low > high:
        return REFUTED
    return UNDECIDED


def against_claim(
    ci_low: float, ci_high: float, claim: float, alternative: float, beyond: Verdict = REFUTED
) -> Verdict:
    """An interval against a claimed value ``claim`` and the ``alternative`` the claim denies (on one
    side of it): an interval wholly beyond ``claim`` on the alternative's side reads ``beyond``
    (*refuted*, or *not observed* for a finite-size statement); one that reaches ``claim`` (or lies
    on its far side) and excludes ``alternative`` *holds*; one that reaches both *undecided*; no
    interval (:func:`measured`) *not measured*. With ``alternative == claim`` it is the one-sided
    bound: only an interval wholly on the claim's side holds."""
    if not measured(ci_low, ci_high):
        return NOT_MEASURED
    if alternative < claim:  # mirror: the alternative above the claim
        ci_low, ci_high, claim, alternative = -ci_high, -ci_low, -claim, -alternative
    if ci_low > claim:
        return beyond
    if ci_high < alternative or ci_high <= claim:
        return HOLDS
    return UNDECIDED


Style = Literal["markdown", "text", "brief"]

_HEADER = "| claim | measured (95 % CIs) | sizes | verdict | command | figure |\n|---|---|---|---|---|---|"

#: TeX commands written as the character they stand for (longest names first where one prefixes another).
_SYMBOLS = {
    "sqrt": "√",
    "log": "log",
    "exp": "exp",
    "sup": "sup",
    "inf": "inf",
    "min": "min",
    "max": "max",
    "mathrm": "",
    "operatorname": "",
    "text": "",
    "left": "",
    "right": "",
    "delta": "δ",
    "lambda": "λ",
    "theta": "θ",
    "sigma": "σ",
    "mu": "μ",
    "phi": "φ",
    "rho": "ρ",
    "beta": "β",
    "gamma": "γ",
    "kappa": "κ",
    "eta": "η",
    "varepsilon": "ε",
    "epsilon": "ε",
    "nabla": "∇",
    "infty": "∞",
    "propto": "∝",
    "leq": "≤",
    "le": "≤",
    "geq": "≥",
    "ge": "≥",
    "approx": "≈",
    "cdot": "·",
    "times": "×",
    "to": "→",
    "sum": "Σ",
    "Vert": "‖",
    "dots": "…",
    "ldots": "…",
}


def _group(s: str, i: int) -> tuple[str, int]:
    """The TeX argument at ``s[i]`` (a braced group, or one character after spaces) and the index after it."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        return "", i
    if s[i] == "\\":
        m = re.match(r"\\([A-Za-z]+|.)", s[i:])
        return (m.group(), i + m.end()) if m else ("", i + 1)
    if s[i] != "{":
        return s[i], i + 1
    depth, j = 0, i
    while j < len(s):
        depth += {"{": 1, "}": -1}.get(s[j], 0)
        if depth == 0:
            return s[i + 1 : j], j + 1
        j += 1
    return s[i + 1 :], len(s)


def _math(s: str) -> str:
    """One ``$…$`` formula as plain text."""
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            m = re.match(r"[A-Za-z]+", s[i + 1 :])
            if not m:  # \, \; \| \{ …: spacing or an escaped character
                nxt = s[i + 1 : i + 2]
                out.append({",": " ", ";": " ", "!": "", "|": "‖", " ": " "}.get(nxt, nxt))
                i += 2
                continue
            name, i = m.group(), i + 1 + len(m.group())
            if name == "sqrt":
                arg, i = _group(s, i)
                out.append(f"√({_math(arg)})")
            elif name in ("hat", "widehat"):
                arg, i = _group(s, i)
                out.append(_math(arg) + "\u0302")
            else:
                word = _SYMBOLS.get(name, name)
                # a word before a letter or another command keeps a space: \log\log → log log
                spaced = word.isalpha() and i < len(s) and (s[i].isalpha() or s[i] == "\\")
                out.append(word + " " * spaced)
        elif c in "^_":
            arg, i = _group(s, i + 1)
            arg = _math(arg)
            out.append(c + (arg if arg.isalnum() or re.fullmatch(r"[-+]?[\d.]+|∞|′|ʹ", arg) else f"({arg})"))
        elif c in "{}":
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def plain(text: str) -> str:
    """``text`` with its ``$…$`` maths as plain text: ``$\\sqrt{\\log(1/\\delta)}$`` → ``√(log(1/δ))``."""
    return re.sub(r"\$([^$]*)\$", lambda m: _math(m.group(1)), text)


def claim_line(claim: Claim, style: Style = "markdown") -> str:
    """One claim line: a row of the Markdown table of ``claims.md`` (the maths as written); plain
    text for the terminal (``text``: the verdict first, then what was measured, the sizes, the
    command and the figure, one per indented line); ``brief``: ``- claim: verdict``."""
    verdict = Verdict(claim.verdict)
    if style == "markdown":
        esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
        fig = f"`{claim.figure}`" if claim.figure else ""
        command = f"`{claim.command}`" if claim.command else ""
        return (
            f"| {esc(claim.claim)} | {esc(claim.measured)} | {esc(claim.sizes)} | **{verdict}** | {command} | {fig} |"
        )
    if style == "brief":
        return f"- {plain(claim.claim)}: {verdict}"
    rest = [("measured", plain(claim.measured)), ("sizes", claim.sizes), ("command", claim.command)]
    rest.append(("figure", claim.figure))
    return "\n".join([f"[{verdict}] {plain(claim.claim)}"] + [f"    {k}: {v}" for k, v in rest if v])


def claim_lines(claims: Sequence[Claim], style: Style = "markdown") -> str:
    """Several claim lines (:func:`claim_line`): Markdown under the table's header, text a blank
    line apart, brief one a line."""
    if style == "markdown":
        return "\n".join([_HEADER, *(claim_line(c, style) for c in claims)])
    return ("\n\n" if style == "text" else "\n").join(claim_line(c, style) for c in claims)


__all__ = [
    "BELOW_STABLE_SIZES",
    "CODE_FAILED",
    "CODE_PASSED",
    "DIFFERENT",
    "HOLDS",
    "NOT_MEASURED",
    "NOT_OBSERVED",
    "NOT_TESTED",
    "ORDER",
    "REFUTED",
    "UNDECIDED",
    "VERDICTS",
    "WITHHELD",
    "Style",
    "Verdict",
    "against_band",
    "against_claim",
    "agree",
    "claim_line",
    "claim_lines",
    "code_check",
    "measured",
    "plain",
    "worst",
]
