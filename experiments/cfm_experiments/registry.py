"""The commands: each a named set of parts (:mod:`cfm_experiments.protocol`), one line each.

The built-in commands are listed here. Another package adds its own through the entry-point group
``cfm_experiments.commands`` (the distribution's own; the old ``cfm_jax.commands`` is still read,
with a warning, until the next release): each entry point names a :class:`Command` (in a module that imports no JAX),
and its name is the command's. Adding an experiment is declaring its parts (a module's ``PARTS``:
one :class:`~cfm_experiments.protocol.Declaration` each, in the command's order; in a module that
imports no JAX, ``--help`` imports nothing else) and writing each part's class, which names its
declaration. This module imports no experiment: ``cfm-jax --help`` lists the commands without
importing JAX; a command's parts are imported when it runs. The measured times its ``--help``
quotes are the compile benchmark's (:mod:`cfm_experiments.measured`).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import warnings
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .protocol import Declaration, Part

#: the entry-point group other packages register their commands under.
GROUP = "cfm_experiments.commands"
#: the group's name while the experiments shipped inside the library: read too, with a FutureWarning
LEGACY_GROUP = "cfm_jax.commands"


@dataclasses.dataclass(frozen=True)
class Command:
    """``cfm-jax NAME``: the parts whose classes ``module`` defines (importing it defines them all),
    and a one-line ``help``.

    ``declares``: a module whose ``PARTS`` declare the parts, in the command's order
    (:class:`~cfm_experiments.protocol.Declaration`: name, options, optional;
    :mod:`cfm_experiments.declarations`), and which imports no JAX, read by ``--help``; without
    one, ``module`` defines ``PARTS`` (and ``--help`` imports it).
    """

    name: str
    module: str
    help: str
    declares: str = ""

    def parts(self) -> tuple[Part, ...]:
        """Every part of the command, in its declared order: one instance of each declared part's
        class (imports ``module``; a ValueError when a declared part has no class or several, or a
        class of ``module`` declares a part the command does not;
        :func:`~cfm_experiments.protocol.part_classes`)."""
        from .protocol import part_classes

        importlib.import_module(self.module)
        return tuple(cls() for cls in part_classes(self.declared(), self.module))

    def declared(self) -> tuple[Declaration, ...]:
        """Each part's :class:`~cfm_experiments.protocol.Declaration`, in the command's order: from
        ``declares`` when given (importing no experiment), else from ``module``."""
        return tuple(importlib.import_module(self.declares or self.module).PARTS)

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


#: the built-in commands, in the order ``--help`` lists them.
BUILTIN: dict[str, Command] = {
    c.name: c
    for c in (
        Command(
            "rates",
            "cfm_experiments.rates",
            "finite vs infinite context: fitted rates in n and d",
            declares="cfm_experiments.declarations.rates",
        ),
        Command(
            "gradcheck",
            "cfm_experiments.gradcheck",
            "compare gradient methods and finite differences",
            declares="cfm_experiments.declarations.gradcheck",
        ),
        Command(
            "sync",
            "cfm_experiments.sync",
            "stochastic transformer: synchronisation, Lyapunov exponents, rates",
            declares="cfm_experiments.declarations.sync",
        ),
        Command(
            "claims",
            "cfm_experiments.claims",
            "the first paper's claims (constants, rates, tails) against exact limits",
            declares="cfm_experiments.declarations.claims",
        ),
        Command(
            "ogd",
            "cfm_experiments.ogd",
            "ridge-regularised OGD: the ablation, the paper's claims, curvature",
            declares="cfm_experiments.declarations.ogd",
        ),
    )
}


def _what(obj: object) -> str:
    return f"the Command {obj.name!r}" if isinstance(obj, Command) else f"a {type(obj).__name__}"


def installed(problems: list[str] | None = None) -> dict[str, Command]:
    """The commands other packages register under :data:`GROUP`, by name (each entry point loaded:
    its module, not the command's parts). An entry point that does not load, is not a
    :class:`Command` of its own name, or takes a built-in command's name is a ValueError naming it;
    given a ``problems`` list, its one-line message is appended there instead and the entry point
    skipped, so that one broken package leaves every other command working."""
    found: dict[str, Command] = {}
    legacy = list(importlib.metadata.entry_points(group=LEGACY_GROUP))
    for ep in [*importlib.metadata.entry_points(group=GROUP), *legacy]:
        where = f"entry point {ep.name} = {ep.value} ({ep.group})"
        if ep.group == LEGACY_GROUP:
            warnings.warn(
                f"{where}: register it under {GROUP!r} (the old group is read until the next release)",
                FutureWarning,
                stacklevel=2,
            )
        try:
            try:
                cmd = ep.load()
            except Exception as e:
                first = (str(e).strip().splitlines() or [""])[0]
                raise ValueError(f"{where} does not load: {type(e).__name__}: {first}") from None
            if not isinstance(cmd, Command) or cmd.name != ep.name:
                raise ValueError(f"{where} must name a Command called {ep.name!r}, got {_what(cmd)}.")
            if cmd.name in BUILTIN or cmd.name in found:
                raise ValueError(f"{where}: the command {cmd.name!r} exists already.")
        except ValueError as e:
            if problems is None:
                raise
            problems.append(str(e))
            continue
        found[cmd.name] = cmd
    return found


class _Commands(MutableMapping[str, Command]):
    """The built-in commands, then the installed ones (:func:`installed`), looked up when first
    needed; entries may be added (tests, or a script registering its own command). A broken
    installed entry point is skipped, its message kept in :attr:`problems`."""

    def __init__(self, builtin: dict[str, Command]):
        self._commands = dict(builtin)
        self._installed: dict[str, Command] | None = None
        #: one line per installed entry point that was skipped (:func:`installed`).
        self.problems: list[str] = []

    def _all(self) -> dict[str, Command]:
        if self._installed is None:
            self._installed = installed(self.problems)
            self._commands.update({k: v for k, v in self._installed.items() if k not in self._commands})
        return self._commands

    def __getitem__(self, name: str) -> Command:
        return self._all()[name]

    def __setitem__(self, name: str, cmd: Command) -> None:
        self._all()[name] = cmd

    def __delitem__(self, name: str) -> None:
        del self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __repr__(self) -> str:
        return f"COMMANDS({', '.join(self._all())})"


#: every command: the built-in ones, then the installed ones (:data:`GROUP`).
COMMANDS: _Commands = _Commands(BUILTIN)


def command(name: str) -> Command:
    """The command called ``name``; a ValueError listing the commands otherwise."""
    try:
        return COMMANDS[name]
    except KeyError:
        raise ValueError(f"unknown command {name!r}; choose from {', '.join(COMMANDS)}.") from None


__all__ = ["BUILTIN", "COMMANDS", "GROUP", "LEGACY_GROUP", "Command", "command", "installed"]
