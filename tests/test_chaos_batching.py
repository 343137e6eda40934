"""chaos.map_seeds and seed_batch_size: how a sweep batches its seeds (the whole sweep's equality
across batchings is in test_chaos_programs.py)."""

import equinox as eqx
import jax
import numpy as np
import pytest

from cfm_jax import chaos


def test_map_seeds_equals_a_loop_whatever_the_batching():
    """Every batching (all at once, one at a time, blocks of 2 with a remainder) gives each seed a
    lone seed's numbers; non-array leaves are shared and come back; ``batch_size`` is checked."""
    W = jax.random.normal(jax.random.key(1), (3, 4))
    per_seed = {"a": jax.random.normal(jax.random.key(2), (5, 6, 3)), "name": "shared"}

    def fn(p):
        return {"y": jax.numpy.tanh(p["a"] @ W).sum(0), "name": p["name"]}

    loop = np.stack([np.asarray(fn({"a": per_seed["a"][i], "name": "shared"})["y"]) for i in range(5)])
    for batch_size in (0, 1, 2, None):
        out = eqx.filter_jit(lambda a, b: chaos.map_seeds(fn, {"a": a, "name": "shared"}, batch_size=b))(
            per_seed["a"], batch_size
        )
        assert out["name"] == "shared"
        np.testing.assert_allclose(np.asarray(out["y"]), loop, rtol=1e-6, atol=1e-6, err_msg=str(batch_size))
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="`batch_size` must be an integer >= 0"):
            chaos.map_seeds(fn, per_seed, batch_size=bad)  # pyright: ignore[reportArgumentType]  # bad on purpose


def test_map_seeds_refuses_a_per_seed_without_a_seed_axis():
    """No array (so no number of seeds), a scalar, or arrays of different leading sizes: a ValueError
    naming `per_seed`, whatever the batching (not lax.scan's message, nor one call of ``fn``)."""
    fn = lambda p: 1.0  # noqa: E731
    arrays = {"a": jax.numpy.ones((4, 2)), "b": jax.numpy.ones(3)}
    for per_seed, match in (
        ({"name": "shared"}, "`per_seed` must hold at least one array"),
        ((), "`per_seed` must hold at least one array"),
        (jax.numpy.ones(()), r"same leading \(seed\) axis"),
        (arrays, r"same leading \(seed\) axis"),
    ):
        for batch_size in (0, 1, 2):
            with pytest.raises(ValueError, match=match):
                chaos.map_seeds(fn, per_seed, batch_size=batch_size)


def test_seed_batch_size_maps_on_cpus_and_vmaps_on_accelerators():
    """Platform names in any case; an unknown one is refused naming `backend`, not read as an accelerator."""
    assert chaos.seed_batch_size("cpu") == chaos.seed_batch_size("CPU") == 1
    assert chaos.seed_batch_size("gpu") == chaos.seed_batch_size("tpu") == chaos.seed_batch_size("GPU") == 0
    assert chaos.seed_batch_size("cuda") == chaos.seed_batch_size("rocm") == 0
    assert chaos.seed_batch_size() == (1 if jax.default_backend() == "cpu" else 0)
    for bad in ("cpus", "", "xla", 1):
        with pytest.raises(ValueError, match="`backend` must be None or a platform name"):
            chaos.seed_batch_size(bad)  # pyright: ignore[reportArgumentType]  # bad on purpose
