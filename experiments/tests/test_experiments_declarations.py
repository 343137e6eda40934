"""The declarations package: one module per built-in command, each the one its command reads."""

from cfm_experiments.registry import BUILTIN


def test_every_builtin_command_declares_its_parts_in_its_own_module():
    assert {cmd.declares for cmd in BUILTIN.values()} == {f"cfm_experiments.declarations.{n}" for n in BUILTIN}
