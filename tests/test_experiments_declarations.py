"""The declarations: each built-in command's parts as its --help shows them, agreeing with the parts."""

import pytest

from cfm_experiments.registry import BUILTIN


@pytest.mark.parametrize("name", list(BUILTIN))
def test_the_declarations_are_the_parts(name):
    """Every built-in command declares its parts (names, order, optional, options) exactly as they
    are: its --help, built from the declarations, shows what runs."""
    cmd = BUILTIN[name]
    assert cmd.declares.startswith("cfm_experiments.declarations.")
    parts = [(p.name, p.optional, p.options) for p in cmd.parts()]
    assert [(d.name, d.optional, d.options) for d in cmd.declared()] == parts


def test_the_demo_takes_its_declared_options():
    from cfm_experiments import demo
    from cfm_experiments.declarations import demo as declared

    assert demo.OPTIONS is declared.OPTIONS
