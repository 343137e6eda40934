"""Multi-process runs on JAX's own engine: ``jax.distributed`` set-up and a local launcher.

JAX is multi-controller: every process runs the same program, owns its local devices, and
``jax.devices()`` lists the global devices of all processes once :func:`initialize` has run.
A mesh over the global devices (:func:`cfm_jax.context_mesh`) then shards the context across
processes exactly as across the devices of one process; XLA inserts the collectives (NCCL on
GPUs, gloo on CPUs). See ``docs/scaling.md`` for recipes.

:func:`launch` starts ``N`` local copies of a command with the environment :func:`initialize`
reads (coordinator ``127.0.0.1:<free port>``, process count and id) and, on CPU, a forced number
of host devices per process; it kills every child when one fails or the time runs out. From a
shell: ``python -m cfm_jax.distributed --processes 2 --host-devices 2 -- python run.py``.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import jax

from ._deprecations import Deprecated, deprecated_attribute

#: Environment variables set by :func:`launch` and read by :func:`initialize`.
ENV_COORDINATOR = "CFM_JAX_COORDINATOR"
ENV_NUM_PROCESSES = "CFM_JAX_NUM_PROCESSES"
ENV_PROCESS_ID = "CFM_JAX_PROCESS_ID"
ENV_LOCAL_DEVICE_IDS = "CFM_JAX_LOCAL_DEVICE_IDS"

CpuCollectives = Literal["gloo", "mpi"]


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    local_device_ids: Sequence[int] | None = None,
    cpu_collectives: CpuCollectives = "gloo",
    bind_loopback: bool | None = None,
    timeout_s: int = 120,
) -> None:
    """Join a multi-process JAX run; call before any other JAX computation.

    Arguments left as None are read from the variables :func:`launch` sets (``CFM_JAX_*``);
    when those are absent too, JAX's own cluster detection (SLURM, Open MPI, Cloud TPU) fills
    them in. ``cpu_collectives`` selects the cross-process implementation of CPU collectives.
    ``bind_loopback`` (default: when the coordinator is ``127.0.0.1``) makes process 0's
    coordinator listen on the loopback interface only instead of every interface.
    """
    if cpu_collectives not in ("gloo", "mpi"):
        raise ValueError(f"`cpu_collectives` must be 'gloo' or 'mpi', got {cpu_collectives!r}.")
    env = os.environ
    coordinator_address = coordinator_address or env.get(ENV_COORDINATOR)
    if num_processes is None and ENV_NUM_PROCESSES in env:
        num_processes = int(env[ENV_NUM_PROCESSES])
    if process_id is None and ENV_PROCESS_ID in env:
        process_id = int(env[ENV_PROCESS_ID])
    if local_device_ids is None and env.get(ENV_LOCAL_DEVICE_IDS):
        local_device_ids = [int(i) for i in env[ENV_LOCAL_DEVICE_IDS].split(",")]
    if num_processes is not None and num_processes < 1:
        raise ValueError(f"`num_processes` must be >= 1, got {num_processes}.")
    if process_id is not None and num_processes is not None and not 0 <= process_id < num_processes:
        raise ValueError(f"`process_id` must lie in [0, {num_processes}), got {process_id}.")
    bind = None
    if coordinator_address is not None:
        host, _, port = coordinator_address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"`coordinator_address` must be 'host:port', got {coordinator_address!r}.")
        loopback = host in ("127.0.0.1", "localhost") if bind_loopback is None else bind_loopback
        bind = f"127.0.0.1:{port}" if loopback else None
    jax.config.update("jax_cpu_collectives_implementation", cpu_collectives)
    jax.distributed.initialize(
        coordinator_address=coordinator_address,
        num_processes=num_processes,
        process_id=process_id,
        local_device_ids=local_device_ids,
        coordinator_bind_address=bind,
        initialization_timeout=timeout_s,
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class ProcessResult:
    """Exit status and (when captured) output of one launched process; ``returncode`` None: killed."""

    process_id: int
    returncode: int | None
    stdout: str
    stderr: str


def _process_env(base, i, num_processes, coordinator, host_devices, gpus_per_process):
    env = dict(base)
    env.update({ENV_COORDINATOR: coordinator, ENV_NUM_PROCESSES: str(num_processes), ENV_PROCESS_ID: str(i)})
    if host_devices is not None:
        flag = "--xla_force_host_platform_device_count"
        flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(flag)]
        env["XLA_FLAGS"] = " ".join(flags + [f"{flag}={host_devices}"])
        env["JAX_PLATFORMS"] = "cpu"
    if gpus_per_process is not None:
        ids = range(i * gpus_per_process, (i + 1) * gpus_per_process)
        env[ENV_LOCAL_DEVICE_IDS] = ",".join(map(str, ids))
    return env


def _kill(proc):
    """Kill the process group started for ``proc`` (each child gets its own session)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def launch(
    command: Sequence[str],
    num_processes: int,
    *,
    host_devices: int | None = None,
    gpus_per_process: int | None = None,
    port: int | None = None,
    timeout_s: float = 600.0,
    capture: bool = False,
    env: Mapping[str, str] | None = None,
) -> list[ProcessResult]:
    """Run ``num_processes`` local copies of ``command`` as one JAX multi-process job.

    Args:
        command: argv of each process (e.g. ``[sys.executable, "run.py"]``); the program calls
            :func:`initialize` with no arguments.
        num_processes: N ≥ 1.
        host_devices: force this many CPU devices per process (sets ``XLA_FLAGS`` and
            ``JAX_PLATFORMS=cpu``); None leaves the platform alone.
        gpus_per_process: give process i the GPUs ``i·k … i·k + k − 1``; None: JAX's default.
        port: coordinator port on 127.0.0.1 (default: a free one).
        timeout_s: wall-clock limit for the whole job; every child is killed past it.
        capture: collect each child's stdout/stderr (else they share this process's streams).
        env: base environment (default ``os.environ``).

    Returns:
        one :class:`ProcessResult` per process, in process order. When a child fails, the
        others are killed (they would wait for it at the next collective) and report None.
    """
    command = list(command)
    if not command:
        raise ValueError("`command` is empty.")
    if int(num_processes) != num_processes or num_processes < 1:
        raise ValueError(f"`num_processes` must be an integer >= 1, got {num_processes!r}.")
    for name, value in (("host_devices", host_devices), ("gpus_per_process", gpus_per_process)):
        if value is not None and (int(value) != value or value < 1):
            raise ValueError(f"`{name}` must be None or an integer >= 1, got {value!r}.")
    if timeout_s <= 0:
        raise ValueError(f"`timeout_s` must be > 0, got {timeout_s!r}.")
    coordinator = f"127.0.0.1:{free_port() if port is None else int(port)}"
    base = os.environ if env is None else env
    procs, files = [], []
    try:
        for i in range(num_processes):
            out = tempfile.TemporaryFile("w+") if capture else None
            err = tempfile.TemporaryFile("w+") if capture else None
            files.append((out, err))
            procs.append(
                subprocess.Popen(
                    command,
                    env=_process_env(base, i, num_processes, coordinator, host_devices, gpus_per_process),
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
            )
        deadline = time.monotonic() + timeout_s
        while any(p.poll() is None for p in procs):
            if time.monotonic() > deadline or any(p.poll() not in (None, 0) for p in procs):
                break
            time.sleep(0.05)
    finally:
        for p in procs:
            _kill(p)
    results = []
    for i, (p, (out, err)) in enumerate(zip(procs, files)):
        texts = []
        for f in (out, err):
            if f is None:
                texts.append("")
            else:
                f.seek(0)
                texts.append(f.read())
                f.close()
        # A negative return code means we (or a signal) killed it.
        code = p.returncode if p.returncode is not None and p.returncode >= 0 else None
        results.append(ProcessResult(i, code, *texts))
    return results


def _main(argv: Sequence[str] | None = None) -> int:
    """``python -m cfm_jax.distributed [options] -- COMMAND...``; exit status 0 iff every process succeeded."""
    parser = argparse.ArgumentParser(
        prog="python -m cfm_jax.distributed",
        description="Start N local processes of one JAX multi-process job (coordinator on 127.0.0.1).",
    )
    parser.add_argument("--processes", type=int, default=2, help="number of processes N (default 2)")
    parser.add_argument("--host-devices", type=int, default=None, help="force this many CPU devices per process")
    parser.add_argument("--gpus-per-process", type=int, default=None, help="GPUs given to each process")
    parser.add_argument("--port", type=int, default=None, help="coordinator port (default: a free one)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds before every process is killed")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the program each process runs (after --)")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        results = launch(
            command,
            args.processes,
            host_devices=args.host_devices,
            gpus_per_process=args.gpus_per_process,
            port=args.port,
            timeout_s=args.timeout,
        )
    except (ValueError, OSError) as e:
        print(f"cfm_jax.distributed: error: {e}", file=sys.stderr)
        return 2
    failed = [r for r in results if r.returncode != 0]
    for r in failed:
        status = "was killed" if r.returncode is None else f"exited with status {r.returncode}"
        print(f"cfm_jax.distributed: process {r.process_id} {status}", file=sys.stderr)
    return 1 if failed else 0


__all__ = [
    "ENV_COORDINATOR",
    "ENV_LOCAL_DEVICE_IDS",
    "ENV_NUM_PROCESSES",
    "ENV_PROCESS_ID",
    "CpuCollectives",
    "ProcessResult",
    "free_port",
    "initialize",
    "launch",
]

#: old name -> its value and what to write instead; removed in the next release
_DEPRECATED = {"main": Deprecated("cfm_jax.distributed", "_main", "the command python -m cfm_jax.distributed")}


def __getattr__(name: str) -> Any:
    """A deprecated name (PEP 562), with a warning naming its replacement."""
    if name in _DEPRECATED:
        return deprecated_attribute(__name__, name, _DEPRECATED[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    sys.exit(_main())
