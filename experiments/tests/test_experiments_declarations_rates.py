"""The rates command's declarations: its parts as its --help shows them, agreeing with the parts."""

from cfm_experiments.registry import BUILTIN


def test_the_declarations_are_the_parts():
    """Names, order, optional, options exactly as the parts run: --help, built from the
    declarations, shows what runs."""
    cmd = BUILTIN["rates"]
    assert cmd.declares == "cfm_experiments.declarations.rates"
    parts = [(p.name, p.optional, p.options) for p in cmd.parts()]
    assert [(d.name, d.optional, d.options) for d in cmd.declared()] == parts
