"""Compilation: JAX's persistent compilation cache switched on the way this library's programs need
it, and a recorder of what JAX compiles.

The cache. ``cfm_jax.enable_compilation_cache()`` at the top of a script makes every compiled
program of this library (and of the script) compiled once per machine, not once per process: a
second run of the script reads its programs from the cache folder. JAX's own defaults keep only
programs that took over a second to compile; the sweeps, the examples and the tests compile many
smaller ones, so every program is kept. The public entry points check values without host callbacks
when called at top level (``cfm_jax._validation``), which JAX would otherwise refuse to store.
The folder: ``path``, else ``$CFM_JAX_CACHE_DIR``, else ``$XDG_CACHE_HOME/cfm_jax``, else
``~/.cache/cfm_jax`` (:func:`default_cache_dir`; the ``cfm-jax`` command and the tests use the same).

The recorder. A program JAX builds goes through three stages, each reported through
:mod:`jax.monitoring` on the thread that builds it: the Python function is traced to a jaxpr, the
jaxpr is *lowered* to an MLIR module (one event per program), then the backend turns the module into
an executable (one event per program, timing the whole step). That last step either *compiles* the
module with XLA or, with the persistent cache on, *loads* an executable compiled by an earlier
process: a load reports a cache hit, on the same thread, just before the step's end. So

    lowered = compiled + loaded  (for every program that reaches the backend),

and "compiled once" has two meanings: a test that a second call builds nothing counts programs
*lowered* (a program served by the cache is still traced and lowered), a benchmark of what the cache
saves counts programs *compiled* (a second process on a warm cache compiles none).
:class:`CompileRecorder` counts both, with their seconds, the cache loads and the programs' names.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

#: the environment variable naming the cache folder
CACHE_ENV = "CFM_JAX_CACHE_DIR"


def default_cache_dir() -> Path:
    """``$CFM_JAX_CACHE_DIR``, else ``$XDG_CACHE_HOME/cfm_jax``, else ``~/.cache/cfm_jax``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "cfm_jax"


def enable_compilation_cache(path: str | os.PathLike | None = None) -> Path:
    """Point JAX's persistent compilation cache at ``path`` (default ``$CFM_JAX_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/cfm_jax``, else ``~/.cache/cfm_jax``; created), caching every program however
    quick to compile; returns the folder.

    Called again with another folder, it switches to it: the programs compiled from then on are read
    from and written to the new folder (those this process has already compiled stay in its memory,
    and are written to the new folder only when compiled again by a later process).
    A folder that cannot be made is a ``ValueError`` naming ``path``.
    """
    import jax

    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`path` must be a folder (str or os.PathLike) or None, got {path!r}.")
    folder = default_cache_dir() if path is None else Path(path).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"`path`: cannot make the cache folder {str(folder)!r} ({e.strerror}).") from None
    from jax.experimental.compilation_cache import compilation_cache

    previous = jax.config.jax_compilation_cache_dir  # pyright: ignore[reportAttributeAccessIssue]
    jax.config.update("jax_compilation_cache_dir", str(folder))
    if previous != str(folder):
        # JAX opens its cache at the folder of its first compile and keeps it: another folder is
        # taken only after a reset (the next program compiled reads and writes there)
        compilation_cache.reset_cache()
    # every program, however small or quick to compile: the sweeps are many small ones
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder


# the names of JAX's jax.monitoring events (sent by its dispatch and compiler): the one place the repository
# names them
_TRACED = "/jax/core/compile/jaxpr_trace_duration"
_LOWERED = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_BACKEND = "/jax/core/compile/backend_compile_duration"
_CACHE_HIT = "/jax/compilation_cache/cache_hits"

_lock = threading.Lock()
#: the recorders whose block is running, outermost first: every event is counted by each of them
_active: list[CompileRecorder] = []


#: per thread: a cache hit whose backend step has not ended yet (both are reported on the thread
#: that builds the program, so a hit is never taken for another thread's compilation)
class _Pending(threading.local):
    hit = False


_pending = _Pending()
_installed = [False]


def _on_event(event: str, **_) -> None:
    if event == _CACHE_HIT:
        _pending.hit = True


def _on_duration(event: str, duration_secs: float, **kw: str | int) -> None:
    if event == _TRACED:
        stage = "traced"
    elif event == _LOWERED:
        stage = "lowered"
    elif event == _BACKEND:
        stage = "loaded" if _pending.hit else "compiled"
        _pending.hit = False
    else:
        return
    with _lock:
        recorders = list(_active)
    for rec in recorders:
        rec._count(stage, str(kw.get("fun_name", "")), duration_secs)


def _install() -> None:
    """Register the two listeners, once per process (every recorder shares them: JAX calls each
    listener on every event, so one pair, whatever the number of recorders)."""
    with _lock:
        if _installed[0]:
            return
        from jax import monitoring

        monitoring.register_event_listener(_on_event)
        monitoring.register_event_duration_secs_listener(_on_duration)
        _installed[0] = True


class CompileRecorder:
    """What JAX builds while the block runs: ``with cfm_jax.CompileRecorder() as rec: ...``.

    Counts every program of the process (any thread) while its block runs; recorders nest, each
    counting what runs in its own block. Entered again after its block, a recorder adds to its
    counts. A counter, not a timer: the seconds are JAX's own measurements.

    Arguments:
        on_event: called as ``on_event(stage, name)`` after each program is lowered (``stage =
            "lowered"``), compiled by XLA (``"compiled"``) or loaded from the persistent cache
            (``"loaded"``), on the thread that builds it (e.g. to announce a long compilation).

    Attributes:
        lowered: programs traced and lowered to MLIR, whether then compiled or loaded (what "a
            second call builds nothing" counts); ``lowered_names`` their names, in order
            (``"jit(forward)"``...).
        compiled: programs XLA compiled, not loaded from the persistent cache (what a warm cache
            saves); ``compiled_names`` their names, ``compile_seconds`` their
            total compile time, ``largest_seconds`` and ``largest_name`` the longest one.
        cache_loads: programs loaded from the persistent compilation cache instead of compiled;
            ``load_seconds`` the time those loads took.
        trace_seconds: time spent tracing Python to jaxprs and lowering them to MLIR (before the
            backend; every program, compiled or loaded).
    """

    def __init__(self, on_event: Callable[[str, str], None] | None = None):
        if on_event is not None and not callable(on_event):
            raise TypeError(f"`on_event` must be callable or None, got {on_event!r}.")
        self.on_event = on_event
        self.lowered = 0
        self.lowered_names: list[str] = []
        self.compiled = 0
        self.compiled_names: list[str] = []
        self.compile_seconds = 0.0
        self.largest_seconds = 0.0
        self.largest_name = ""
        self.cache_loads = 0
        self.load_seconds = 0.0
        self.trace_seconds = 0.0

    def __enter__(self) -> CompileRecorder:
        _install()
        with _lock:
            if any(rec is self for rec in _active):
                raise RuntimeError("this CompileRecorder is already recording: use a new one to nest.")
            _active.append(self)
        return self

    def __exit__(self, *exc) -> None:
        with _lock:
            del _active[next(i for i, rec in enumerate(_active) if rec is self)]

    def _count(self, stage: str, name: str, seconds: float) -> None:
        with _lock:
            if stage == "traced":
                self.trace_seconds += seconds
                return
            if stage == "lowered":
                self.trace_seconds += seconds
                self.lowered += 1
                self.lowered_names.append(name)
            elif stage == "loaded":
                self.cache_loads += 1
                self.load_seconds += seconds
            else:
                self.compiled += 1
                self.compiled_names.append(name)
                self.compile_seconds += seconds
                if seconds > self.largest_seconds:
                    self.largest_seconds, self.largest_name = seconds, name
        if self.on_event is not None:
            self.on_event(stage, name)

    def __repr__(self) -> str:
        return (
            f"CompileRecorder(lowered={self.lowered}, compiled={self.compiled}, "
            f"compile_seconds={self.compile_seconds:.3g}, cache_loads={self.cache_loads})"
        )


__all__ = ["CACHE_ENV", "CompileRecorder", "default_cache_dir", "enable_compilation_cache"]
