"""The compiler as a command shows it: the progress bar's notice of a long compilation and the
compile figures of a run's summary."""

import os
import time

import jax
import jax.numpy as jnp
import numpy as np


def test_the_summary_is_the_recorders_compiled_programs():
    """A run's summary.json records the programs XLA compiled (not those lowered or loaded), under
    the names bench_compile.py reads."""
    from jax import monitoring

    import cfm_jax
    from cfm_experiments.compiles import summary
    from cfm_jax._compilation import _BACKEND, _CACHE_HIT, _LOWERED

    with cfm_jax.CompileRecorder() as rec:  # three programs as JAX reports them: two compiled, one loaded
        for name, seconds, loaded in (("first", 0.25, False), ("longest", 2.0, False), ("cached", 4.0, True)):
            monitoring.record_event_duration_secs(_LOWERED, 0.5, fun_name=name)
            if loaded:
                monitoring.record_event(_CACHE_HIT)
            monitoring.record_event_duration_secs(_BACKEND, seconds, fun_name=name)
    assert summary(rec) == {
        "programs": 2,
        "seconds": 2.25,
        "largest": 2.0,
        "largest_name": "longest",
        "cache_loads": 1,
        "load_seconds": 4.0,
        "trace_seconds": 1.5,
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


def test_the_compiling_notice_counts_the_programs_ready_of_those_expected():
    """While XLA compiles, the bar counts the programs ready so far (compiled, or loaded from the
    cache) of about as many as the benchmarked run built, and the seconds XLA took for them; without
    a count it says how many are ready; without a recorder, only that it compiles."""
    import cfm_jax
    from cfm_experiments.compiles import compiling_notice

    rec = cfm_jax.CompileRecorder()  # a fake: its counts set by hand, nothing recorded
    rec.compiled, rec.cache_loads, rec.compile_seconds = 12, 3, 31.4
    text = compiling_notice(rec, 42)
    assert text.startswith("compiling: 15 of about 42 programs ready, 31 s so far ("), text
    assert "first run only; cached in" in text or "not cached: --no-cache" in text
    assert compiling_notice(rec, None).startswith("compiling: 15 programs ready, 31 s so far (")
    assert compiling_notice().startswith("compiling (") and "programs" not in compiling_notice()


def test_the_progress_bar_counts_programs_while_xla_compiles(monkeypatch, tmp_path):
    """A sweep with a progress bar, told how many programs to expect, shows the count in its line
    while a program compiles (the watcher's recorder is the one counted). The bar is a stand-in that
    keeps its texts: tqdm's own may be disabled by the environment of an earlier test."""
    import tqdm.auto

    from cfm_experiments import compiles
    from cfm_experiments.results import Sweep

    texts: list[str] = []

    class Bar:
        def __init__(self, *args, **kwargs):
            pass

        def set_postfix_str(self, text, refresh=True):
            texts.append(text)

        def update(self, n=1):
            pass

        def close(self):
            pass

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    monkeypatch.setattr(compiles, "NOTICE_S", 0.0)
    salt = float(os.getpid() % 991) + 1e-9 * time.time_ns() % 1.0  # a program no cache holds

    def row(config):
        def body(x):
            for k in range(300):  # unrolled: a program that takes XLA a noticeable time
                x = jnp.cos(x * (1.0 + k * 1e-4)) + salt
            return x

        return {"y": float(jax.jit(body)(np.ones(5))[0])}

    Sweep(tmp_path / "rows.jsonl", resume=False, progress=True).run(
        [{"n": 1}], row, desc="t", programs=7, describe=lambda c: "row"
    )
    assert any(t.startswith("row: compiling: 0 of about 7 programs ready, 0 s so far (") for t in texts), texts


def test_the_expected_programs_are_the_benchmarked_runs_only(tmp_path):
    """The bar's count is the benchmark's for the command's default parts with its default or --quick
    settings (any seed); another choice of options or parts has none."""
    from cfm_experiments import measured
    from cfm_experiments.driver import expected_programs
    from cfm_experiments.protocol import resolve
    from cfm_experiments.registry import command

    cmd = command("rates")
    parts = cmd.default_parts()
    quick = measured.expected_programs("rates", "quick")
    assert quick and measured.expected_programs("rates", "full")
    assert expected_programs(cmd, parts, resolve(parts, quick=True)) == quick
    assert expected_programs(cmd, parts, resolve(parts, quick=True, seed=5)) == quick
    assert expected_programs(cmd, parts, resolve(parts)) == measured.expected_programs("rates", "full")
    assert expected_programs(cmd, parts, resolve(parts, quick=True, dims=[2])) is None
    both = cmd.select(["exact", "sample"])
    assert expected_programs(cmd, both, resolve(both, quick=True)) is None
