"""Results folders and resumable sweeps: what the driver writes, and how it resumes.

Each finished configuration is appended as one JSON line to ``rows.jsonl`` and flushed to disk
(``fsync``) before the next one starts, so an interrupted sweep (Ctrl-C, a killed job) loses at
most the configuration in flight. Resuming skips the configurations whose key is already on
disk, so the final file holds each configuration exactly once, in the order of the sweep.

Results cannot be mixed (:class:`ResultsFolder`): every output folder holds ``run.json``, the
experiment, its configuration, the library version and precision that wrote it and the files it
wrote. A run into a folder holding results is refused unless it resumes them (the same
experiment and configuration only: anything else is refused naming both) or overwrites them (the
old files are removed when the first new row or summary is written, never before). Rows are read
strictly: a row must sit under its own configuration's key, rows of configurations outside the
sweep are refused, a torn last line (a crash mid-write) is dropped and the sweep resumes after
the last complete row, and any other bad line is an error naming the file and the line.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import jax
import numpy as np

from cfm_jax import CompileRecorder, __version__

from .compiles import compiling_notice, watching
from .signals import WRITE_LOCK


def config_key(config: Mapping[str, Any]) -> str:
    """Canonical, order-independent string identifying a configuration."""
    return json.dumps(_jsonable(dict(config)), sort_keys=True)


def _jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.ndarray, jax.Array)):
        return _jsonable(np.asarray(x).tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None  # JSON has no NaN/inf: a missing number is null
    if isinstance(x, np.generic):
        return _jsonable(x.item())
    return x


def _scan_rows(path: Path) -> tuple[list[dict], int | None]:
    """The rows of ``path`` and, when its last line is torn (a crash mid-write), the byte offset
    where the complete rows end (else None). A bad line followed by good ones is corruption, not a
    crash: a ValueError naming the file and the line."""
    data = path.read_bytes()
    rows, offset, torn_at = [], 0, None
    lines = data.split(b"\n")
    for i, raw in enumerate(lines):
        end = offset + len(raw) + (1 if i < len(lines) - 1 else 0)
        if raw.strip():
            try:
                row = json.loads(raw)
                ok = isinstance(row, dict) and "key" in row and "config" in row
                if ok and row["key"] != config_key(row["config"]):
                    raise ValueError("its key is not its configuration's")
                if not ok:
                    raise ValueError("not a row of a sweep (no config/key)")
            except ValueError as e:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
                if torn_at is None and not any(r.strip() for r in lines[i + 1 :]):
                    torn_at = offset  # the last line: what a crash mid-write leaves
                    break
                what = e.msg if isinstance(e, json.JSONDecodeError) else str(e)
                raise ValueError(
                    f"{path}: line {i + 1} is corrupt ({what}); it is not a torn last line, so "
                    "it cannot be repaired: fix or remove the line, or start over with --overwrite."
                ) from None
            rows.append(row)
        offset = end
    return rows, torn_at


def read_rows(path: str | os.PathLike) -> list[dict]:
    """All complete rows of a JSON-lines file written by :class:`Sweep`.

    A torn last line (a crash mid-write) is ignored; a corrupt line followed by complete rows is a
    ValueError naming the file and the line.
    """
    path = Path(path)
    return _scan_rows(path)[0] if path.exists() else []


#: what a :class:`ResultsFolder` does with results already in the folder.
Mode = Literal["new", "resume", "overwrite"]

#: the record of what wrote a results folder, beside its rows.
MANIFEST = "run.json"


def _plain(name: str) -> bool:
    """Whether ``name`` names a file directly in a folder (no separator, not ``.`` or ``..``)."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name and "\0" not in name


def _short(value) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


class ResultsFolder:
    """An experiment's output folder and its record of what wrote it (``run.json``).

    ``run.json`` holds the experiment's name, its full configuration, the library version, the
    float precision and the files the run wrote. ``mode``:

    - ``"new"``: the folder must not hold results yet (rows, a summary or a ``run.json``);
    - ``"resume"``: results already there are continued, only when ``run.json`` names the same
      experiment, configuration, version and precision (a folder without one is adopted when
      every row in it belongs to this run's sweep, see :meth:`Sweep.run`);
    - ``"overwrite"``: start over, but nothing is deleted before the new run has its first row
      (or summary) to write: an interrupted overwrite leaves the old results intact.

    Refusals are ValueErrors naming the folder, both runs and what to do (``--resume``,
    ``--overwrite``, a new ``--out``).
    """

    def __init__(self, out: str | os.PathLike, experiment: str, config: Mapping[str, Any], *, mode: Mode = "new"):
        if mode not in ("new", "resume", "overwrite"):
            raise ValueError(f"`mode` must be 'new', 'resume' or 'overwrite', got {mode!r}.")
        self.path = Path(out)
        self.mode = mode
        self.identity = {
            "experiment": str(experiment),
            "config": _jsonable(dict(config)),
            "version": __version__,
            "float64": bool(jax.config.values["jax_enable_x64"]),
        }
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ValueError(f"--out {self.path}: cannot create the folder ({e.strerror or e}).") from None
        if not os.access(self.path, os.W_OK):
            raise ValueError(f"--out {self.path}: the folder is not writable.")
        old, corrupt = self._read_manifest(mode)
        # results: files a run recorded, or (a folder from before run.json, or one whose run.json is
        # corrupt) rows or a summary
        held = bool(old["files"]) if old is not None else corrupt or any(self._legacy_files())
        self._pending = False  # an overwrite not yet carried out
        if held and mode == "new":
            what = f" of {self._describe(old, self.identity)}" if old else ""
            raise ValueError(
                f"--out {self.path} already holds results{what}: pass --resume to continue them, "
                "--overwrite to replace them, or choose a new --out."
            )
        if held and mode == "resume" and old is not None and self._same(old) is False:
            raise ValueError(
                f"--resume: {self.path} holds results of {self._describe(old, self.identity)}, not of "
                f"this run, {self._describe(self.identity, old)}; choose a new --out, or pass "
                "--overwrite to start over."
            )
        if held and mode == "overwrite":
            self._old, self._pending = old, True
        else:
            files = (old["files"] if old else sorted(p.name for p in self._legacy_files())) if held else []
            self._write_manifest({**self.identity, "files": files})  # a resumed older folder is adopted

    # -- the record
    def _read_manifest(self, mode: Mode) -> tuple[dict | None, bool]:
        """(the manifest or None, whether it is corrupt). A corrupt one is an error naming it, except
        under ``--overwrite``, which replaces it (and removes the rows and summary beside it)."""
        path = self.path / MANIFEST
        if not path.exists():
            return None, False
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict) or not {"experiment", "config", "files"} <= set(data):
                raise ValueError("no experiment/config/files")
            files = data["files"]
            if not isinstance(files, list) or not all(isinstance(f, str) and _plain(f) for f in files):
                raise ValueError("its file list names something other than files directly in the folder")
        except ValueError as e:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            if mode == "overwrite":
                return None, True
            raise ValueError(f"{path} is corrupt ({e}); start over with --overwrite, or remove it.") from None
        return data, False

    def _write_manifest(self, data: dict) -> None:
        tmp = self.path / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")
        os.replace(tmp, self.path / MANIFEST)
        self._manifest = data

    def _legacy_files(self):
        """Results a folder can hold without a ``run.json`` (written before it existed)."""
        yield from self.path.glob("*.jsonl")
        if (self.path / "summary.json").exists():
            yield self.path / "summary.json"

    def _same(self, old: dict) -> bool:
        return all(old.get(k) == v for k, v in self.identity.items())

    @staticmethod
    def _describe(run: dict, other: dict) -> str:
        """``cfm-jax NAME`` and what differs from ``other``: config entries, version, precision."""
        text = f"`{run['experiment']}`"
        if run["experiment"] != other["experiment"]:
            return text
        a, b = run.get("config", {}), other.get("config", {})
        diff = [f"{k}={_short(a.get(k))}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        if run.get("version") != other.get("version"):
            diff.append(f"version {run.get('version')}")
        if run.get("float64") != other.get("float64"):
            diff.append("float64" if run.get("float64") else "float32")
        return text + (f" with {', '.join(diff)}" if diff else "")

    def commit(self) -> None:
        """Carry out a pending overwrite (remove the old run's files); called before the first write."""
        if not self._pending:
            return
        old = self._old
        names = set(old.get("files", [])) if old else {p.name for p in self._legacy_files()}
        for name in names:
            p = self.path / name
            if _plain(name) and name != MANIFEST and p.is_file():  # only files directly in the folder
                p.unlink()
        self._pending = False
        self._write_manifest({**self.identity, "files": []})

    def record(self, *paths: str | os.PathLike) -> None:
        """Note files this run wrote in the folder (removed by a later ``--overwrite``)."""
        self.commit()
        files = set(self._manifest["files"]) | {Path(p).name for p in paths}
        if files != set(self._manifest["files"]):
            self._write_manifest({**self._manifest, "files": sorted(files)})

    def finished_rows(self, name: str = "rows.jsonl") -> int:
        """The rows of this run on disk in ``name`` (what ``--resume`` would keep): none while an
        overwrite is pending, since the rows there are the old run's until the first new one."""
        return 0 if self._pending else len(read_rows(self.path / name))

    # -- writing
    def sweep(self, name: str = "rows.jsonl", *, progress: bool = True) -> Sweep:
        """A :class:`Sweep` appending to ``name`` in this folder."""
        return Sweep(self.path / name, resume=self.mode == "resume", progress=progress, folder=self)

    def write_summary(self, summary: Mapping[str, Any], *also: str | os.PathLike) -> Path:
        """Write ``summary.json`` into this folder atomically (strict JSON: a missing number is
        null); ``also``: other files this run wrote (figures, tables)."""
        self.record("summary.json", *also)
        path = self.path / "summary.json"
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(_jsonable(dict(summary)), indent=2, sort_keys=False, allow_nan=False) + "\n")
        os.replace(tmp, path)
        return path


class Sweep:
    """Run ``fn(config) -> dict`` over configurations, appending each result to a JSONL file.

    Args:
        path: the ``.jsonl`` file (its folder is created).
        resume: keep rows already on disk and skip their configurations; otherwise start over,
            replacing the file only when the first new row is written (never before).
        progress: show a tqdm progress bar.
        folder: the :class:`ResultsFolder` the file belongs to (its pending overwrite is carried
            out, and the file recorded, at the first write).

    Every row is ``{"config": config, "key": key, **result}``, ``key`` the canonical string of
    ``config`` (:func:`config_key`).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        resume: bool = True,
        progress: bool = True,
        folder: ResultsFolder | None = None,
    ):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.resume = bool(resume)
        self.folder = folder
        self._replace = not self.resume and self.path.exists()  # start over at the first write
        if self.resume:
            self._repair()
        self.progress = progress

    def _repair(self):
        """Drop a torn trailing line left by a crash, so appends stay valid JSONL."""
        if not self.path.exists():
            return
        rows, torn_at = _scan_rows(self.path)
        if torn_at is not None:
            with WRITE_LOCK:
                os.truncate(self.path, torn_at)
            print(
                f"{self.path}: dropped a torn last line (a run ended mid-write); resuming after row {len(rows)}.",
                file=sys.stderr,
            )

    @property
    def rows(self) -> list[dict]:
        return [] if self._replace else read_rows(self.path)

    def done_keys(self) -> set[str]:
        return {r["key"] for r in self.rows}

    def _append(self, data: bytes) -> None:
        with WRITE_LOCK:
            if self.folder is not None:
                self.folder.record(self.path)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | (os.O_TRUNC if self._replace else 0)
            fd = os.open(self.path, flags, 0o644)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._replace = False

    def run(
        self,
        configs: Iterable[Mapping[str, Any]],
        fn: Callable[[Mapping[str, Any]], Mapping[str, Any]],
        *,
        desc: str = "sweep",
        stop_after: int | None = None,
        valid: Callable[[Mapping[str, Any]], bool] | None = None,
        describe: Callable[[Mapping[str, Any]], str] | None = None,
        programs: int | None = None,
    ) -> list[dict]:
        """Run the pending configurations; return all rows (old and new) in sweep order.

        Every new row records its wall time, ``seconds`` (``fn``'s own ``seconds``, if any, is
        replaced). ``stop_after`` runs at most that many new configurations (to test resumption).
        ``describe(config)``: a short text shown beside the progress bar while ``config`` runs;
        ``programs``: about how many programs the run builds, counted there while XLA compiles
        (:func:`~cfm_experiments.compiles.compiling_notice`).
        ``valid(row)``: rows on disk for which it is False recorded a failure; they are dropped
        from the file and their configurations run again. Rows on disk whose configuration is not
        one of ``configs`` belong to another run: a ValueError naming the file.
        """
        configs = [dict(c) for c in configs]
        order = {config_key(c): i for i, c in enumerate(configs)}
        on_disk = self.rows
        foreign = [r for r in on_disk if r["key"] not in order]
        if foreign:
            raise ValueError(
                f"{self.path} holds {len(foreign)} row(s) of configurations this run does not have "
                f"(e.g. {_short(foreign[0]['config'])}): resume only the command that wrote it; "
                "choose a new --out, or pass --overwrite to start over."
            )
        failed = [r for r in on_disk if valid is not None and not valid(r)]
        if failed:
            assert valid is not None  # rows fail only a given check
            keep = [r for r in on_disk if valid(r)]
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text("".join(json.dumps(r, allow_nan=False) + "\n" for r in keep))
            with WRITE_LOCK:
                os.replace(tmp, self.path)
            print(f"{self.path}: {len(failed)} row(s) recorded a failure; running them again.", file=sys.stderr)
        done = self.done_keys()
        pending = [c for c in configs if config_key(c) not in done]
        if stop_after is not None:
            pending = pending[:stop_after]
        bar = None
        if self.progress and pending:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(pending), desc=desc, leave=False)
        now = [""]
        recorder: list[CompileRecorder | None] = [None]

        def notice(compiling: bool) -> None:  # XLA has been compiling a while: say why the bar waits
            if bar is not None:
                text = f"{now[0]}: {compiling_notice(recorder[0], programs)}" if compiling else now[0]
                bar.set_postfix_str(text, refresh=True)

        with contextlib.ExitStack() as stack:
            if bar is not None:
                recorder[0] = stack.enter_context(watching(notice))
                stack.callback(bar.close)
            for config in pending:
                now[0] = describe(config) if describe is not None else ""
                if bar is not None:
                    bar.set_postfix_str(now[0], refresh=True)
                t0 = time.perf_counter()
                result = dict(fn(config))
                seconds = time.perf_counter() - t0  # the one per-row timing: parts do not time themselves
                row = {"config": _jsonable(config), "key": config_key(config), **_jsonable(result), "seconds": seconds}
                self._append((json.dumps(row, allow_nan=False) + "\n").encode())
                if bar is not None:
                    bar.update(1)
        rows = [r for r in self.rows if r.get("key") in order]
        return sorted(rows, key=lambda r: order[r["key"]])


__all__ = [
    "MANIFEST",
    "Mode",
    "ResultsFolder",
    "Sweep",
    "config_key",
    "read_rows",
]
