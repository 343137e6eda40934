"""The commands: each a named set of parts (:mod:`cfm_experiments.protocol`), one line each.

Adding an experiment is writing its part (a module defining ``PARTS``) and adding its line here
(or its part to an existing command's ``PARTS``). This module imports no experiment: ``cfm-jax
--help`` lists the commands without importing JAX; a command's module is imported when it runs or
shows its own help.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .protocol import Part


@dataclasses.dataclass(frozen=True)
class Command:
    """``cfm-jax NAME``: the parts defined in ``module`` (its ``PARTS``), and a one-line ``help``.

    ``times``: its measured wall times (cold and warm compilation cache, full and ``--quick``) and
    the machine they were measured on, shown by its ``--help``.
    """

    name: str
    module: str
    help: str
    times: str = ""

    def parts(self) -> tuple[Part, ...]:
        """Every part of the command, in order (imports its module)."""
        return tuple(importlib.import_module(self.module).PARTS)

    def default_parts(self) -> tuple[Part, ...]:
        """The parts run when none are named: all but the optional ones."""
        return tuple(p for p in self.parts() if not p.optional)

    def select(self, names=None) -> tuple[Part, ...]:
        """The parts named in ``names`` (in the command's order), or the default ones; a ValueError
        naming ``--parts`` for an unknown name."""
        if names is None:
            return self.default_parts()
        every = self.parts()
        known = [p.name for p in every]
        if isinstance(names, str) or not names:
            raise ValueError(f"--parts must name at least one part, from {', '.join(known)}; got {names!r}.")
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"--parts: unknown part {unknown[0]!r} of `{self.name}`; choose from {', '.join(known)}.")
        return tuple(p for p in every if p.name in names)


#: every command, in the order ``--help`` lists them.
COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command(
            "rates",
            "cfm_experiments.rates",
            "finite vs infinite context: fitted rates in n and d",
            times="2-core CPU, otherwise idle: 58 s with an empty compilation cache, 34 s with it filled; "
            "the default run 3 min 52 s and 112 s",
        ),
        Command(
            "gradcheck",
            "cfm_experiments.gradcheck",
            "compare gradient methods and finite differences",
            times="2-core CPU, otherwise idle: 40 s with an empty compilation cache, 16 s with it filled; "
            "the default run 43 s and 16 s",
        ),
        Command(
            "sync",
            "cfm_experiments.sync",
            "stochastic transformer: synchronisation, Lyapunov exponents, rates",
            times="2-core CPU, otherwise idle: 77 s with an empty compilation cache, 15 s with it filled; "
            "the default run 3 min 33 s and 99 s",
        ),
        Command(
            "claims",
            "cfm_experiments.claims",
            "the first paper's claims (constants, rates, tails) against exact limits",
            times="2-core CPU, otherwise idle: 59 s with an empty compilation cache, 34 s with it filled; "
            "the default run 5 min 05 s and 4 min 19 s",
        ),
        Command(
            "ogd",
            "cfm_experiments.ogd",
            "ridge-regularised OGD: the ablation, the paper's claims, curvature",
            times="2-core CPU, otherwise idle: 20 s with an empty compilation cache, 10 s with it filled; "
            "the default run 67 s and 58 s",
        ),
    )
}


def command(name: str) -> Command:
    """The command called ``name``; a ValueError listing the commands otherwise."""
    try:
        return COMMANDS[name]
    except KeyError:
        raise ValueError(f"unknown command {name!r}; choose from {', '.join(COMMANDS)}.") from None


__all__ = ["COMMANDS", "Command", "command"]
