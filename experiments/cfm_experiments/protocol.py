"""The experiment protocol: what a part declares, and nothing the driver does for it.

An experiment is a set of **parts**. A part is declared once, by a :class:`Declaration`
(importing no JAX, so that ``--help`` is built from it alone) holding

- its ``name`` (unique in its command; every row it writes carries it as ``config["part"]``);
- its ``options``: :class:`Option` objects, each with its default, its ``--quick`` default and
  its rule. The command line and the Python entry point (:func:`cfm_experiments.run`) are built
  from them and check every value with the same rule, so a bound is written once;
- whether it is ``optional`` (run only when named by ``--parts``).

A command lists its declarations once, in its order (a module's ``PARTS``). The part itself is a
:class:`Part` subclass naming its declaration (``declaration = ...``), from which it takes its
``name``, ``options`` and ``optional`` (restating one is a TypeError); it adds a one-line ``title``
and its computation:

- ``configs(settings)``: the configurations it runs, plain JSON-able dicts (one row each);
- ``run(config)``: one configuration's numbers (a JSON-able dict). Pure in the configuration:
  resuming a sweep re-runs only the missing configurations, and their rows must come out the same;
- ``summarize(rows, settings)``: a :class:`Summary` of its rows: the text printed under its
  title, the numbers for ``summary.json``, its :class:`Claim` lines (claimed vs measured, with a
  :class:`~cfm_experiments.verdicts.Verdict`) and any text files it writes;
- ``figures(rows, summary, out)``: the figures it draws into ``out``.

Everything around that (the results folder and its manifest, resume and overwrite, progress,
per-row timing, Ctrl-C, the summary, the printed tables, the compile accounting) is the driver's
(:mod:`cfm_experiments.driver`), once for every part.
"""

from __future__ import annotations

import abc
import argparse
import dataclasses
import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from .options import distinct
from .verdicts import VERDICTS, Verdict

Kind = Literal["int", "real", "flag", "choice", "text"]

_UNSET: Any = object()


def _num(x: float) -> str:
    """A bound as written in an error: 2**62 rather than its 19 digits."""
    if float(x).is_integer() and x >= 2**20 and (int(x) & (int(x) - 1)) == 0:
        return f"2**{int(x).bit_length() - 1}"
    return f"{x:g}"


@dataclasses.dataclass(frozen=True)
class Option:
    """One option of a part: ``--name`` on the command line, ``name=`` in Python.

    Args:
        name: the Python name (``--`` + the name with dashes on the command line).
        default: the value of a full run.
        help: one line; the defaults are appended by the command line's help.
        kind: ``"int"`` (an integer >= ``low`` and < ``high``), ``"real"`` (finite, > ``low``),
            ``"flag"`` (a boolean, ``--name`` sets it), ``"choice"`` (one of ``choices``) or
            ``"text"``.
        quick: the value under ``--quick`` (default: ``default``).
        many: a list of distinct values (``nargs="+"``; each indexes a configuration), each
            checked, at least ``min_count`` of them (:func:`cfm_experiments.options.distinct`).
        low, high: the bounds of ``"int"`` and ``"real"`` values.
        choices: the values of a ``"choice"`` option.
        why: what the bound is for; quoted by the error.
        min_count: with ``many``, the fewest values allowed.
        optional: ``None`` is allowed (means "not used").
    """

    name: str
    default: Any
    help: str
    kind: Kind = "int"
    quick: Any = _UNSET
    many: bool = False
    low: float | None = None
    high: float | None = None
    choices: tuple = ()
    why: str = ""
    min_count: int = 1
    optional: bool = False

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def default_for(self, quick: bool) -> Any:
        """The default of a full run, or of ``--quick``."""
        return self.default if not quick or self.quick is _UNSET else self.quick

    def _need(self) -> str:
        if self.kind == "int":
            need = "an integer"
            if self.low is not None and self.high is not None:
                need += f" in [{_num(self.low)}, {_num(self.high)})"
            elif self.low is not None:
                need += f" >= {_num(self.low)}"
            elif self.high is not None:
                need += f" < {_num(self.high)}"
        elif self.kind == "real":
            need = "a finite number" + (f" > {_num(self.low)}" if self.low is not None else "")
            need += f" and < {_num(self.high)}" if self.high is not None else ""
        elif self.kind == "choice":
            need = "one of " + ", ".join(map(str, self.choices))
        elif self.kind == "flag":
            need = "True or False"
        else:
            need = "a string"
        return need + (f" ({self.why})" if self.why else "")

    def _one(self, v: Any) -> Any:
        """One value, normalised (a NumPy integer becomes an int), or a ValueError naming the flag."""
        ok = False
        if self.kind == "int":
            ok = isinstance(v, numbers.Integral) and not isinstance(v, bool)
            ok = ok and (self.low is None or int(v) >= self.low) and (self.high is None or int(v) < self.high)
            v = int(v) if ok else v
        elif self.kind == "real":
            ok = isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
            ok = ok and (self.low is None or float(v) > self.low) and (self.high is None or float(v) < self.high)
            v = float(v) if ok else v
        elif self.kind == "choice":
            ok = v in self.choices
        elif self.kind == "flag":
            ok = isinstance(v, bool)
        else:
            ok = isinstance(v, str)
        if not ok:
            raise ValueError(f"{self.flag} must be {self._need()}, got {v!r}.")
        return v

    def check(self, value: Any) -> Any:
        """``value`` normalised (a list becomes a tuple), or a ValueError naming ``--name``."""
        if value is None and self.optional:
            return None
        if not self.many:
            return self._one(value)
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise ValueError(f"{self.flag} must be a list of values, each {self._need()}; got {value!r}.")
        if len(value) < self.min_count:
            raise ValueError(f"{self.flag} needs at least {self.min_count} value(s), got {list(value)}.")
        return distinct(self.flag, (self._one(v) for v in value))

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        """Add ``--name`` to ``parser``: its default is None (the settings resolve it)."""
        show = lambda v: " ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)  # noqa: E731
        if self.kind == "flag":
            parser.add_argument(self.flag, dest=self.name, action="store_true", default=None, help=self.help)
            return
        default = f"default: {show(self.default)}"
        if self.quick is not _UNSET and self.quick != self.default:
            default += f"; with --quick: {show(self.quick)}"
        kw: dict[str, Any] = dict(dest=self.name, default=None, help=f"{self.help} ({default})")
        if self.many:
            kw["nargs"] = "+"
        if self.kind in ("int", "real"):
            kw["type"] = int if self.kind == "int" else float
            kw["metavar"] = self.name.split("_")[-1][:1].upper() if self.many else None
        elif self.kind == "choice":
            kw["choices"] = self.choices
        kw = {k: v for k, v in kw.items() if v is not None or k == "default"}
        parser.add_argument(self.flag, **kw)


#: the options every experiment has.
SEED = Option("seed", 0, "base PRNG seed", low=0, high=2**62, why="a JAX PRNG seed; offsets are added to it")


class Settings(Mapping[str, Any]):
    """The resolved, checked option values of one run: ``settings["ns"]``, ``settings.quick``,
    ``settings.seed``. Read-only; built by :func:`resolve`."""

    def __init__(self, quick: bool, values: Mapping[str, Any]):
        self.quick = bool(quick)
        self._values = dict(values)

    @property
    def seed(self) -> int:
        return int(self._values["seed"])

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"no option {name!r} in these settings (declare it in the part's options)") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def record(self) -> dict:
        """What the results folder records: ``quick`` and every option's value (lists as lists)."""
        return {"quick": self.quick, **{k: list(v) if isinstance(v, tuple) else v for k, v in self._values.items()}}

    def __repr__(self) -> str:
        return f"Settings(quick={self.quick}, {self._values})"


def declared(parts: Sequence[Part] | Sequence[Declaration]) -> dict[str, Option]:
    """Every option of ``parts`` (or of their declarations), and :data:`SEED`, by name; two parts
    may share an option only if they declare it identically."""
    out: dict[str, Option] = {"seed": SEED}
    for part in parts:
        for opt in part.options:
            if out.get(opt.name, opt) != opt:
                raise ValueError(f"parts declare the option {opt.flag} differently ({part.name}: {opt}).")
            out[opt.name] = opt
    return out


def resolve(parts: Sequence[Part], *, quick: bool = False, **given: Any) -> Settings:
    """The :class:`Settings` of a run of ``parts``: each option's given value (``None``: not given)
    or its default (``--quick``'s under ``quick``), checked by its rule; then each part's
    :meth:`Part.check` of the options together. A ValueError names the option."""
    options = declared(parts)
    unknown = sorted(set(given) - set(options))
    if unknown:
        flags = lambda names: ", ".join("--" + n.replace("_", "-") for n in names)  # noqa: E731
        raise ValueError(f"{flags(unknown)}: not an option of the parts run ({', '.join(p.name for p in parts)}).")
    if not isinstance(quick, bool):
        raise ValueError(f"--quick must be True or False, got {quick!r}.")
    values = {}
    for name, opt in options.items():
        v = given.get(name)
        values[name] = opt.check(opt.default_for(quick) if v is None else v)
    settings = Settings(quick, values)
    for part in parts:
        part.check(settings)
    return settings


@dataclasses.dataclass(frozen=True)
class Claim:
    """One claimed-vs-measured line.

    ``sizes``: the sizes the measurement used and at which the verdict is stable; ``command`` is
    filled in by the driver (the command line that reproduces the line)."""

    claim: str
    measured: str
    #: a :class:`~cfm_experiments.verdicts.Verdict`; its text is accepted and made one.
    verdict: Verdict | str
    figure: str = ""
    sizes: str = ""
    command: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim {self.claim!r}: unknown verdict {self.verdict!r}; choose from {VERDICTS}.")
        object.__setattr__(self, "verdict", Verdict(self.verdict))  # a verdict's text becomes its Verdict


@dataclasses.dataclass(frozen=True)
class Summary:
    """What a part makes of its rows.

    Attributes:
        text: printed under the part's title (a table, a few lines).
        data: JSON-able numbers, stored under the part's name in ``summary.json``.
        claims: its claimed-vs-measured lines.
        files: text files to write in the results folder, name -> content.
        passed: ``False`` when a check the part makes failed (the command then exits with 1).
    """

    text: str = ""
    data: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    claims: tuple[Claim, ...] = ()
    files: Mapping[str, str] = dataclasses.field(default_factory=dict)
    passed: bool = True


@dataclasses.dataclass(frozen=True)
class Declaration:
    """A part as the command line sees it: its ``name``, its ``options``, and ``optional`` (run only
    when named by ``--parts``). The part's class takes all three from here (:class:`Part`)."""

    name: str
    options: tuple[Option, ...] = ()
    optional: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a Declaration's name must be a non-empty string, got {self.name!r}.")
        if not isinstance(self.options, tuple) or not all(isinstance(o, Option) for o in self.options):
            raise ValueError(f"the part {self.name!r}: options must be a tuple of Option, got {self.options!r}.")


#: what a :class:`Part` takes from its :class:`Declaration` (and must not restate).
DECLARED = ("name", "options", "optional")


class Part(abc.ABC):
    """One part of an experiment (module docstring). A subclass sets ``declaration`` (its
    :class:`Declaration`, from which ``name``, ``options`` and ``optional`` are read) and ``title``,
    and implements :meth:`configs` and :meth:`run`. A subclass without a ``declaration`` of its
    own is a base other parts share."""

    #: the part as declared to the command line.
    declaration: ClassVar[Declaration]
    #: unique within its command; the ``part`` of every row it writes (from ``declaration``).
    name: ClassVar[str]
    #: its options (:class:`Option`; from ``declaration``).
    options: ClassVar[tuple[Option, ...]] = ()
    #: run only when asked for by name (``--parts``), not by default (from ``declaration``).
    optional: ClassVar[bool] = False
    #: one line, printed above its summary.
    title: ClassVar[str]
    #: computes in float64 (the driver switches JAX to it before anything runs).
    float64: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        own = vars(cls)
        restated = [a for a in DECLARED if a in own]
        if restated:
            raise TypeError(
                f"{cls.__qualname__} restates {', '.join(restated)}: a part takes them from its "
                "declaration (declaration = Declaration(name, options, optional))."
            )
        if "declaration" in own:
            d = own["declaration"]
            if not isinstance(d, Declaration):
                raise TypeError(f"{cls.__qualname__}.declaration must be a Declaration, got {type(d).__name__}.")
            cls.name, cls.options, cls.optional = d.name, d.options, d.optional

    def check(self, settings: Settings) -> None:
        """Rules between options (each option's own rule is already checked): a ValueError naming them."""

    @abc.abstractmethod
    def configs(self, settings: Settings) -> list[dict]:
        """The configurations to run, JSON-able dicts (the driver adds ``"part"``)."""

    @abc.abstractmethod
    def run(self, config: dict) -> dict:
        """One configuration's results, a JSON-able dict (the driver adds its wall time, ``seconds``)."""

    def summarize(self, rows: list[dict], settings: Settings) -> Summary:
        """A :class:`Summary` of this part's rows (in sweep order)."""
        return Summary()

    def figures(self, rows: list[dict], summary: Summary, out: Path) -> list[Path]:
        """The figures drawn from the rows into the folder ``out``; returns their paths."""
        return []


def _declaring_classes() -> list[type[Part]]:
    """Every :class:`Part` subclass defined so far that names a declaration of its own."""
    found: dict[type[Part], None] = {}
    stack = list(Part.__subclasses__())
    while stack:
        cls = stack.pop()
        if cls not in found:
            found[cls] = None
            stack.extend(cls.__subclasses__())
    return [c for c in found if "declaration" in vars(c)]


def part_classes(
    declarations: Sequence[Declaration], package: str, classes: Sequence[type[Part]] | None = None
) -> tuple[type[Part], ...]:
    """The class of each declared part, in the declarations' order: the one class of ``classes``
    (default: every :class:`Part` subclass defined so far) whose own ``declaration`` is it; a part
    may be a class of another package (one part in two commands). A ValueError when two declared
    parts share a name, when a declared part has no class or several, or when a class defined in
    ``package`` (a module, or a package and its modules) declares a part that is not declared."""
    classes = _declaring_classes() if classes is None else [c for c in classes if "declaration" in vars(c)]
    names = [d.name for d in declarations]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{package}: the part {twice[0]!r} is declared twice.")
    where = lambda c: f"{c.__module__}.{c.__qualname__}"  # noqa: E731
    out = []
    for d in declarations:
        found = [c for c in classes if vars(c)["declaration"] is d]
        if not found:
            raise ValueError(
                f"{package}: the declared part {d.name!r} has no class (a Part subclass with its declaration; "
                f"is its module imported by {package}?)."
            )
        if len(found) > 1:
            raise ValueError(
                f"{package}: the part {d.name!r} has {len(found)} classes: {', '.join(map(where, found))}."
            )
        out.append(found[0])
    for c in classes:
        inside = c.__module__ == package or c.__module__.startswith(package + ".")
        if inside and not any(vars(c)["declaration"] is d for d in declarations):
            raise ValueError(f"{where(c)} declares the part {c.name!r}, which {package} does not declare (its PARTS).")
    return tuple(out)


__all__ = [
    "DECLARED",
    "SEED",
    "VERDICTS",
    "Claim",
    "Declaration",
    "Kind",
    "Option",
    "Part",
    "Settings",
    "Summary",
    "Verdict",
    "declared",
    "part_classes",
    "resolve",
]
