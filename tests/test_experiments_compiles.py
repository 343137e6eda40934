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
