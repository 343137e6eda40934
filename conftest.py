"""Test configuration shared by the library's tests (``tests/``) and the experiments' (``experiments/tests/``).

float64 is enabled for the whole test session (tight tolerances need it); float32 behaviour is
tested by passing ``dtype=jnp.float32`` explicitly. Keep shapes tiny and shared: JAX compiles
once per shape, and the persistent compilation cache (``$CFM_JAX_CACHE_DIR``, else
``$XDG_CACHE_HOME/cfm_jax``, else ``~/.cache/cfm_jax``; the same as the CLI's) lets a second test
run load what the first compiled. Set ``CFM_JAX_CACHE_DIR`` to another folder to start cold.
"""

import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
# The test shapes are tiny, so compiling dominates: skip XLA's expensive backend (LLVM) passes.
# Numerics are unchanged up to round-off, which every tolerance here allows; subprocesses (the CLI,
# the notebooks' kernels) inherit it. JAX_DISABLE_MOST_OPTIMIZATIONS=0 tests fully optimised code.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")

#: XLA flags that only make the tests' programs compile faster: XLA:CPU's older elemental emitters
#: compile them in ~60 % of the time its fusion emitters take (a cold run of test_solve and
#: test_gradients, 184 s -> 111 s), with the same operations. Newer jaxlibs dropped the flag, and XLA
#: aborts the whole process (no exception, no output) on a flag it does not know, so each is applied
#: only where the installed jaxlib accepts it (:func:`known_xla_flags`). ``CFM_JAX_TEST_XLA_FLAGS``
#: replaces the list (space-separated; empty for none).
SPEED_XLA_FLAGS = ("--xla_cpu_use_fusion_emitters=false",)

#: set once the flags are decided, so that pytest-xdist's workers (which inherit the environment) do
#: not probe again; its value is the line the run's header prints
_DECIDED = "CFM_JAX_TEST_XLA_FLAGS_DECIDED"


def known_xla_flags(flags) -> tuple[list[str], list[str]]:
    """``(known, unknown)``: the ``flags`` that the installed jaxlib accepts in ``XLA_FLAGS`` and those
    it does not, each tried in a fresh interpreter (one for all of them when all are known)."""

    def accepted(trial) -> bool:
        probe_env = dict(os.environ, JAX_PLATFORMS="cpu")
        probe_env["XLA_FLAGS"] = " ".join(trial)
        probe = "import jax; jax.devices()"
        return subprocess.run([sys.executable, "-c", probe], env=probe_env, capture_output=True).returncode == 0

    flags = list(flags)
    if not flags or accepted(flags):
        return flags, []
    known = [f for f in flags if accepted([f])]
    return known, [f for f in flags if f not in known]


def _apply_speed_flags() -> None:
    """Add the speed flags the installed jaxlib knows to ``XLA_FLAGS`` (a flag the user set wins) and
    record the header line that says what was applied and what was not."""
    if _DECIDED in os.environ:
        return
    candidates = os.environ.get("CFM_JAX_TEST_XLA_FLAGS")
    wanted = SPEED_XLA_FLAGS if candidates is None else tuple(candidates.split())
    present = os.environ.get("XLA_FLAGS", "")
    wanted = [f for f in wanted if f.split("=")[0] not in present]
    known, unknown = known_xla_flags(wanted)
    if known:
        os.environ["XLA_FLAGS"] = " ".join([present, *known]).strip()
    line = f"test speed settings: XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}"
    if unknown:
        line += f"; not applied, unknown to this jaxlib (the tests run at normal speed): {' '.join(unknown)}"
    os.environ[_DECIDED] = line


_apply_speed_flags()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import cfm_jax  # noqa: E402

cfm_jax.enable_compilation_cache()
# Start the backend now: the session keeps its one CPU device even when a test calls the CLI's
# main() in-process (the CLI otherwise asks for one device per core before JAX starts).
jax.devices()

import pytest  # noqa: E402


def pytest_report_header(config):
    """One line saying which test speed settings apply (and which the installed jaxlib refused)."""
    return os.environ[_DECIDED]


def pytest_sessionstart(session):
    """A quiet run (no header) still says, in one line, that a speed setting could not be applied."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    quiet = session.config.get_verbosity() < 0
    if quiet and reporter is not None and "not applied" in os.environ[_DECIDED]:
        reporter.write_line(os.environ[_DECIDED])


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
