"""Interrupts: SIGINT and SIGTERM end a run at once, with what it finished on disk.

:func:`exit_on_signals` ends the process with exit code 128 + signal (130, 143) even while the
main thread is inside a long XLA compilation or execution, which a Python-level
``KeyboardInterrupt`` only reaches after it returns. The C-level signal handler writes the signal
number to a pipe (``signal.set_wakeup_fd``); a watcher thread reads it, waits for a row being
written to reach the disk (:data:`WRITE_LOCK`), says so on stderr and calls
``os._exit``. Skipping interpreter finalisation is deliberate: tearing down the interpreter while
XLA's own threads still run a computation is what crashed with SIGSEGV. Finished rows are already
on disk, so nothing is lost but the row in flight.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable

#: held while a row is appended and flushed, so an interrupt never leaves half a row behind.
WRITE_LOCK = threading.Lock()


@contextlib.contextmanager
def exit_on_signals(message: str | Callable[[], str] = "", signals=(signal.SIGINT, signal.SIGTERM)):
    """Within the block, SIGINT/SIGTERM print ``message`` and exit with 128 + signal at once.

    ``message`` may be a function, called when the signal arrives (once a row being written is on
    disk), so that it says what the interrupted run leaves; if it fails, the signal's name alone.

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
                try:
                    text = message() if callable(message) else message
                except Exception:  # what to say must never keep the process alive
                    text = ""
                sys.stdout.flush()
                sys.stderr.write(f"\n{name}: {text}\n" if text else f"\n{name}\n")
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


__all__ = ["WRITE_LOCK", "exit_on_signals"]
