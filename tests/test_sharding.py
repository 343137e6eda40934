"""Sharded (4 forced host devices) vs single-device forward solves and gradients; backend-aware attention blocks."""

import os
import subprocess
import sys
import textwrap

import pytest

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
    assert len(sol.context.points.sharding.device_set) == 4, sol.context.points.sharding
    np.testing.assert_allclose(sol.x1, ref.x1, atol=1e-13)
    np.testing.assert_allclose(sol.context.points, ref.context.points, atol=1e-13)
    # the hand-adjoint gradient through the same partitioned program, gathered to the host
    y = jax.random.normal(jax.random.key(2), (8, 4))
    loss_ref, g_ref = cfm_jax.loss_and_grad(jax.device_put(model, jax.devices()[0]), x0, ctx, y)
    ms, ys = replicate((model, y))
    loss, g = gather(jax.jit(cfm_jax.loss_and_grad)(ms, xs, cs, ys))
    assert isinstance(loss, np.ndarray) and isinstance(g.Q, np.ndarray)
    np.testing.assert_allclose(loss, loss_ref, rtol=1e-13)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(g_ref)):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)
    # where everything lives: context rows split in order along "data", x0 split when B divides
    from jax.sharding import PartitionSpec as P
    devs = jax.devices()
    def placement(a):
        return sorted((devs.index(s.device), s.index[0].start or 0, s.data.shape) for s in a.addressable_shards)
    assert cs.points.sharding.spec == P("data", None) and cs.weights.sharding.spec == P("data")
    assert placement(cs.points) == [(i, 6 * i, (6, 4)) for i in range(4)]
    assert placement(cs.weights) == [(i, 6 * i, (6,)) for i in range(4)]
    for i, s in enumerate(sorted(cs.points.addressable_shards, key=lambda s: devs.index(s.device))):
        np.testing.assert_array_equal(s.data, np.asarray(ctx.points)[6 * i: 6 * i + 6])
    assert xs.sharding.spec == P("data", None) and placement(xs) == [(i, 2 * i, (2, 4)) for i in range(4)]
    x3, _ = cfm_jax.shard_inputs(x0[:3], ctx)  # B = 3: replicated
    assert x3.sharding.spec == P() and [s.data.shape for s in x3.addressable_shards] == [(3, 4)] * 4
    x1, _ = cfm_jax.shard_inputs(x0[0], ctx)  # one token (d,): replicated
    assert x1.sharding.spec == P()
    two = cfm_jax.context_mesh(devs[2:])
    _, c2 = cfm_jax.shard_inputs(x0, ctx, two)
    assert placement(c2.points) == [(2, 0, (12, 4)), (3, 12, (12, 4))]
    try:
        cfm_jax.shard_inputs(x0, ctx.points[:23])
    except ValueError as e:
        assert "divisible" in str(e)
    else:
        raise AssertionError("no error for n not divisible by the device count")
    print("SHARDED_OK")
    """
)


@pytest.mark.slow  # the programs again for a second device layout
def test_sharded_forward_and_gradient_match_single_device():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "SHARDED_OK" in out.stdout


def test_context_mesh_needs_devices():
    import jax
    import pytest

    import cfm_jax

    for bad in ([], (), ["cpu"]):
        with pytest.raises(ValueError, match="`devices`"):
            cfm_jax.context_mesh(bad)
    assert cfm_jax.context_mesh(jax.devices()[:1]).devices.size == 1
