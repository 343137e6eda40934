"""Compile accounting counts programs, not seconds: a new shape is a new program, a repeat is not."""

import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from cfm_experiments.compiles import recording


def test_counts_one_program_per_shape():
    @jax.jit
    def f(x):
        return jnp.sin(x) * 2.0 + 0.123456  # a body no other test compiles

    with recording() as outer:
        with recording() as stats:
            f(np.ones(3)).block_until_ready()  # NumPy inputs: no eager JAX op compiles a program of its own
            f(np.full(3, 2.0)).block_until_ready()  # same shape: no new program
        assert stats.programs + stats.cache_loads == 1
        f(np.ones(5)).block_until_ready()  # a new shape: a new program
    assert outer.programs + outer.cache_loads == 2  # nested recordings both count
    assert stats.seconds >= 0 and stats.trace_seconds >= 0
    assert stats.largest <= stats.seconds + 1e-12
    assert len(stats.names) == stats.programs


def test_nothing_counted_outside_a_recording():
    with recording() as stats:
        pass
    jax.jit(lambda x: x + 0.654321)(np.ones(2)).block_until_ready()
    assert stats.programs == 0 and stats.cache_loads == 0
    assert set(stats.as_dict()) == {
        "programs",
        "seconds",
        "largest",
        "largest_name",
        "cache_loads",
        "load_seconds",
        "trace_seconds",
    }


def test_a_long_compilation_is_announced_and_its_end_too(monkeypatch):
    """A watcher hears True once XLA has compiled for NOTICE_S seconds and False when the program is
    ready; with no compile (a program already in memory) it hears nothing."""
    from cfm_experiments import compiles

    monkeypatch.setattr(compiles, "NOTICE_S", 0.0)
    heard: list[bool] = []
    salt = float(os.getpid() % 997) + 1e-9 * time.time_ns() % 1.0  # a program no cache holds

    def body(x):
        for k in range(300):  # unrolled: a program that takes XLA a noticeable time
            x = jnp.sin(x * (1.0 + k * 1e-4)) + salt
        return x

    f = jax.jit(body)
    with compiles.watching(heard.append):
        f(np.ones(7)).block_until_ready()
        assert heard == [True, False]
        f(np.ones(7)).block_until_ready()  # in memory: nothing to compile
    assert heard == [True, False]
    assert "compiling (first run only" in compiles.compiling_notice() or "not cached" in compiles.compiling_notice()


def test_the_largest_compilation_is_recorded_with_its_name():
    """Three compilations reported as JAX reports them: the record keeps the longest one and its
    function, whatever the order they come in."""
    from jax import monitoring

    from cfm_experiments.compiles import _BACKEND

    with recording() as stats:
        for name, seconds in (("first", 0.25), ("longest", 2.0), ("last", 1.0)):
            monitoring.record_event_duration_secs(_BACKEND, seconds, fun_name=name)
    assert stats.programs == 3 and stats.names == ["first", "longest", "last"]
    assert stats.largest == 2.0 and stats.largest_name == "longest"
    assert stats.as_dict()["largest_name"] == "longest"


def test_the_command_lines_cache_set_up_caches_every_program(tmp_path):
    """After the CLI's set-up of its global options the persistent cache is in ``--cache-dir`` and
    stores every program: JAX's defaults (a minimum compile time, a minimum entry size) would leave
    the sweeps' many small programs out of it."""
    import argparse

    from cfm_experiments.options import apply_global_options

    names = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")
    names += ("jax_persistent_cache_min_entry_size_bytes",)
    before = {k: jax.config.values[k] for k in names}
    try:
        # other values than the set-up's (JAX's default minimum compile time is 1 s), so it must set them
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        args = argparse.Namespace(cache_dir=str(tmp_path / "cache"), no_cache=False, float64=False, cpu_devices=None)
        apply_global_options(args)
        assert jax.config.values["jax_compilation_cache_dir"] == str(tmp_path / "cache")
        assert jax.config.values["jax_persistent_cache_min_compile_time_secs"] == 0
        assert jax.config.values["jax_persistent_cache_min_entry_size_bytes"] == 0
    finally:
        for k, v in before.items():
            jax.config.update(k, v)
