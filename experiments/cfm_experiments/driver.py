"""The one driver: everything around a part, once for every experiment.

For a command (a set of parts, :mod:`cfm_experiments.registry`) and its checked settings
(:func:`cfm_experiments.protocol.resolve`), :func:`execute`

1. opens the results folder (:class:`~cfm_experiments.results.ResultsFolder`): ``run.json``
   records the command, its parts and settings, the library version and the precision; a folder
   holding results is refused unless resumed (the same run only) or overwritten (nothing removed
   before the first new row);
2. runs every part's configurations through one resumable sweep (``rows.jsonl``; each row
   carries its part's name, and its wall time ``seconds`` measured here), with a progress bar;
3. asks each part for its :class:`~cfm_experiments.protocol.Summary` and figures, prints each
   summary under the part's title and every claim line as plain text
   (:func:`~cfm_experiments.rendering.claim_line`), writes their Markdown table ``claims.md``
   (when there are claims), the parts' text files and ``summary.json``:
   the command, parts, settings, this invocation's wall time (``wall_seconds``), the rows' total
   (``rows_seconds``), what the compiler did (``compile``: programs compiled, their total and
   largest time, programs loaded from the persistent cache), the backend, each part's numbers
   (``results``), the claims and the files written.

Interrupts are the command line's (:func:`cfm_experiments.signals.exit_on_signals`): every row
is on disk when it is finished, so Ctrl-C loses only the row in flight and ``--resume``
continues bit for bit.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import jax

from cfm_jax import CompileRecorder

from . import measured
from .compiles import summary as compile_summary
from .options import check_out
from .protocol import Claim, Part, Settings, Summary, resolve
from .registry import Command, command as find_command
from .rendering import claim_lines
from .results import Mode, ResultsFolder, config_key


@dataclasses.dataclass
class Report:
    """What :func:`execute` did: the rows (every part's, in sweep order), each part's summary, the
    claim lines, the files written, what the compiler did and the wall time of this invocation."""

    folder: Path
    rows: list[dict]
    summaries: dict[str, Summary]
    claims: list[Claim]
    files: list[Path]
    compile: CompileRecorder
    wall_seconds: float

    @property
    def passed(self) -> bool:
        """False when a part reported a failed check (the command exits with 1)."""
        return all(s.passed for s in self.summaries.values())


def default_out(cmd: Command, parts: Sequence[Part]) -> Path:
    """``cfm_out/<command>``, or ``cfm_out/<command>/<part>+<part>`` for another choice of parts."""
    base = Path("cfm_out") / cmd.name
    chosen = tuple(p.name for p in parts)
    return base if chosen == tuple(p.name for p in cmd.default_parts()) else base / "+".join(chosen)


def claim_command(cmd: Command, part: Part, settings: Settings) -> str:
    """The command line that reproduces a part's claim lines."""
    many = len(cmd.parts()) > 1
    return f"cfm-jax {cmd.name}" + (f" --parts {part.name}" if many else "") + (" --quick" if settings.quick else "")


def expected_programs(cmd: Command, parts: Sequence[Part], settings: Settings) -> int | None:
    """About how many programs this run builds, for the progress bar: the count of the command's
    benchmarked cold run (:func:`cfm_experiments.measured.expected_programs`) when this run is that
    one (its default parts, with the default or ``--quick`` settings; any seed); None otherwise."""
    if tuple(p.name for p in parts) != tuple(p.name for p in cmd.default_parts()):
        return None
    drop = lambda record: {k: v for k, v in record.items() if k != "seed"}  # noqa: E731
    if drop(settings.record()) != drop(resolve(parts, quick=settings.quick).record()):
        return None
    return measured.expected_programs(cmd.name, "quick" if settings.quick else "full")


def claims_table(claims: Sequence[Claim]) -> str:
    """The claimed-vs-measured table in Markdown, one row per claim line (``claims.md``)."""
    return claim_lines(claims, "markdown")


def _write_text(folder: ResultsFolder, name: str, text: str) -> Path:
    folder.record(name)
    path = folder.path / name
    tmp = path.with_name(name + ".tmp")
    tmp.write_text(text if text.endswith("\n") else text + "\n")
    os.replace(tmp, path)
    return path


def execute(
    cmd: Command,
    parts: Sequence[Part],
    settings: Settings,
    folder: ResultsFolder,
    *,
    progress: bool = True,
    stop_after: int | None = None,
    echo: Callable[[str], None] | None = print,
) -> Report:
    """Run ``parts`` of ``cmd`` with ``settings`` into ``folder`` (module docstring); ``echo``
    prints the summaries (None: silent). ``stop_after``: run at most that many new rows and stop
    before summarising (to test resumption)."""
    say = echo or (lambda _: None)
    t0 = time.perf_counter()
    owner: dict[str, Part] = {}
    configs: list[dict] = []
    for part in parts:
        for c in part.configs(settings):
            config = {"part": part.name, **c}
            key = config_key(config)
            if key in owner:
                raise ValueError(f"part {part.name!r} produces the configuration {key} twice.")
            owner[key] = part
            configs.append(config)
    with CompileRecorder() as stats:
        rows = folder.sweep(progress=progress).run(
            configs,
            lambda c: owner[config_key(c)].run(dict(c)),
            desc=cmd.name,
            stop_after=stop_after,
            describe=lambda c: str(c["part"]),
            programs=expected_programs(cmd, parts, settings),
        )
        if stop_after is not None:
            return Report(folder.path, rows, {}, [], [], stats, time.perf_counter() - t0)
        summaries: dict[str, Summary] = {}
        claims: list[Claim] = []
        files: list[Path] = []
        for part in parts:
            mine = [r for r in rows if r["config"]["part"] == part.name]
            summary = part.summarize(mine, settings)
            summaries[part.name] = summary
            here = claim_command(cmd, part, settings)
            claims += [dataclasses.replace(c, command=here) for c in summary.claims]
            if summary.text:
                say(f"\n{part.title}\n{summary.text}")
            for name, text in summary.files.items():
                files.append(_write_text(folder, name, text))
            drawn = part.figures(mine, summary, folder.path)
            folder.record(*drawn)
            files += drawn
    if claims:
        say("\nClaimed vs measured:\n" + claim_lines(claims, "text"))
        files.append(_write_text(folder, "claims.md", claims_table(claims)))
    wall = time.perf_counter() - t0
    summary_path = folder.write_summary(
        dict(
            command=cmd.name,
            parts=[p.name for p in parts],
            settings=settings.record(),
            wall_seconds=wall,
            rows_seconds=sum(float(r.get("seconds", 0.0)) for r in rows),
            compile=compile_summary(stats),
            backend=jax.default_backend(),
            devices=jax.device_count(),
            results={name: dict(s.data) for name, s in summaries.items()},
            claims=[dataclasses.asdict(c) for c in claims],
            passed=all(s.passed for s in summaries.values()),
            files=[p.name for p in files],
        )
    )
    say(
        f"\n{cmd.name}: {len(rows)} rows in {wall:.1f} s ({stats.compiled} programs compiled in "
        f"{stats.compile_seconds:.1f} s, {stats.cache_loads} loaded from the cache)"
    )
    say("wrote " + ", ".join(str(p) for p in [folder.path / "rows.jsonl", *files, summary_path]))
    return Report(folder.path, rows, summaries, claims, files, stats, wall)


def open_folder(cmd: Command, parts: Sequence[Part], settings: Settings, out, mode: Mode) -> ResultsFolder:
    """The results folder of this run (its identity: the command, its parts and settings)."""
    if any(p.float64 for p in parts):
        jax.config.update("jax_enable_x64", True)  # before the folder records the precision
    config = {"parts": [p.name for p in parts], **settings.record()}
    return ResultsFolder(out, cmd.name, config, mode=mode)


def run(
    name: str,
    *,
    out: str | os.PathLike | None = None,
    quick: bool = False,
    parts: Sequence[str] | None = None,
    mode: Mode = "new",
    progress: bool = False,
    echo: Callable[[str], None] | None = None,
    **options,
) -> Report:
    """Run the command ``name`` from Python, with the command line's rules: ``run("rates",
    quick=True, ns=[16, 64, 256])`` is ``cfm-jax rates --quick --ns 16 64 256``.

    Args:
        name: a command of :data:`cfm_experiments.COMMANDS`.
        out: the results folder (default ``cfm_out/<name>``).
        quick: the reduced configuration.
        parts: the parts to run (default: the command's default parts).
        mode: ``"new"``, ``"resume"`` or ``"overwrite"`` (see :class:`~cfm_experiments.ResultsFolder`).
        progress: show a progress bar.
        echo: where the summaries are printed (e.g. ``print``); default silent.
        options: the parts' options by name; each checked by its rule (a ValueError naming it).
    """
    cmd = find_command(name)
    chosen = cmd.select(parts)
    settings = resolve(chosen, quick=quick, **options)
    out = default_out(cmd, chosen) if out is None else check_out(out)  # an empty one is not this folder
    folder = open_folder(cmd, chosen, settings, out, mode)
    return execute(cmd, chosen, settings, folder, progress=progress, echo=echo)


def load_summary(folder: str | os.PathLike) -> dict:
    """The ``summary.json`` a run wrote into ``folder``."""
    return json.loads((Path(folder) / "summary.json").read_text())


__all__ = [
    "Report",
    "claim_command",
    "claims_table",
    "default_out",
    "execute",
    "expected_programs",
    "load_summary",
    "open_folder",
    "run",
]
