"""The environment the library and its tests stand on.

- The tests' speed settings (``conftest.py``) are applied only where the installed jaxlib knows them:
  XLA aborts a process on an unknown flag in ``XLA_FLAGS``, with no exception and no output.
- The value-check path (``cfm_jax/_validation.py``) relies on five things no JAX or diffrax release
  promises. Each has a test here that fails, naming the internal and the installed versions, the day
  a release changes it — so a CI lane on a new JAX says exactly what moved, instead of a user seeing
  a check take the wrong route.
"""

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jaxlib
import pytest
from jax.experimental import checkify

from cfm_jax import _validation

ROOT = Path(__file__).parents[1]
VERSIONS = f"JAX {jax.__version__} (jaxlib {jaxlib.__version__}), diffrax {diffrax.__version__}"


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


def test_a_callers_checkify_is_found_by_its_code_object_on_the_stack():
    seen = []

    def traced(x):
        seen.append(_validation._functional())
        return x

    checkify.checkify(traced)(1.0)
    jax.jit(traced)(1.0)
    assert seen == [True, False], _relies(
        "checkify.checkify(f).__wrapped__.__code__ (no longer on the stack while checkify traces f)",
        "know that a caller's checkify is tracing (its checks are then checkify's own)",
    )


def test_the_top_level_is_the_trace_state_read_on_a_new_thread():
    inside = []
    jax.jit(lambda x: inside.append(_validation._top_level()) or x)(1.0)
    assert _validation._top_level() and inside == [False], _relies(
        "jax.extend.core.get_opaque_trace_state() (its value at top level, read on a new thread at "
        "import, no longer equals the main thread's, or a jit's equals it)",
        "know that nothing is tracing (an entry point then runs its checkified program)",
    )


def test_checkify_refuses_a_batched_while_loop_with_the_text_the_library_matches():
    def loop(x):
        return jax.lax.while_loop(lambda c: c < x, lambda c: c + 1.0, 0.0)

    with pytest.raises(ValueError) as refused:
        checkify.checkify(jax.vmap(loop))(jnp.arange(3.0))
    assert str(refused.value).startswith(_validation._CHECKIFY_UNSUPPORTED), _relies(
        f"checkify's refusal of a vmap of a while loop (no longer begins {_validation._CHECKIFY_UNSUPPORTED!r})",
        "switch an entry point that checkify cannot rewrite to checks as flags",
    )


def test_a_failed_host_callback_is_logged_by_the_logger_the_library_filters(caplog):
    """JAX logs a host callback that raised (a failed ``eqx.error_if`` under a plain ``jax.jit``) and
    then raises the same error: the library drops that log from the one logger JAX uses for it."""
    logger = logging.getLogger("jax._src.callback")
    f = jax.jit(lambda x: eqx.error_if(x, x < 0, "negative"))
    filters = logger.filters[:]
    logger.filters[:] = []  # the library's filter off: the record reaches caplog
    try:
        with caplog.at_level("DEBUG"), pytest.raises(Exception, match="negative"):
            jax.block_until_ready(f(-1.0))
    finally:
        logger.filters[:] = filters
    assert any(
        r.name == "jax._src.callback" and r.getMessage() == "jax.pure_callback failed" for r in caplog.records
    ), _relies(
        "the log of a failed host callback (no longer 'jax.pure_callback failed' from the logger 'jax._src.callback')",
        "drop JAX's duplicate traceback of a failed check under a plain jax.jit",
    )
    assert any(isinstance(f, _validation._RepeatedCheckLog) for f in filters)


def test_diffrax_results_are_enumerated_by_their_class_table():
    items = diffrax.RESULTS._name_to_item
    named = {name: str(diffrax.RESULTS[item]) for name, item in items.items()}
    assert named.get("successful") == "" and "max_steps_reached" in named, _relies(
        "diffrax.RESULTS._name_to_item (equinox Enumeration's table of names to items)",
        "check each way a solve can fail with diffrax's own message (check_solved)",
    )
