"""Compile accounting: how many XLA programs a run compiles, and how long the compiler takes.

JAX reports every backend compilation through :mod:`jax.monitoring` (the event behind
``JAX_LOG_COMPILES=1``'s "Finished XLA compilation of … in … sec"), and a program loaded from the
persistent compilation cache as a cache hit just before it. :func:`recording` counts both while
its block runs, with the time spent tracing and lowering to MLIR, so a command can say what its
first run waited for and a test can count the programs a sweep builds (a counter, not a timer).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator

from jax import monitoring

_BACKEND = "/jax/core/compile/backend_compile_duration"
_TRACING = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration")
_HIT = "/jax/compilation_cache/cache_hits"


@dataclasses.dataclass(eq=False)  # each recording is its own (removed by identity)
class CompileStats:
    """What the compiler did while :func:`recording` ran.

    Attributes:
        programs: programs XLA compiled.
        seconds: their total compile time.
        largest: the longest single compilation, seconds; ``largest_name`` its function.
        cache_loads: programs loaded from the persistent compilation cache instead.
        load_seconds: the time those loads took.
        trace_seconds: time spent tracing Python and lowering to MLIR (before XLA; every program,
            cached or not).
        names: the name of every compiled program, in order.
    """

    programs: int = 0
    seconds: float = 0.0
    largest: float = 0.0
    largest_name: str = ""
    cache_loads: int = 0
    load_seconds: float = 0.0
    trace_seconds: float = 0.0
    names: list[str] = dataclasses.field(default_factory=list)

    def as_dict(self) -> dict:
        """JSON-able, without the names."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "names"}


_lock = threading.Lock()
_active: list[CompileStats] = []
_LOWERED = "/jax/core/compile/jaxpr_to_mlir_module_duration"
#: a compilation running longer than this is announced to the watchers (a cache read takes far less)
NOTICE_S = 2.0
_watchers: list[Callable[[bool], None]] = []
_timer: list[threading.Timer | None] = [None]
_announced = [False]
_hits = [0]  # cache hits whose backend-compile event has not arrived yet
_installed = [False]


def _on_event(event: str, **_) -> None:
    if event == _HIT:
        with _lock:
            _hits[0] += 1
        _compile_over()


def _announce() -> None:
    with _lock:
        _announced[0] = True
        watchers = list(_watchers)
    for w in watchers:
        w(True)


def _compile_over() -> None:
    """The program being compiled (or read from the cache) is ready: cancel or end the notice."""
    with _lock:
        timer, _timer[0] = _timer[0], None
        was, _announced[0] = _announced[0], False
        watchers = list(_watchers)
    if timer is not None:
        timer.cancel()
    if was:
        for w in watchers:
            w(False)


def _on_duration(event: str, duration_secs: float, **kw: str | int) -> None:
    with _lock:
        if event == _BACKEND:
            hit = _hits[0] > 0
            _hits[0] -= hit
            for stats in _active:
                if hit:
                    stats.cache_loads += 1
                    stats.load_seconds += duration_secs
                else:
                    stats.programs += 1
                    stats.seconds += duration_secs
                    stats.names.append(str(kw.get("fun_name", "")))
                    if duration_secs > stats.largest:
                        stats.largest, stats.largest_name = duration_secs, str(kw.get("fun_name", ""))
        elif event in _TRACING:
            for stats in _active:
                stats.trace_seconds += duration_secs
    if event == _BACKEND:
        _compile_over()
    elif event == _LOWERED:  # next: the cache read, then XLA unless it hit
        with _lock:
            if _watchers and _timer[0] is None:
                _timer[0] = threading.Timer(NOTICE_S, _announce)
                _timer[0].daemon = True
                _timer[0].start()


def _install() -> None:
    with _lock:
        if _installed[0]:
            return
        monitoring.register_event_listener(_on_event)
        monitoring.register_event_duration_secs_listener(_on_duration)
        _installed[0] = True


@contextlib.contextmanager
def recording() -> Iterator[CompileStats]:
    """Count the compilations of the block: ``with recording() as stats: ...`` (nestable)."""
    _install()
    stats = CompileStats()
    with _lock:
        _active.append(stats)
    try:
        yield stats
    finally:
        with _lock:
            _active.remove(stats)


@contextlib.contextmanager
def watching(callback: Callable[[bool], None]) -> Iterator[None]:
    """Within the block, ``callback(True)`` when XLA has been compiling one program for
    :data:`NOTICE_S` seconds and ``callback(False)`` when it is done (for a progress bar's notice;
    a program read from the persistent cache is not announced). The callback may run on a timer
    thread."""
    _install()
    with _lock:
        _watchers.append(callback)
    try:
        yield
    finally:
        with _lock:
            _watchers.remove(callback)
        if not _watchers:
            _compile_over()


def compiling_notice() -> str:
    """What a progress bar says while XLA compiles: first run only, and where the programs are cached."""
    import jax

    where = jax.config.values.get("jax_compilation_cache_dir")
    return f"compiling (first run only; cached in {where})" if where else "compiling (not cached: --no-cache)"


__all__ = ["NOTICE_S", "CompileStats", "compiling_notice", "recording", "watching"]
