"""Two CPU processes (two forced host devices each) share one context through ``jax.distributed``.

The context is sharded across the 4 global devices of a job started by
:func:`cfm_jax.distributed.launch` (coordinator on 127.0.0.1, gloo collectives). The forward solve
and the hand-adjoint gradient computed that way must equal the same computation in this single
process, on one device, to float64 round-off: the sharded run reaches the result through XLA's
partitioned programs and cross-process all-gathers, the reference through none of them, so any
misplaced shard, wrong gather or dropped collective shows up as an O(1) difference.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import distributed

# d = 3, H = 2, MLP 5, L = 3; n = 12 context atoms (3 per device), B = 4 target tokens.
N, B, D = 12, 4, 3


def _problem():
    """(model, x0, context, y), float64, identical in every process (fixed keys)."""
    model = cfm_jax.Transformer.init(jax.random.key(0), D, heads=2, mlp_width=5, layers=3, dtype=jnp.float64)
    kx, kz, kw, ky = jax.random.split(jax.random.key(1), 4)
    x0 = jax.random.normal(kx, (B, D), jnp.float64)
    w = jax.random.uniform(kw, (N,), jnp.float64, 0.5, 1.5)
    context = cfm_jax.EmpiricalMeasure(jax.random.normal(kz, (N, D), jnp.float64), w / w.sum())
    return model, x0, context, jax.random.normal(ky, (B, D), jnp.float64)


def _grad_step(model, x0, context, y):
    """Loss and hand-adjoint gradient (the one line to change when the gradient API changes)."""
    return cfm_jax.loss_and_grad(model, x0, context, y)


def _outputs(sol, loss, grads):
    """Flat dict of the compared arrays (host NumPy)."""
    leaves = jax.tree.leaves(grads)
    return {"x1": sol.x1, "z1": sol.context.points, "loss": loss, **{f"grad{i}": g for i, g in enumerate(leaves)}}


WORKER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from cfm_jax import distributed

    distributed.initialize()
    import jax

    jax.config.update("jax_enable_x64", True)
    import cfm_jax
    from cfm_jax._sharding import gather, replicate

    sys.path.insert(0, sys.argv[1])
    from test_distributed import _grad_step, _outputs, _problem

    assert (jax.process_count(), jax.device_count(), jax.local_device_count()) == (2, 4, 2), jax.devices()
    model, x0, context, y = _problem()
    mesh = cfm_jax.context_mesh()
    xs, cs = cfm_jax.shard_inputs(x0, context, mesh)
    model, y = replicate((model, y), mesh)
    assert len(cs.points.sharding.device_set) == 4 and not cs.points.is_fully_addressable
    sol = jax.jit(cfm_jax.forward)(model, xs, cs)
    loss, grads = jax.jit(_grad_step)(model, xs, cs, y)
    assert len(sol.context.points.sharding.device_set) == 4, sol.context.points.sharding
    out = gather(_outputs(sol, loss, grads))
    np.savez(f"{sys.argv[2]}/out{jax.process_index()}.npz", **out)
    print("WORKER_OK", jax.process_index())
    """
)


@pytest.mark.slow  # two JAX processes and a single-process reference
def test_two_processes_match_one_process(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    tests_dir = Path(__file__).parent
    # The workers import this checkout's cfm_jax, whatever is installed.
    path = os.pathsep.join([str(tests_dir.parent)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    results = distributed.launch(
        [sys.executable, str(script), str(tests_dir), str(tmp_path)],
        2,
        host_devices=2,
        timeout_s=240,
        capture=True,
        env=dict(os.environ, PYTHONPATH=path),
    )
    for r in results:
        assert r.returncode == 0, f"process {r.process_id} (status {r.returncode}):\n{r.stderr[-3000:]}"
        assert f"WORKER_OK {r.process_id}" in r.stdout

    model, x0, context, y = _problem()
    sol = cfm_jax.forward(model, x0, context)
    loss, grads = _grad_step(model, x0, context, y)
    ref = jax.tree.map(np.asarray, _outputs(sol, loss, grads))
    for pid in range(2):
        got = np.load(tmp_path / f"out{pid}.npz")
        assert sorted(got.files) == sorted(ref)
        for name, value in ref.items():
            # Round-off of O(10) float64 operations on O(1) values; a wrong shard is O(1).
            np.testing.assert_allclose(got[name], value, rtol=1e-11, atol=1e-12, err_msg=f"{name} (process {pid})")


def test_launch_kills_the_others_when_one_fails():
    """Process 1 fails at once, process 0 would sleep far past the timeout: both stop within it."""
    code = textwrap.dedent(
        """
        import os, sys, time
        if os.environ["CFM_JAX_PROCESS_ID"] == "1":
            sys.exit(3)
        time.sleep(600)
        """
    )
    results = distributed.launch([sys.executable, "-c", code], 2, timeout_s=60, capture=True)
    assert [r.returncode for r in results] == [None, 3]


def test_launch_sets_the_environment_initialize_reads():
    """One coordinator for all, ids 0..N−1, the forced device count replacing an earlier one
    (other XLA flags kept), GPU i·k … i·k + k − 1 for process i."""
    names = (
        "CFM_JAX_COORDINATOR",
        "CFM_JAX_NUM_PROCESSES",
        "CFM_JAX_PROCESS_ID",
        "XLA_FLAGS",
        "CFM_JAX_LOCAL_DEVICE_IDS",
    )
    code = f"import os; print(*(os.environ[k] for k in {names!r}))"
    results = distributed.launch(
        [sys.executable, "-c", code],
        3,
        host_devices=2,
        gpus_per_process=2,
        capture=True,
        env={"XLA_FLAGS": "--xla_force_host_platform_device_count=7 --foo"},
    )
    lines = [r.stdout.split() for r in results]
    assert all(r.returncode == 0 for r in results)
    assert len({line[0] for line in lines}) == 1 and lines[0][0].startswith("127.0.0.1:")
    assert [line[1:3] for line in lines] == [["3", "0"], ["3", "1"], ["3", "2"]]
    assert all(line[3:5] == ["--foo", "--xla_force_host_platform_device_count=2"] for line in lines)
    assert [line[5] for line in lines] == ["0,1", "2,3", "4,5"]


def test_launch_timeout_kills_everything():
    """Children that would run for 10 minutes are killed at the 2 s limit and reported as killed."""
    results = distributed.launch([sys.executable, "-c", "import time; time.sleep(600)"], 2, timeout_s=2, capture=True)
    assert [r.returncode for r in results] == [None, None]


def test_bad_arguments():
    """ValueErrors naming the argument, raised before any process starts or JAX is initialised."""
    with pytest.raises(ValueError, match="num_processes"):
        distributed.launch([sys.executable], 0)
    with pytest.raises(ValueError, match="command"):
        distributed.launch([], 2)
    with pytest.raises(ValueError, match="host_devices"):
        distributed.launch([sys.executable], 2, host_devices=0)
    with pytest.raises(ValueError, match="coordinator_address"):
        distributed.initialize("nohostport", 2, 0)
    with pytest.raises(ValueError, match="process_id"):
        distributed.initialize("127.0.0.1:1234", 2, 2)


def test_cli_reports_failure_in_one_line():
    """``python -m cfm_jax.distributed``: exit status 1 and one line naming the failed process."""
    code = "import os, sys; sys.exit(0 if os.environ['CFM_JAX_PROCESS_ID'] == '0' else 4)"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cfm_jax.distributed",
            "--processes",
            "2",
            "--timeout",
            "60",
            "--",
            sys.executable,
            "-c",
            code,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1
    assert "process 1 exited with status 4" in out.stderr and "Traceback" not in out.stderr
