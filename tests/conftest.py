"""Shared test configuration.

float64 is enabled for the whole test session (tight tolerances need it); float32 behaviour is
tested by passing ``dtype=jnp.float32`` explicitly. Keep shapes tiny and shared: JAX compiles
once per shape, and the persistent compilation cache (``$CFM_JAX_CACHE_DIR``, else
``$XDG_CACHE_HOME/cfm_jax``, else ``~/.cache/cfm_jax``; the same as the CLI's) lets a second test
run load what the first compiled. Set ``CFM_JAX_CACHE_DIR`` to another folder to start cold.
"""

import os
import re

os.environ.setdefault("MPLBACKEND", "Agg")
# The test shapes are tiny, so compiling dominates: skip XLA's expensive backend (LLVM) passes.
# Numerics are unchanged up to round-off, which every tolerance here allows; subprocesses (the CLI,
# the notebooks' kernels) inherit it. JAX_DISABLE_MOST_OPTIMIZATIONS=0 tests fully optimised code.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
# And XLA:CPU's older elemental emitters: they compile these programs in ~60 % of the time its
# fusion emitters take (a cold run of test_solve and test_gradients, 184 s -> 111 s), with the same
# operations (no fast-math either way). A flag the user set already wins.
if "xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_cpu_use_fusion_emitters=false".strip()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import cfm_jax  # noqa: E402

cfm_jax.enable_compilation_cache()
# Start the backend now: the session keeps its one CPU device even when a test calls the CLI's
# main() in-process (the CLI otherwise asks for one device per core before JAX starts).
jax.devices()

import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402
from _ogd_problem import setup  # noqa: E402, F401  (the OGD tests' shared problem, a module-scoped fixture)


@pytest.fixture(autouse=True, scope="module")
def _drop_compiled_programs():
    """Drop JAX's compiled programs after each test module. A worker runs hundreds of modules, and
    every CPU executable keeps its JIT code mapped: tens of thousands of mappings by the end of a run,
    against the kernel's limit of 65530 (vm.max_map_count), past which XLA aborts the worker."""
    yield
    jax.clear_caches()


#: a two-row `cfm-jax rates` sweep small enough for subprocess tests (CLI errors, signals, resume)
TINY_RATES = [
    "rates",
    "--dims",
    "1",
    "--control-dims",
    "1",
    "--ns",
    "4",
    "8",
    "--control-ns",
    "4",
    "8",
    "--n-ref",
    "32",
    "--control-n-ref",
    "32",
    "--seeds",
    "2",
    "--no-subspace",
    "--no-progress",
    "--no-adjoint",
    "--layers",
    "2",
]


@pytest.fixture(scope="session")
def small_model():
    """Float64 transformer: d=3, H=2 heads, MLP width 5, L=4 layers."""
    return cfm_jax.Transformer.init(jax.random.key(0), 3, heads=2, mlp_width=5, layers=4, dtype=jnp.float64)


@pytest.fixture(scope="session")
def small_problem(small_model):
    """(model, x0 (B=2, d=3), non-uniform context n=7)."""
    kx, kz, kw = jax.random.split(jax.random.key(1), 3)
    x0 = jax.random.normal(kx, (2, 3), jnp.float64)
    z = jax.random.normal(kz, (7, 3), jnp.float64)
    w = jax.random.uniform(kw, (7,), jnp.float64, 0.5, 1.5)
    return small_model, x0, cfm_jax.EmpiricalMeasure(z, w / w.sum())


NOTEBOOKS = __import__("pathlib").Path(__file__).resolve().parents[1] / "notebooks"


def pytest_runtest_logreport(report):
    """Name a failing test the moment it fails (the quiet progress line shows only an F, and the
    summary comes at the end of a suite that takes minutes)."""
    if report.failed and not os.environ.get("PYTEST_XDIST_WORKER"):  # once, from the controlling process
        import sys

        when = "" if report.when == "call" else f" (in {report.when})"
        sys.stderr.write(f"\nFAILED {report.nodeid}{when}\n")
        sys.stderr.flush()


def execute_notebook(name: str, workdir) -> tuple[list, str]:
    """Execute ``notebooks/<name>`` afresh (its committed outputs cleared) in ``workdir``; assert no
    cell errored. Returns the list of code-cell outputs and their concatenated text."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    # The kernel inherits the environment: without this it would get the session's Agg backend
    # and display no figure.
    backend = os.environ.pop("MPLBACKEND", None)
    try:
        NotebookClient(
            nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
        ).execute()
    finally:
        if backend is not None:
            os.environ["MPLBACKEND"] = backend
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"], f"{name}: a cell raised"
    return outputs, "".join(o.get("text", "") for o in outputs)


def notebook_images(outputs):
    """The inline PNG outputs of an executed notebook."""
    return [o for o in outputs if o.get("data", {}).get("image/png")]


def printed_intervals(text, prefix):
    """(slope, low, high) of every line starting with ``prefix`` that prints 'slope S ... [L, H]'."""
    out = []
    for ln in text.splitlines():
        if ln.startswith(prefix):
            m = re.search(r"slope ([+-][\d.]+).*?\[([+-][\d.]+), ([+-][\d.]+)\]", ln)
            if m:
                out.append(tuple(float(v) for v in m.groups()))
    return out
