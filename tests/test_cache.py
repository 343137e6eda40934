"""The persistent compilation cache as a user switches it on: a second process compiles nothing
that the first one compiled (the default entry points hold no host callback at top level)."""

import json
import os
import subprocess
import sys
import textwrap

import jax
import pytest
from jax.experimental.compilation_cache import compilation_cache

import cfm_jax

#: a user's script: the README's calls at tiny sizes, defaults everywhere, counting what XLA
#: compiles (a backend compile not preceded by a cache hit) through jax.monitoring
SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp
    from jax import monitoring
    import cfm_jax

    cfm_jax.enable_compilation_cache(sys.argv[1])
    hits, compiled = [0], []

    def on_event(event, **_):
        hits[0] += event == "/jax/compilation_cache/cache_hits"

    def on_duration(event, duration_secs, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            if hits[0]:
                hits[0] -= 1
            else:
                compiled.append(str(kw.get("fun_name")))

    monitoring.register_event_listener(on_event)
    monitoring.register_event_duration_secs_listener(on_duration)
    key_m, key_x, key_z, key_y = jax.random.split(jax.random.PRNGKey(0), 4)
    model = cfm_jax.Transformer.init(key_m, dim=2, heads=1, layers=2)
    x0, y = jax.random.normal(key_x, (3, 2)), jax.random.normal(key_y, (3, 2))
    context = cfm_jax.EmpiricalMeasure(jax.random.normal(key_z, (5, 2)))
    cfm_jax.forward(model, x0, context).x1.block_until_ready()
    cfm_jax.loss_and_grad(model, x0, context, y)
    jax.grad(lambda m: jnp.sum(cfm_jax.forward(m, x0, context).x1))(model)
    cfm_jax.gaussian_flow(model, x0, cfm_jax.GaussianMeasure(jnp.zeros(2), jnp.eye(2)))
    print(json.dumps(compiled))
    """
)


def _compiled_by_a_fresh_process(cache) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(cache)], capture_output=True, text=True, env=env, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow  # two fresh interpreters compiling the README's example
def test_a_second_process_compiles_nothing(tmp_path):
    first = _compiled_by_a_fresh_process(tmp_path / "cache")
    assert "jit(forward)" in first and "jit(loss_and_grad)" in first  # the count sees the entry points
    assert _compiled_by_a_fresh_process(tmp_path / "cache") == []


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
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    a, b = tmp_path / "a", tmp_path / "b"
    out = subprocess.run(
        [sys.executable, "-c", SWITCH, str(a), str(b)], capture_output=True, text=True, env=env, check=True
    ).stdout
    in_a, in_b = json.loads(out.strip().splitlines()[-1])
    assert in_a == ["jit_first"]
    assert in_b == ["jit_second", "jit_third"]
