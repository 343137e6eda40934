"""The registry: commands as named sets of parts, their selection, nothing imported to list them."""

import subprocess
import sys

import pytest

from cfm_experiments.registry import COMMANDS, Command, command


def test_every_command_loads_parts_with_unique_names_and_options_that_agree():
    from cfm_experiments.protocol import Part, declared

    for cmd in COMMANDS.values():
        parts = cmd.parts()
        assert parts and all(isinstance(p, Part) for p in parts), cmd.name
        names = [p.name for p in parts]
        assert len(names) == len(set(names)), cmd.name
        assert cmd.default_parts(), f"{cmd.name} runs nothing by default"
        declared(parts)  # two parts declaring one option declare it identically


def test_selecting_parts():
    import _planted

    cmd = _planted.COMMAND
    assert [p.name for p in cmd.select(None)] == ["planted"]  # the optional part only when named
    assert [p.name for p in cmd.select(["other", "planted"])] == ["planted", "other"]  # the command's order
    with pytest.raises(ValueError, match="--parts: unknown part 'x' of `planted`; choose from planted, other"):
        cmd.select(["x"])
    with pytest.raises(ValueError, match="--parts must name at least one part"):
        cmd.select([])
    with pytest.raises(ValueError, match="unknown command 'nope'"):
        command("nope")
    assert isinstance(command("gradcheck"), Command)


def test_listing_the_commands_imports_no_experiment_and_not_jax():
    code = (
        "import sys; from cfm_experiments.registry import COMMANDS; names = list(COMMANDS)\n"
        "print(sorted(m for m in sys.modules if m == 'jax' or m.startswith('cfm_experiments.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert out.stdout.strip() == "['cfm_experiments.registry']", out.stdout + out.stderr
