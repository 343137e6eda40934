"""Compilation: the cache folder's rule, the persistent cache as a user switches it on (a second
process compiles nothing that the first one compiled: the default entry points hold no host callback
at top level), and the recorder's two counts (programs lowered; programs compiled, not loaded)."""

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import monitoring
from jax.experimental.compilation_cache import compilation_cache

import cfm_jax
from cfm_jax._compilation import _BACKEND, _CACHE_HIT, _LOWERED


def _fresh_env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}


def _salted(name: str):
    """A jitted function named ``name`` whose program no cache holds (a constant of this process)."""
    salt = float(os.getpid() % 997) + 1e-9 * (time.time_ns() % 10**9)

    def body(x):
        return jnp.sin(x) * 2.0 + salt

    body.__name__ = name
    return jax.jit(body)


def test_the_cache_folder_rule(monkeypatch, tmp_path):
    monkeypatch.delenv(cfm_jax.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cfm_jax.default_cache_dir() == tmp_path / "xdg" / "cfm_jax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cfm_jax.default_cache_dir() == Path.home() / ".cache" / "cfm_jax"
    monkeypatch.setenv("CFM_JAX_CACHE_DIR", str(tmp_path / "mine"))  # the name the docs, the help and CI use
    assert cfm_jax.default_cache_dir() == tmp_path / "mine"
    assert os.environ[cfm_jax.CACHE_ENV] == str(tmp_path / "mine")
    monkeypatch.setenv(cfm_jax.CACHE_ENV, "~/elsewhere")
    assert cfm_jax.default_cache_dir() == Path.home() / "elsewhere"


def test_a_new_program_is_lowered_and_compiled_once():
    """A fresh jitted function: one program lowered and compiled (no cache holds it); called again
    at the same shape nothing; at a new shape one more; lowered ahead of time, lowered only. Recorders
    nest, each counting its block."""
    f = _salted("fresh")
    heard = []
    with cfm_jax.CompileRecorder() as outer:
        with cfm_jax.CompileRecorder(on_event=lambda *e: heard.append(e)) as rec:
            f(np.ones(3)).block_until_ready()  # NumPy inputs: no eager JAX op builds a program of its own
        assert (rec.lowered, rec.compiled, rec.cache_loads) == (1, 1, 0), rec
        assert rec.lowered_names == rec.compiled_names == ["jit(fresh)"]
        assert heard == [("lowered", "jit(fresh)"), ("compiled", "jit(fresh)")]
        assert rec.compile_seconds > 0 and rec.trace_seconds > 0 and rec.load_seconds == 0
        assert rec.largest_seconds == rec.compile_seconds and rec.largest_name == "jit(fresh)"
        with cfm_jax.CompileRecorder() as again:
            f(np.full(3, 2.0)).block_until_ready()  # same shape: in memory
        assert (again.lowered, again.compiled, again.cache_loads) == (0, 0, 0), again
        f(np.ones(5)).block_until_ready()  # a new shape: a new program, counted by the outer only
        f.lower(np.ones(6))  # lowered ahead of time, not compiled
    assert (outer.lowered, outer.compiled) == (3, 2), outer
    assert (rec.lowered, rec.compiled) == (1, 1)  # its block is over
    with rec:  # entered again: it adds to its counts
        _salted("later")(np.ones(2)).block_until_ready()
    assert rec.compiled_names == ["jit(fresh)", "jit(later)"]


def test_a_recorder_refuses_to_record_twice_at_once_and_names_a_bad_callback():
    rec = cfm_jax.CompileRecorder()
    with rec:
        with pytest.raises(RuntimeError, match="already recording"):
            rec.__enter__()
    with pytest.raises(TypeError, match="`on_event`"):
        cfm_jax.CompileRecorder(on_event=3)  # pyright: ignore[reportArgumentType]


def test_the_largest_compilation_is_recorded_with_its_name():
    """Three compilations reported as JAX reports them: the record keeps the longest one and its
    function, whatever the order they come in."""
    with cfm_jax.CompileRecorder() as rec:
        for name, seconds in (("first", 0.25), ("longest", 2.0), ("last", 1.0)):
            monitoring.record_event_duration_secs(_BACKEND, seconds, fun_name=name)
    assert rec.compiled == 3 and rec.compiled_names == ["first", "longest", "last"]
    assert rec.largest_seconds == 2.0 and rec.largest_name == "longest" and rec.compile_seconds == 3.25


def test_a_cache_hit_marks_its_own_threads_program_only():
    """JAX reports a cache hit, then the end of the backend step, on the thread building the
    program: a hit on one thread does not make another thread's compilation a load."""
    hit, compiled_here = threading.Event(), threading.Event()

    def loader():
        monitoring.record_event(_CACHE_HIT)
        hit.set()
        compiled_here.wait(60)
        monitoring.record_event_duration_secs(_BACKEND, 0.5, fun_name="loaded")

    with cfm_jax.CompileRecorder() as rec:
        thread = threading.Thread(target=loader)
        thread.start()
        assert hit.wait(60)
        monitoring.record_event_duration_secs(_LOWERED, 0.1, fun_name="built")
        monitoring.record_event_duration_secs(_BACKEND, 1.0, fun_name="built")
        compiled_here.set()
        thread.join(60)
    assert rec.compiled_names == ["built"] and rec.compile_seconds == 1.0
    assert rec.cache_loads == 1 and rec.load_seconds == 0.5
    assert rec.lowered_names == ["built"]


def test_a_cache_hit_marks_one_program_only():
    """A cache hit makes the program whose backend step ends next a load, and only that one: the
    thread's next program, built by XLA, is counted as compiled (a hit left pending would make every
    later program of the thread a load)."""
    with cfm_jax.CompileRecorder() as rec:
        monitoring.record_event_duration_secs(_LOWERED, 0.1, fun_name="cached")
        monitoring.record_event(_CACHE_HIT)
        monitoring.record_event_duration_secs(_BACKEND, 0.5, fun_name="cached")
        for name in ("next", "after"):
            monitoring.record_event_duration_secs(_LOWERED, 0.1, fun_name=name)
            monitoring.record_event_duration_secs(_BACKEND, 1.0, fun_name=name)
    assert rec.lowered_names == ["cached", "next", "after"]
    assert (rec.cache_loads, rec.load_seconds) == (1, 0.5)
    assert rec.compiled_names == ["next", "after"] and rec.compile_seconds == 2.0


#: one new program in a fresh process on the cache folder argv[1]: what the recorder saw
ONE_PROGRAM = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    import cfm_jax

    cfm_jax.enable_compilation_cache(sys.argv[1])
    stages = []
    with cfm_jax.CompileRecorder(on_event=lambda stage, name: stages.append(stage)) as rec:
        jax.jit(lambda x: jnp.cos(x) * 3.0 + 0.25)(np.ones(4)).block_until_ready()
    print(json.dumps([rec.lowered, rec.compiled, rec.cache_loads, stages]))
    """
)


def test_a_second_process_lowers_the_program_and_loads_it(tmp_path):
    """On one cache folder: the first process lowers and compiles the program, the second lowers it
    (tracing is per process) and loads it, compiling nothing."""

    def fresh():
        out = subprocess.run(
            [sys.executable, "-c", ONE_PROGRAM, str(tmp_path / "cache")],
            capture_output=True,
            text=True,
            env=_fresh_env(),
            check=True,
        ).stdout
        return json.loads(out.strip().splitlines()[-1])

    assert fresh() == [1, 1, 0, ["lowered", "compiled"]]
    assert fresh() == [1, 0, 1, ["lowered", "loaded"]]


#: a user's script: the README's calls at tiny sizes, defaults everywhere (a gradient of its own in
#: ``cfm_jax.compiled``: under a bare ``jax.grad`` the checks are host callbacks); what was lowered
#: and what XLA compiled
SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp
    import cfm_jax

    cfm_jax.enable_compilation_cache(sys.argv[1])
    with cfm_jax.CompileRecorder() as rec:
        key_m, key_x, key_z, key_y = jax.random.split(jax.random.PRNGKey(0), 4)
        model = cfm_jax.Transformer.init(key_m, dim=2, heads=1, layers=2)
        x0, y = jax.random.normal(key_x, (3, 2)), jax.random.normal(key_y, (3, 2))
        context = cfm_jax.EmpiricalMeasure(jax.random.normal(key_z, (5, 2)))
        cfm_jax.forward(model, x0, context).x1.block_until_ready()
        cfm_jax.loss_and_grad(model, x0, context, y)
        cfm_jax.compiled(jax.grad(lambda m: jnp.sum(cfm_jax.forward(m, x0, context).x1)))(model)
        cfm_jax.forward(model, x0, cfm_jax.GaussianMeasure(jnp.zeros(2), jnp.eye(2)))
    print(json.dumps([rec.lowered_names, rec.compiled_names]))
    """
)


def _built_by_a_fresh_process(cache) -> tuple[list[str], list[str]]:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(cache)], capture_output=True, text=True, env=_fresh_env(), check=True
    ).stdout
    lowered, compiled = json.loads(out.strip().splitlines()[-1])
    return lowered, compiled


@pytest.mark.slow  # two fresh interpreters compiling the README's example
def test_a_second_process_compiles_nothing(tmp_path):
    lowered, first = _built_by_a_fresh_process(tmp_path / "cache")
    assert "jit(forward)" in first and "jit(loss_and_grad)" in first  # the count sees the entry points
    again, second = _built_by_a_fresh_process(tmp_path / "cache")
    assert second == []
    assert sorted(again) == sorted(lowered)  # built again in the new process, every one loaded


def test_enable_compilation_cache_sets_jax_up_and_names_a_bad_path(tmp_path, monkeypatch):
    names = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")
    before = {k: getattr(jax.config, k) for k in names}
    try:
        monkeypatch.setenv("CFM_JAX_CACHE_DIR", str(tmp_path / "env"))
        assert cfm_jax.enable_compilation_cache() == tmp_path / "env"
        assert (tmp_path / "env").is_dir()
        folder = cfm_jax.enable_compilation_cache(tmp_path / "mine")
        assert jax.config.jax_compilation_cache_dir == str(folder)  # pyright: ignore[reportAttributeAccessIssue]
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0  # pyright: ignore[reportAttributeAccessIssue]
        assert jax.config.jax_persistent_cache_min_entry_size_bytes == 0  # pyright: ignore[reportAttributeAccessIssue]
        (tmp_path / "file").write_text("")
        with pytest.raises(ValueError, match="`path`: cannot make the cache folder"):
            cfm_jax.enable_compilation_cache(tmp_path / "file" / "sub")
        with pytest.raises(TypeError, match="`path`"):
            cfm_jax.enable_compilation_cache(3)  # pyright: ignore[reportArgumentType]
    finally:
        for k, v in before.items():
            jax.config.update(k, v)
        compilation_cache.reset_cache()  # JAX reopens the suite's own folder at its next compile


#: a second folder after a first: each program is written to the folder enabled when it is compiled
SWITCH = textwrap.dedent(
    """
    import json, os, sys
    import jax, jax.numpy as jnp
    import cfm_jax

    def first(x):
        return jnp.sin(x) * 3

    def second(x):
        return jnp.cos(x) * 5

    def third(x):
        return x + 1

    a, b = sys.argv[1], sys.argv[2]
    cfm_jax.enable_compilation_cache(a)
    jax.jit(first)(1.0).block_until_ready()
    cfm_jax.enable_compilation_cache(b)
    jax.jit(second)(1.0).block_until_ready()
    cfm_jax.enable_compilation_cache(b)  # the same folder again: kept
    jax.jit(third)(1.0).block_until_ready()
    print(json.dumps([sorted(n.split("-")[0] for n in os.listdir(f)) for f in (a, b)]))
    """
)


def test_a_second_folder_is_used_for_what_is_compiled_after(tmp_path):
    """enable_compilation_cache(B) after A switches JAX's cache to B (JAX keeps the folder it opened
    first unless reset): the program compiled after the switch is in B, not A."""
    a, b = tmp_path / "a", tmp_path / "b"
    out = subprocess.run(
        [sys.executable, "-c", SWITCH, str(a), str(b)], capture_output=True, text=True, env=_fresh_env(), check=True
    ).stdout
    in_a, in_b = json.loads(out.strip().splitlines()[-1])
    assert in_a == ["jit_first"]
    assert in_b == ["jit_second", "jit_third"]
