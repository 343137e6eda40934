"""Test configuration shared by the library's tests (``tests/``) and the experiments' (``experiments/tests/``).

float64 is enabled for the whole test session (tight tolerances need it); float32 behaviour is
tested by passing ``dtype=jnp.float32`` explicitly. Keep shapes tiny and shared: JAX compiles
once per shape, and the persistent compilation cache (``$CFM_JAX_CACHE_DIR``, else
``$XDG_CACHE_HOME/cfm_jax``, else ``~/.cache/cfm_jax``; the same as the CLI's) lets a second test
run load what the first compiled. Set ``CFM_JAX_CACHE_DIR`` to another folder to start cold.
"""

import os
from pathlib import Path

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

import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _drop_compiled_programs():
    """Drop JAX's compiled programs after each test module. A worker runs hundreds of modules, and
    every CPU executable keeps its JIT code mapped: tens of thousands of mappings by the end of a run,
    against the kernel's limit of 65530 (vm.max_map_count), past which XLA aborts the worker."""
    yield
    jax.clear_caches()


def pytest_runtest_logreport(report):
    """Name a failing test the moment it fails (the quiet progress line shows only an F, and the
    summary comes at the end of a suite that takes minutes)."""
    if report.failed and not os.environ.get("PYTEST_XDIST_WORKER"):  # once, from the controlling process
        import sys

        when = "" if report.when == "call" else f" (in {report.when})"
        sys.stderr.write(f"\nFAILED {report.nodeid}{when}\n")
        sys.stderr.flush()


def execute_notebook(path, workdir) -> tuple[list, str]:
    """Execute the notebook ``path`` afresh (its committed outputs cleared) in ``workdir``; assert no
    cell errored. Returns the list of code-cell outputs and their concatenated text."""
    import nbformat
    from nbclient import NotebookClient

    name = Path(path).name
    nb = nbformat.read(path, as_version=4)
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


@pytest.fixture
def notebook(tmp_path):
    """``notebook(path)`` executes that notebook afresh in a temporary folder (:func:`execute_notebook`):
    ``(outputs, text, images)``, the code cells' outputs, their text and their inline PNGs."""

    def run(path):
        outputs, text = execute_notebook(path, tmp_path)
        return outputs, text, notebook_images(outputs)

    return run
