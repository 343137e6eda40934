"""The environment the library and its tests stand on.

- The tests' speed settings (``conftest.py``) are applied only where the installed jaxlib knows them:
  XLA aborts a process on an unknown flag in ``XLA_FLAGS``, with no exception and no output.
- The library uses JAX, equinox and diffrax through their public API only: no private module, no
  private attribute, no text of another library's message is matched (a test reads every source
  file for them). The one exception is a logger's name, the logger of the module that runs a pure
  callback, whose log of a failed check the library turns into the check's one line; its test fails,
  naming the installed versions, the day JAX logs elsewhere.
"""

import logging
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import diffrax
import equinox as eqx
import jax
import pytest

from cfm_jax import _validation

ROOT = Path(__file__).parents[1]
VERSIONS = f"JAX {jax.__version__} (jaxlib {version('jaxlib')}), diffrax {diffrax.__version__}"


def _relies(internal: str, use: str) -> str:
    return f"{VERSIONS} changed {internal}, which cfm_jax/_validation.py relies on to {use}"


def test_an_xla_flag_the_jaxlib_does_not_know_does_not_abort_the_suite():
    """A speed flag unknown to the installed jaxlib is left out with one line; the tests still run."""
    env = dict(os.environ, CFM_JAX_TEST_XLA_FLAGS="--xla_cfm_no_such_flag=true")
    env.pop("CFM_JAX_TEST_XLA_FLAGS_DECIDED", None)  # decide afresh in the child
    env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split() if "fusion_emitters" not in f)
    test = "tests/test_qmc.py::test_each_point_is_uniform_on_the_cube"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", test, "-q", "-n", "0", "-p", "no:cacheprovider"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and re.search(r"\b1 passed\b", out), out[-3000:]
    said = [line for line in out.splitlines() if "not applied" in line]
    assert len(said) == 1 and "--xla_cfm_no_such_flag=true" in said[0], out[-3000:]


#: what no source file of the library may hold: JAX's private modules, the private attributes of
#: functions and of equinox's enumerations, and another library's message or log text (an error's
#: text searched, a log record's message compared)
PRIVATE = re.compile(
    r"jax\._src|_name_to_item|__wrapped__|\._value\b|get_opaque_trace_state|Checkify does not support"
    r"|\bin str\(|getMessage\(\)|forward-mode\" not in"
)


def test_the_library_names_no_private_name_of_jax_equinox_or_diffrax():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "cfm_jax").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert not found, "private names of JAX, equinox or diffrax (use their public API):\n" + "\n".join(found)


def test_a_failed_host_callback_is_logged_by_the_logger_the_library_filters(caplog):
    """JAX logs a host callback that raised (a failed ``eqx.error_if`` under a plain ``jax.jit``) and
    then raises the same error: the library makes that log the check's one line, on the logger of the
    module defining ``jax.pure_callback``."""
    logger = logging.getLogger(jax.pure_callback.__module__)
    f = jax.jit(lambda x: eqx.error_if(x, x < 0, "negative"))
    filters = logger.filters[:]
    logger.filters[:] = []  # the library's filter off: the record reaches caplog
    try:
        with caplog.at_level("DEBUG"), pytest.raises(Exception, match="negative"):
            jax.block_until_ready(f(-1.0))
    finally:
        logger.filters[:] = filters
    logged = [r for r in caplog.records if r.name == logger.name and r.exc_info]
    assert any("negative" in str(r.exc_info[1]) for r in logged if r.exc_info), _relies(
        f"the log of a failed host callback with its error (no longer from the logger {logger.name!r})",
        "make JAX's log of a failed check under a plain jax.jit the check's one line",
    )
    assert any(isinstance(f, _validation._CheckSentence) for f in filters)
