"""A resumable sweep runner shared by every experiment.

Each finished configuration is appended as one JSON line to ``rows.jsonl`` and flushed to disk
(``fsync``) before the next one starts, so an interrupted sweep (Ctrl-C, a killed job) loses at
most the configuration in flight. Resuming skips the configurations whose key is already on
disk, so the final file holds each configuration exactly once, in the order of the sweep.

Interrupts (:func:`exit_on_signals`): SIGINT and SIGTERM end the process at once with exit code
128 + signal (130, 143), even while the main thread is inside a long XLA compilation or
execution, which a Python-level ``KeyboardInterrupt`` only reaches after it returns. The C-level
signal handler writes the signal number to a pipe (``signal.set_wakeup_fd``); a watcher thread
reads it, waits for a row being written to reach the disk (:data:`WRITE_LOCK`), says so on
stderr and calls ``os._exit``. Skipping interpreter finalisation is deliberate: tearing down the
interpreter while XLA's own threads still run a computation is what crashed with SIGSEGV.
Finished rows are already on disk, so nothing is lost but the row in flight.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

#: held while a row is appended and flushed, so an interrupt never leaves half a row behind.
WRITE_LOCK = threading.Lock()


def config_key(config: Mapping[str, Any]) -> str:
    """Canonical, order-independent string identifying a configuration."""
    return json.dumps(_jsonable(dict(config)), sort_keys=True)


def _jsonable(x):
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    jax = sys.modules.get("jax")  # arrays of JAX exist only once it is imported (this module does not import it)
    if isinstance(x, np.ndarray) or (jax is not None and isinstance(x, jax.Array)):
        return _jsonable(np.asarray(x).tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None  # JSON has no NaN/inf: a missing number is null
    if isinstance(x, np.generic):
        return _jsonable(x.item())
    return x


def read_rows(path: str | os.PathLike) -> list[dict]:
    """All complete rows of a JSON-lines file (a torn last line from a crash is ignored)."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    with path.open() as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return rows


class Sweep:
    """Run ``fn(config) -> dict`` over configurations, appending each result to a JSONL file.

    Args:
        path: the ``.jsonl`` file (its folder is created).
        resume: keep rows already on disk and skip their configurations; otherwise start over.
        progress: show a tqdm progress bar.

    Every row is ``{"config": config, "key": key, **result}``.
    """

    def __init__(self, path: str | os.PathLike, *, resume: bool = True, progress: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not resume and self.path.exists():
            self.path.unlink()
        self._repair()
        self.progress = progress

    def _repair(self):
        """Drop a torn trailing line left by a crash, so appends stay valid JSONL."""
        if not self.path.exists():
            return
        rows = read_rows(self.path)
        text = "".join(json.dumps(r) + "\n" for r in rows)
        if text != self.path.read_text():
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(text)
            os.replace(tmp, self.path)

    @property
    def rows(self) -> list[dict]:
        return read_rows(self.path)

    def done_keys(self) -> set[str]:
        return {r["key"] for r in self.rows if "key" in r}

    def run(
        self,
        configs: Iterable[Mapping[str, Any]],
        fn: Callable[[Mapping[str, Any]], Mapping[str, Any]],
        *,
        desc: str = "sweep",
        stop_after: int | None = None,
    ) -> list[dict]:
        """Run the pending configurations; return all rows (old and new) in sweep order.

        ``stop_after`` runs at most that many new configurations (to test resumption).
        """
        configs = [dict(c) for c in configs]
        done = self.done_keys()
        pending = [c for c in configs if config_key(c) not in done]
        if stop_after is not None:
            pending = pending[:stop_after]
        bar = None
        if self.progress and pending:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(pending), desc=desc, leave=False)
        try:
            for config in pending:
                result = dict(fn(config))
                row = {"config": _jsonable(config), "key": config_key(config), **_jsonable(result)}
                data = (json.dumps(row, allow_nan=False) + "\n").encode()
                with WRITE_LOCK:
                    fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                    try:
                        os.write(fd, data)
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        order = {config_key(c): i for i, c in enumerate(configs)}
        rows = [r for r in self.rows if r.get("key") in order]
        return sorted(rows, key=lambda r: order[r["key"]])


def write_summary(out_dir: str | os.PathLike, summary: Mapping[str, Any]) -> Path:
    """Write ``out_dir/summary.json`` atomically."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(_jsonable(dict(summary)), indent=2, sort_keys=False, allow_nan=False) + "\n")
    os.replace(tmp, out / "summary.json")
    return out / "summary.json"


@contextlib.contextmanager
def exit_on_signals(message: str = "", signals=(signal.SIGINT, signal.SIGTERM)):
    """Within the block, SIGINT/SIGTERM print ``message`` and exit with 128 + signal at once.

    A no-op outside the main thread (signal handlers can only be set there). The previous
    handlers and wakeup descriptor are restored on leaving the block.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    r, w = os.pipe()
    os.set_blocking(w, False)
    watched = {int(s) for s in signals}

    def watch():
        while True:
            try:
                data = os.read(r, 1)
            except OSError:
                return
            if not data:  # write end closed: the block ended normally
                return
            signum = data[0]
            if signum not in watched:
                continue
            WRITE_LOCK.acquire(timeout=2.0)  # let a row being written reach the disk; never released
            try:
                name = signal.Signals(signum).name
                sys.stdout.flush()
                sys.stderr.write(f"\n{name}: {message}\n" if message else f"\n{name}\n")
                sys.stderr.flush()
            finally:
                os._exit(128 + signum)

    old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    # A Python-level handler must exist for the wakeup byte to be written; it does nothing,
    # the watcher thread ends the process.
    old = {s: signal.signal(s, lambda *_: None) for s in signals}
    thread = threading.Thread(target=watch, name="cfm_jax-signal-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        signal.set_wakeup_fd(old_fd)
        os.close(w)
        thread.join(timeout=1.0)
        os.close(r)


__all__ = ["WRITE_LOCK", "Sweep", "config_key", "exit_on_signals", "read_rows", "write_summary"]
