"""Claim lines as text: a row of the Markdown table of ``claims.md`` (the maths as written), or
plain text for the terminal, its ``$…$`` maths translated by :func:`plain` (``$\\sqrt{\\log(1/\\delta)}$``
→ ``√(log(1/δ))``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from .protocol import Claim
from .verdicts import Verdict

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


__all__ = ["Style", "claim_line", "claim_lines", "plain"]
