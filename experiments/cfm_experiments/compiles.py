"""The compiler as a command shows it: a progress bar's notice while XLA compiles, and the compile
figures of a run's ``summary.json``.

Both are built on :class:`cfm_jax.CompileRecorder`: :func:`watching` announces a program that XLA
has been compiling for :data:`NOTICE_S` seconds (a program loaded from the persistent cache is ready
well before), :func:`compiling_notice` is the bar's text then (the programs ready so far, of those
the command's benchmarked run built, and their seconds), :func:`summary` is what a run records of
the programs it compiled.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from cfm_jax import CompileRecorder

#: a compilation running longer than this is announced to the watcher (a cache read takes far less)
NOTICE_S = 2.0


@contextlib.contextmanager
def watching(callback: Callable[[bool], None]) -> Iterator[CompileRecorder]:
    """Within the block, ``callback(True)`` when XLA has been compiling one program for
    :data:`NOTICE_S` seconds and ``callback(False)`` when it is done (for a progress bar's notice;
    a program read from the persistent cache is not announced). The callback may run on a timer
    thread. Yields the block's :class:`cfm_jax.CompileRecorder` (what :func:`compiling_notice` counts)."""
    lock = threading.Lock()  # the callbacks run under it: True and False never cross
    timer: list[threading.Timer | None] = [None]  # the running program's, from its lowering to its end
    announced = [False]

    def announce(mine: threading.Timer) -> None:
        with lock:
            if timer[0] is mine:  # not already over (a cancelled timer may still fire)
                announced[0] = True
                callback(True)

    def over() -> None:
        with lock:
            if timer[0] is not None:
                timer[0].cancel()
                timer[0] = None
            if announced[0]:
                announced[0] = False
                callback(False)

    def on_event(stage: str, name: str) -> None:
        if stage != "lowered":  # compiled or loaded: the program is ready
            over()
            return
        with lock:  # lowered: XLA or the cache is next
            if timer[0] is None:
                t = threading.Timer(NOTICE_S, lambda: announce(t))
                t.daemon = True
                timer[0] = t
                t.start()

    try:
        with CompileRecorder(on_event=on_event) as rec:
            yield rec
    finally:
        over()


def compiling_notice(rec: CompileRecorder | None = None, expected: int | None = None) -> str:
    """What a progress bar says while XLA compiles: the programs ready so far (``rec``'s: compiled, or
    loaded from the cache), of about ``expected`` (the benchmark's count for this command, None when
    unknown), and the seconds XLA took for them; first run only, and where the programs are cached."""
    import jax

    where = jax.config.values.get("jax_compilation_cache_dir")
    cache = f"first run only; cached in {where}" if where else "not cached: --no-cache"
    if rec is None:
        return f"compiling ({cache})"
    ready = rec.compiled + rec.cache_loads
    of = f" of about {expected}" if expected else ""
    return f"compiling: {ready}{of} programs ready, {rec.compile_seconds:.0f} s so far ({cache})"


def summary(rec: CompileRecorder) -> dict:
    """The ``compile`` entry of a run's ``summary.json``: ``programs`` XLA compiled (not loaded from
    the cache) and their ``seconds``, the ``largest`` one and its ``largest_name``, the
    ``cache_loads`` and their ``load_seconds``, and the ``trace_seconds`` before the backend."""
    return {
        "programs": rec.compiled,
        "seconds": rec.compile_seconds,
        "largest": rec.largest_seconds,
        "largest_name": rec.largest_name,
        "cache_loads": rec.cache_loads,
        "load_seconds": rec.load_seconds,
        "trace_seconds": rec.trace_seconds,
    }


__all__ = ["NOTICE_S", "compiling_notice", "summary", "watching"]
