"""experiments.options: the cache folder's resolution, the CPU device count, defaults in help, the rules
every option of every command follows (distinct list values among them)."""

import argparse
import os
import re

import pytest
from hypothesis import given, settings, strategies as st

from cfm_experiments import options


def test_the_cache_folder_is_the_librarys(monkeypatch, tmp_path):
    """--cache-dir's help spells out cfm_jax.default_cache_dir's rule (help imports no cfm_jax), and
    with no --cache-dir the cache is the library's folder."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    import cfm_jax

    parser = argparse.ArgumentParser()
    options.add_global_arguments(parser)
    assert f"(default: ${cfm_jax.CACHE_ENV}, else $XDG_CACHE_HOME/cfm_jax" in " ".join(parser.format_help().split())
    monkeypatch.setenv(cfm_jax.CACHE_ENV, str(tmp_path / "mine"))
    old = jax.config.values["jax_compilation_cache_dir"]
    try:
        options.apply_global_options(argparse.Namespace(no_cache=False))
        assert jax.config.values["jax_compilation_cache_dir"] == str(tmp_path / "mine")
    finally:
        jax.config.update("jax_compilation_cache_dir", old)
        compilation_cache.reset_cache()  # JAX reopens the suite's own folder at its next compile


def test_help_formatter_adds_defaults_once():
    parser = argparse.ArgumentParser(formatter_class=options.HelpFormatter)
    parser.add_argument("--a", type=int, default=0, help="base seed")
    parser.add_argument("--b", type=int, default=3, help="three (default: 3)")
    parser.add_argument("--c", action="store_true", help="a flag")
    text = " ".join(parser.format_help().split())
    assert "base seed (default: 0)" in text  # 0 is a default, not "no default"
    assert text.count("(default: 3)") == 1 and "a flag (default" not in text


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
    """(command, declared Option) of every option that takes a number, in every command."""
    from cfm_experiments.protocol import declared
    from cfm_experiments.registry import COMMANDS

    return [
        (name, o) for name, cmd in COMMANDS.items() for o in declared(cmd.parts()).values() if o.kind in ("int", "real")
    ]


def test_every_numeric_option_refuses_what_no_rule_allows():
    """Whatever an option's bounds, it refuses a bool, a non-finite number and (an integer option) a
    float, each with an error naming its flag: no numeric option goes unchecked."""
    found = _numeric_options()
    assert len(found) > 20
    for name, o in found:
        bad = [True, float("nan"), float("inf")] + ([1.5] if o.kind == "int" else [])
        for v in bad:
            with pytest.raises(ValueError, match=o.flag):
                o.check([v] if o.many else v)


def test_seeds_are_bounded_by_what_a_prng_key_holds():
    """--seed takes 0 <= s < 2**62 (offsets are added to it) in every command."""
    for name, o in _numeric_options():
        if o.name == "seed":
            o.check(0)
            o.check(2**62 - 1)
            for bad in (-1, 2**62):
                with pytest.raises(ValueError, match="--seed"):
                    o.check(bad)


def _list_options():
    """Every many-valued option of every command, from the declarations (no experiment imported)."""
    from cfm_experiments.protocol import declared
    from cfm_experiments.registry import COMMANDS

    found = {o.name: o for cmd in COMMANDS.values() for o in declared(cmd.declared()).values() if o.many}
    return [found[k] for k in sorted(found)]


LIST_OPTIONS = _list_options()


@st.composite
def _valid_lists(draw, min_size=0):
    """(option, distinct values its rule accepts), for any list option of any command."""
    o = draw(st.sampled_from(LIST_OPTIONS))
    if o.kind == "int":
        low = int(o.low) if o.low is not None else -(10**6)
        high = int(o.high) - 1 if o.high is not None else low + 10**6
        one = st.integers(low, high)
    else:
        above, below = o.low is not None, o.high is not None  # the bounds are strict
        one = st.floats(o.low, o.high, allow_nan=False, allow_infinity=False, exclude_min=above, exclude_max=below)
    size = max(o.min_count, min_size)
    return o, draw(st.lists(one, min_size=size, max_size=size + 6, unique=True))


def test_the_list_options_are_found():
    names = {o.name for o in LIST_OPTIONS}
    assert {"dims", "ogd_dims", "tail_ns", "rho_ns", "curvature_ratios"} <= names and len(names) > 20


@settings(max_examples=300, deadline=None)
@given(_valid_lists())
def test_distinct_valid_values_are_accepted(case):
    o, values = case
    assert list(o.check(values)) == values


@settings(max_examples=300, deadline=None)
@given(_valid_lists(min_size=1), st.data())
def test_a_repeated_value_is_refused_naming_the_option(case, data):
    o, values = case
    again = data.draw(st.sampled_from(values))
    at = data.draw(st.integers(0, len(values)))
    with pytest.raises(ValueError, match=rf"^{o.flag} must list distinct values .*{re.escape(repr(again))} repeats"):
        o.check([*values[:at], again, *values[at:]])


def test_distinct_is_the_rule():
    assert options.distinct("--ns", [3, 1, 2]) == (3, 1, 2) and options.distinct("--ns", []) == ()
    with pytest.raises(ValueError, match=r"--ns must list distinct values .*: 1 repeats in \[1, 2, 1\]"):
        options.distinct("--ns", iter([1, 2, 1]))
    with pytest.raises(ValueError, match="0.0 repeats"):  # -0.0 == 0.0: the same ridge, the same configuration
        options.distinct("--curvature-ratios", [0.0, -0.0])
