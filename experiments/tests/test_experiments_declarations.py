"""The declarations (``cfm_experiments/declarations/``), one module per built-in command, each the
one its command reads: what ``--help`` shows is what runs. One test per command, the same for all."""

import importlib
import pkgutil

import pytest

import cfm_experiments
from cfm_experiments import protocol
from cfm_experiments.protocol import Declaration, Part
from cfm_experiments.registry import BUILTIN


def test_every_builtin_command_declares_its_parts_in_its_own_module():
    assert {cmd.declares for cmd in BUILTIN.values()} == {f"cfm_experiments.declarations.{n}" for n in BUILTIN}


@pytest.mark.parametrize("name", list(BUILTIN))
def test_the_declarations_are_the_parts(name):
    """Each declared part, in the declared order, is one instance of the one class naming that very
    declaration; names, options and optional flags are the declaration's (read, not restated)."""
    cmd = BUILTIN[name]
    declared = cmd.declared()
    assert declared and all(isinstance(d, Declaration) for d in declared)
    parts = cmd.parts()
    assert [type(p).declaration for p in parts] == list(declared)
    assert all(type(p).declaration is d for p, d in zip(parts, declared, strict=True))
    assert [(p.name, p.options, p.optional) for p in parts] == [(d.name, d.options, d.optional) for d in declared]
    assert all(isinstance(p, Part) and p.title for p in parts)


def _part_classes() -> list[type[Part]]:
    """Every class of the package that declares a part (every module imported)."""
    for info in pkgutil.walk_packages(cfm_experiments.__path__, "cfm_experiments."):
        if info.name not in ("cfm_experiments.__main__",):
            importlib.import_module(info.name)
    return [c for c in protocol._declaring_classes() if c.__module__.startswith("cfm_experiments.")]


def test_every_part_class_of_the_package_is_a_declared_part_of_a_command():
    """The other way round: no class of the package declares a part that no command lists."""
    run = {type(p) for cmd in BUILTIN.values() for p in cmd.parts()}
    classes = _part_classes()
    assert len(classes) == len(set(classes)) >= 20
    assert [c.__qualname__ for c in classes if c not in run] == []


def test_the_demo_takes_its_declared_options():
    from cfm_experiments import demo
    from cfm_experiments.declarations import demo as declared

    assert demo.OPTIONS is declared.OPTIONS
