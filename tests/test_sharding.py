"""Sharded (4 forced host devices) vs single-device forward solves and gradients; backend-aware attention blocks."""

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    import cfm_jax
    from cfm_jax._sharding import gather, replicate
    assert jax.device_count() == 4, jax.devices()
    model = cfm_jax.Transformer.init(jax.random.key(0), 4, heads=2, mlp_width=6, layers=3, dtype=jnp.float64)
    kx, kz, kw = jax.random.split(jax.random.key(1), 3)
    x0 = jax.random.normal(kx, (8, 4))
    w = jax.random.uniform(kw, (24,), minval=0.5, maxval=1.5)
    ctx = cfm_jax.EmpiricalMeasure(jax.random.normal(kz, (24, 4)), w / w.sum())
    ref = cfm_jax.forward(jax.device_put(model, jax.devices()[0]), x0, ctx)
    xs, cs = cfm_jax.shard_inputs(x0, ctx)
    assert len(cs.points.sharding.device_set) == 4
    sol = jax.jit(cfm_jax.forward)(model, xs, cs)
    assert len(sol.z1.sharding.device_set) == 4, sol.z1.sharding
    np.testing.assert_allclose(sol.x1, ref.x1, atol=1e-13)
    np.testing.assert_allclose(sol.z1, ref.z1, atol=1e-13)
    # the hand-adjoint gradient through the same partitioned program, gathered to the host
    y = jax.random.normal(jax.random.key(2), (8, 4))
    loss_ref, g_ref = cfm_jax.loss_and_grad(jax.device_put(model, jax.devices()[0]), x0, ctx, y)
    ms, ys = replicate((model, y))
    loss, g = gather(jax.jit(cfm_jax.value_and_grad)(ms, xs, cs, ys))
    assert isinstance(loss, np.ndarray) and isinstance(g.Q, np.ndarray)
    np.testing.assert_allclose(loss, loss_ref, rtol=1e-13)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(g_ref)):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)
    try:
        cfm_jax.shard_inputs(x0, ctx.points[:23])
    except ValueError as e:
        assert "divisible" in str(e)
    else:
        raise AssertionError("no error for n not divisible by the device count")
    print("SHARDED_OK")
    """
)


def test_sharded_forward_and_gradient_match_single_device():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "SHARDED_OK" in out.stdout
