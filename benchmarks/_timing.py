"""Warm timings shared by the benchmarks: one untimed call (compilation), then timed calls."""

from __future__ import annotations

import statistics
import time

import jax


def warm_times(fn, *args, repeats: int = 3) -> list[float]:
    """Seconds of ``repeats`` calls ``fn(*args)`` (results blocked on) after one warm-up call."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return times


def warm_median(fn, *args, repeats: int = 3) -> float:
    """Median of :func:`warm_times`."""
    return statistics.median(warm_times(fn, *args, repeats=repeats))
