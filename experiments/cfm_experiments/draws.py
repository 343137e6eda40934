"""Independent draws: a part whose data come from randomly drawn models or contexts, run at several seeds.

A verdict is a claim about data, and it must survive a new draw. A part that samples models or
contexts is run at :data:`DRAWS` independent seeds (``--seed``, ``--seed`` + 1, …): every row's
configuration carries its seed, so the draws' rows differ only there, and the first draw's rows are
those of a run with one draw. The part summarises each draw itself; each claim line's verdict is
:func:`~cfm_experiments.verdicts.agree` of the draws' verdicts (theirs when they agree, else *undecided*), its
measured text the first draw's, and its sizes say how many draws were run and whether their verdicts
agree (each draw's verdict when they do not). The other draws' lines and numbers are kept in
``summary.json``; the figures show the first draw.

A line whose statistic pools over draws (one pooled n-slope of every row of every draw,
:mod:`cfm_experiments.verdicts.slopes`) is written by the part's ``pooled`` method from every draw's
rows at once: it replaces the line of the same claim, its verdict the pooled one, each draw's own
verdict beside it. The command passes (``passed``) only when every draw's does.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import ClassVar

from .protocol import Claim, Part, Settings, Summary
from .verdicts import NOT_MEASURED, Verdict, agree

#: the independent draws of a part that samples models or contexts.
DRAWS = 2


def draw_settings(settings: Settings, draws: int) -> list[Settings]:
    """The settings of each of ``draws`` independent draws: ``settings`` with seed + k, k = 0 … draws − 1."""
    if draws < 1:
        raise ValueError(f"draw_settings: `draws` must be >= 1, got {draws}.")
    return [Settings(settings.quick, {**settings, "seed": settings.seed + k}) for k in range(draws)]


def agreeing(claims: list[Claim | None], seeds: list[int]) -> Claim:
    """One line from the same line of each draw (``None``: the draw did not write it, *not measured*):
    the first draw's claim and measured text, :func:`~cfm_experiments.verdicts.agree` of the verdicts, the sizes
    saying whether the draws agree."""
    first = claims[0]
    if first is None:
        raise ValueError("agreeing: the first draw must have the line.")
    verdicts = [Verdict(c.verdict) if c is not None else NOT_MEASURED for c in claims]
    verdict = agree(verdicts)
    seen = f"{len(seeds)} independent draws (seeds {', '.join(map(str, seeds))})"
    if len(set(verdicts)) == 1:
        said = f"{seen}: their verdicts agree"
    else:
        said = f"{seen} disagree: " + "; ".join(f"seed {s}: {v}" for s, v in zip(seeds, verdicts))
    return dataclasses.replace(
        first,
        measured=f"seed {seeds[0]}: {first.measured}" if len(seeds) > 1 else first.measured,
        verdict=verdict,
        sizes=f"{first.sizes}; {said}" if first.sizes else said,
    )


def pooling(line: Claim, claims: list[Claim | None], seeds: list[int]) -> Claim:
    """A line pooled over the draws (``line``, from every draw's rows) in place of the same line of
    each draw (``claims``): its verdict and measured text, its sizes saying so, each draw's own
    verdict beside it."""
    verdicts = [Verdict(c.verdict) if c is not None else NOT_MEASURED for c in claims]
    said = f"pooled over {len(seeds)} independent draws (seeds {', '.join(map(str, seeds))}); each draw alone: " + (
        "; ".join(f"seed {s}: {v}" for s, v in zip(seeds, verdicts))
    )
    return dataclasses.replace(line, sizes=f"{line.sizes}; {said}" if line.sizes else said)


def combine(summaries: list[Summary], seeds: list[int], pooled: tuple[Claim, ...] = ()) -> Summary:
    """The draws' summaries as one: the first draw's text, data and files, with the other draws'
    text and data beside them, and every line of the first draw judged by :func:`agreeing`, or, for
    a line in ``pooled`` (computed from every draw's rows), replaced by it (:func:`pooling`)."""
    first = summaries[0]
    by_claim = {c.claim: c for c in pooled}

    def each(first_line: Claim) -> list[Claim | None]:
        return [first_line, *(next((c for c in s.claims if c.claim == first_line.claim), None) for s in summaries[1:])]

    lines = [
        pooling(by_claim[line.claim], each(line), seeds) if line.claim in by_claim else agreeing(each(line), seeds)
        for line in first.claims
    ]
    text = "\n".join(
        [first.text, *(f"-- independent draw, seed {k}:\n{s.text}" for k, s in zip(seeds[1:], summaries[1:]))]
    )
    other = [
        {"seed": k, "data": dict(s.data), "claims": [dataclasses.asdict(c) for c in s.claims]}
        for k, s in zip(seeds[1:], summaries[1:])
    ]
    return Summary(
        text=text,
        data={**first.data, "seeds": list(seeds), "other_draws": other},
        claims=tuple(lines),
        files=first.files,
        passed=all(s.passed for s in summaries),
    )


class Redrawn(Part):
    """A part run at ``draws`` independent seeds (module docstring); made by :func:`redrawn`."""

    draws: ClassVar[int] = DRAWS
    #: the part's own class, one draw (its rows and summary are a one-draw run's)
    one_draw: ClassVar[type[Part]]

    def configs(self, settings: Settings) -> list[dict]:
        base = super()
        return [c for s in draw_settings(settings, self.draws) for c in base.configs(s)]

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        each = draw_settings(settings, self.draws)
        by_draw = [[r for r in rows if r["config"]["seed"] == s.seed] for s in each]
        summaries = [super(Redrawn, self).summarize(r, s) for r, s in zip(by_draw, each)]
        return combine(summaries, [s.seed for s in each], tuple(self.pooled(by_draw, settings)))

    def pooled(self, rows: list[list[dict]], settings: Settings) -> list[Claim]:
        """The lines pooled over the draws, from each draw's ``rows`` (module docstring); none by
        default. A part defines its own ``pooled`` to pool a line."""
        return []

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        first = min((int(r["config"]["seed"]) for r in rows), default=0)
        return super().figures([r for r in rows if r["config"]["seed"] == first], summary, out)


def redrawn(cls: type[Part], draws: int = DRAWS) -> type[Part]:
    """The part class ``cls`` run at ``draws`` independent seeds, as a class decorator: a subclass of
    :class:`Redrawn` and ``cls`` that takes over ``cls``'s declaration, so that its command finds it
    (and not ``cls``) as the part's one class."""
    declaration = vars(cls)["declaration"]
    delattr(cls, "declaration")  # the declaring class is the redrawn one
    namespace = {
        **({"pooled": vars(cls)["pooled"]} if "pooled" in vars(cls) else {}),  # Redrawn's would shadow it
        "declaration": declaration,
        "draws": int(draws),
        "one_draw": cls,
        "__module__": cls.__module__,
        "__doc__": cls.__doc__,
    }
    made = type(cls.__name__, (Redrawn, cls), namespace)
    made.__qualname__ = cls.__qualname__
    return made


__all__ = ["DRAWS", "Redrawn", "agreeing", "combine", "draw_settings", "pooling", "redrawn"]
