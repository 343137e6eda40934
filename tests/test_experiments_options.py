"""experiments.options: the cache folder's resolution, the CPU device count, defaults in help, --out errors."""

import argparse
import os
from pathlib import Path

import pytest

from cfm_experiments import options


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv(options.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert options.default_cache_dir() == tmp_path / "xdg" / "cfm_jax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert options.default_cache_dir() == Path.home() / ".cache" / "cfm_jax"
    monkeypatch.setenv(options.CACHE_ENV, str(tmp_path / "mine"))
    assert options.default_cache_dir() == tmp_path / "mine"


def test_help_formatter_adds_defaults_once():
    parser = argparse.ArgumentParser(formatter_class=options.HelpFormatter)
    parser.add_argument("--a", type=int, default=0, help="base seed")
    parser.add_argument("--b", type=int, default=3, help="three (default: 3)")
    parser.add_argument("--c", action="store_true", help="a flag")
    text = " ".join(parser.format_help().split())
    assert "base seed (default: 0)" in text  # 0 is a default, not "no default"
    assert text.count("(default: 3)") == 1 and "a flag (default" not in text


def test_prepare_out_names_the_option(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="--out"):
        options.prepare_out(tmp_path / "file" / "sub")
    assert options.prepare_out(tmp_path / "a" / "b").is_dir()


def test_apply_global_options_cache(tmp_path):
    import jax

    args = argparse.Namespace(float64=False, no_cache=False, cache_dir=tmp_path / "cache")
    old = jax.config.values["jax_compilation_cache_dir"]
    try:
        options.apply_global_options(args)
        assert jax.config.values["jax_compilation_cache_dir"] == str(tmp_path / "cache")
        assert (tmp_path / "cache").is_dir()
        (tmp_path / "blocker").write_text("")
        with pytest.raises(ValueError, match="--cache-dir"):
            options.apply_global_options(argparse.Namespace(no_cache=False, cache_dir=tmp_path / "blocker" / "c"))
    finally:
        jax.config.update("jax_compilation_cache_dir", old)


def test_cpu_device_count(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert options.cpu_device_count() == (os.cpu_count() or 1)
    assert options.cpu_device_count(3) == 3
    with pytest.raises(ValueError, match="--cpu-devices"):
        options.cpu_device_count(0)
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    assert options.cpu_device_count() is None and options.cpu_device_count(2) == 2


def test_cpu_devices_after_jax_started_is_an_error_only_when_asked_for():
    import jax

    jax.devices()  # started
    options.apply_global_options(argparse.Namespace(no_cache=True))  # the default is left alone
    assert jax.config.values["jax_num_cpu_devices"] in (-1, jax.device_count())
    with pytest.raises(ValueError, match="--cpu-devices"):
        options.apply_global_options(argparse.Namespace(no_cache=True, cpu_devices=3))


def _numeric_options():
    """(subcommand, dest, type) of every option that takes a number, in every subcommand."""
    from cfm_experiments import cli

    out = []
    for name in cli.COMMANDS:
        parser = cli.build_parser([name])
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
        out += [(name, a.dest, a.type) for a in sub._actions if a.type in (int, float)]
    return out


def test_every_numeric_option_has_a_rule():
    """One place checks them all: an option added without a rule would go unchecked."""
    missing = [(name, dest) for name, dest, _ in _numeric_options() if dest not in options.RULES]
    assert not missing


@pytest.mark.parametrize("dest", sorted(options.RULES))
def test_both_sides_of_every_rule(dest):
    kind, low, _ = options.RULES[dest]
    flag = "--" + dest.replace("_", "-")
    if kind == "int":
        options.check_option(dest, int(low))  # the bound itself is allowed
        options.check_option(dest, [int(low), int(low) + 1])
        for bad in (int(low) - 1, [int(low), int(low) - 1], float(low), True):
            with pytest.raises(ValueError, match=flag):
                options.check_option(dest, bad)
    else:
        options.check_option(dest, low + 1e-12)
        for bad in (low, low - 1e-12, float("nan"), float("inf")):
            with pytest.raises(ValueError, match=flag):
                options.check_option(dest, bad)


def test_seed_range():
    options.check_option("seed", 2**62 - 1)
    with pytest.raises(ValueError, match="--seed"):
        options.check_option("seed", 2**62)


def test_validate_options_checks_every_rule_in_the_namespace():
    options.validate_options(argparse.Namespace(seeds=2, ns=[1, 2], eta=0.1, quick=True, out=Path("x"), seed=None))
    with pytest.raises(ValueError, match="--ns"):
        options.validate_options(argparse.Namespace(seeds=2, ns=[4, -1]))
    with pytest.raises(ValueError, match="--realisations"):
        options.validate_options(argparse.Namespace(realisations=-1))


def test_results_mode_and_configuration():
    ns = argparse.Namespace(
        resume=True,
        overwrite=False,
        out=Path("o"),
        seed=3,
        no_progress=True,
        float64=True,
        cache_dir=None,
        no_cache=False,
        cpu_devices=2,
        command="rates",
        _run=print,
        ns=[4, 8],
    )
    assert options.results_mode(ns) == "resume"
    assert options.configuration(ns) == {"seed": 3, "ns": [4, 8]}
    assert options.results_mode(argparse.Namespace(resume=False, overwrite=True)) == "overwrite"
    assert options.results_mode(argparse.Namespace(resume=False, overwrite=False)) == "new"
    with pytest.raises(ValueError, match="--resume and --overwrite"):
        options.results_mode(argparse.Namespace(resume=True, overwrite=True))
