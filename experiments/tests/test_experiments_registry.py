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


def _entry_points(monkeypatch, *eps):
    """``importlib.metadata`` reports ``eps`` in the commands' group; the registries start afresh."""
    import importlib.metadata

    from cfm_experiments import cli, registry

    found = [importlib.metadata.EntryPoint(name, value, registry.GROUP) for name, value in eps]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: found if group == registry.GROUP else [])
    fresh = registry._Commands(registry.BUILTIN)
    for module in (registry, cli):
        monkeypatch.setattr(module, "COMMANDS", fresh)
    return fresh


def test_an_installed_package_registers_its_command_by_entry_point(monkeypatch, tmp_path, capsys):
    """A command from another package's entry point is listed, has its help and runs, with no line
    added to the registry."""
    from cfm_experiments import cli

    commands = _entry_points(monkeypatch, ("planted", "_planted:COMMAND"))
    assert list(commands)[: len(COMMANDS)] == list(COMMANDS) and commands["planted"].module == "_planted"
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "planted" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["planted", "--help"])
    text = capsys.readouterr().out
    assert "--sizes" in text and "--parts" in text
    assert cli.main(["planted", "--quick", "--no-progress", "--no-cache", "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "planted.png").exists()


@pytest.mark.parametrize(
    "value, match",
    [
        ("_planted:PARTS", "must name a Command called 'planted'"),
        ("cfm_experiments.registry:BUILTIN", "must name a Command"),
        ("no_such_module:X", "does not load: ModuleNotFoundError"),
    ],
)
def test_a_bad_entry_point_is_named(monkeypatch, value, match, capsys):
    """A broken entry point names itself in one line on stderr and is skipped: every other command, the
    built-in ones and another package's, still works; the broken one is an unknown command (exit 2)."""
    from cfm_experiments import cli

    _entry_points(monkeypatch, ("broken", value), ("planted", "_planted:COMMAND"))
    match = match.replace("'planted'", "'broken'")
    for argv in (["rates", "--help"], ["planted", "--help"], ["--help"]):
        with pytest.raises(SystemExit) as exit:
            cli.main(argv)
        assert exit.value.code == 0, argv
        out = capsys.readouterr()
        (line,) = out.err.strip().splitlines()
        assert f"entry point broken = {value} (cfm_experiments.commands)" in line and match in line, line
        assert line.startswith("cfm-jax: warning: ") and line.endswith("(its command is skipped)")
        assert out.out.startswith("usage: cfm-jax")
    with pytest.raises(SystemExit) as exit:
        cli.main(["broken", "--help"])
    assert exit.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "entry point broken" in err[0] and "invalid choice: 'broken'" in err[1]


def test_the_librarys_old_group_is_still_read_with_a_warning(monkeypatch):
    """A command registered under the group's old name (``cfm_jax.commands``, from when the
    experiments shipped in the library) still loads, with a FutureWarning naming the new group."""
    import importlib.metadata

    from cfm_experiments import registry

    old = [importlib.metadata.EntryPoint("planted", "_planted:COMMAND", registry.LEGACY_GROUP)]
    monkeypatch.setattr(
        importlib.metadata, "entry_points", lambda group=None: old if group == registry.LEGACY_GROUP else []
    )
    with pytest.warns(FutureWarning, match="register it under 'cfm_experiments.commands'"):
        found = registry.installed()
    assert list(found) == ["planted"] and found["planted"].module == "_planted"


def test_installed_raises_for_a_bad_entry_point_unless_it_may_skip_it(monkeypatch):
    from cfm_experiments import registry

    _entry_points(monkeypatch, ("broken", "no_such_module:X"), ("planted", "_planted:COMMAND"))
    with pytest.raises(ValueError, match="entry point broken = no_such_module:X .* does not load"):
        registry.installed()
    problems: list[str] = []
    assert list(registry.installed(problems)) == ["planted"]
    assert len(problems) == 1 and "\n" not in problems[0] and "ModuleNotFoundError" in problems[0]


def test_an_entry_point_cannot_replace_a_builtin_command(monkeypatch):
    import types

    from cfm_experiments import registry

    fake = types.ModuleType("fake_rates")
    fake.COMMAND = Command("rates", "fake_rates", "another rates")  # pyright: ignore[reportAttributeAccessIssue]
    monkeypatch.setitem(sys.modules, "fake_rates", fake)
    _entry_points(monkeypatch, ("rates", "fake_rates:COMMAND"))
    with pytest.raises(ValueError, match="entry point rates = fake_rates:COMMAND .*the command 'rates' exists already"):
        registry.installed()


def test_the_docs_register_a_command_by_its_entry_point():
    """docs/experiments.md registers its worked example the way a package does: an entry point in
    the command group, naming a Command."""
    import re
    import tomllib
    from pathlib import Path

    from cfm_experiments.registry import GROUP

    text = (Path(__file__).parents[2] / "docs" / "experiments.md").read_text()
    (toml,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    eps = tomllib.loads(toml)["project"]["entry-points"][GROUP]
    assert set(eps) == {"gap"}
    assert "COMMANDS[" not in text and "registry.py`:" not in text  # no line pasted into the registry
