"""JAX's persistent compilation cache, switched on the way this library's programs need it.

``cfm_jax.enable_compilation_cache()`` at the top of a script makes every compiled program of this
library (and of the script) compiled once per machine, not once per process: a second run of the
script reads its programs from the cache folder. JAX's own defaults keep only programs that took
over a second to compile; the sweeps, the examples and the tests compile many smaller ones, so every
program is kept. The public entry points check values without host callbacks when called at top
level (``cfm_jax._validation``), which JAX would otherwise refuse to store.

The folder: ``path``, else ``$CFM_JAX_CACHE_DIR``, else ``$XDG_CACHE_HOME/cfm_jax``, else
``~/.cache/cfm_jax`` (the ``cfm-jax`` command and the tests use the same).
"""

from __future__ import annotations

import os
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


__all__ = ["CACHE_ENV", "default_cache_dir", "enable_compilation_cache"]
