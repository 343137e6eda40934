"""Flat draws: the same numbers as ``jax.random``'s, and programs whose counters are 1-D."""

import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import _random

SHAPES = [(3,), (5, 2), (2, 3, 4), (4, 1, 3, 3), (2, 1, 2, 3, 2)]

#: XLA:CPU compiles with its fusion emitters (its default) in this process. The suite turns them off
#: to compile faster (conftest); the older emitters may round an element of one fused program a few
#: units in the last place away from the same element of another (up to 3 seen: the inverse error
#: function's polynomial, evaluated with and without fused multiply-adds).
DEFAULT_EMITTERS = "xla_cpu_use_fusion_emitters=false" not in os.environ.get("XLA_FLAGS", "")


def assert_same_numbers(got, want, err_msg=""):
    """Bit for bit under XLA's default CPU emitters, within 4 units in the last place under the
    suite's (:func:`test_the_same_numbers_bit_for_bit_with_xlas_default_emitters` runs them exact)."""
    assert got.shape == want.shape and got.dtype == want.dtype, err_msg
    if DEFAULT_EMITTERS:
        np.testing.assert_array_equal(got, want, err_msg=err_msg)
    else:
        np.testing.assert_array_max_ulp(np.asarray(got), np.asarray(want), maxulp=4)


@pytest.mark.parametrize("partitionable", [True, False])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_same_numbers_as_jax_random(shape, dtype, partitionable):
    key = jax.random.key(7)
    with jax.threefry_partitionable(partitionable):
        np.testing.assert_array_equal(_random.normal(key, shape, dtype), jax.random.normal(key, shape, dtype))
        np.testing.assert_array_equal(
            _random.uniform(key, shape, dtype, -3.0, 0.5), jax.random.uniform(key, shape, dtype, -3.0, 0.5)
        )
        # under jit and vmap over keys too (the sweeps draw per seed)
        keys = jax.random.split(key, 3)
        got = jax.jit(jax.vmap(lambda k: _random.normal(k, shape, dtype)))(keys)
        np.testing.assert_array_equal(got, jnp.stack([jax.random.normal(k, shape, dtype) for k in keys]))


def test_other_key_implementations_and_broadcast_bounds_draw_as_jax_random():
    key = jax.random.key(3, impl="rbg")
    shape = (2, 3, 4)
    np.testing.assert_array_equal(_random.normal(key, shape), jax.random.normal(key, shape))
    lo = jnp.arange(4.0)  # bounds broadcast per element: not drawn flat
    k = jax.random.key(1)
    np.testing.assert_array_equal(
        _random.uniform(k, shape, None, lo, lo + 1), jax.random.uniform(k, shape, None, lo, lo + 1)
    )


def _counter_ranks(fn, *args) -> set[int]:
    """The ranks of the unsigned iotas (threefry's counters) in ``fn``'s lowered program."""
    text = jax.jit(fn).lower(*args).as_text()
    return {s.count("x") for s in re.findall(r"stablehlo\.iota dim = \d+ : tensor<([0-9x]+)xui(?:32|64)>", text)}


def test_model_weights_are_drawn_with_flat_counters():
    """Transformer.init's (L, H, d, d) weights: no counter of rank >= 2 (the slow-compiling form)."""
    init = lambda k: cfm_jax.Transformer.init(k, 3, heads=2, mlp_width=4, layers=2)  # noqa: E731
    ranks = _counter_ranks(init, jax.random.key(0))
    assert ranks and max(ranks) == 0, ranks  # "1024xui32" has no "x" before the dtype: rank 1
    # the check itself sees the multi-axis form
    assert max(_counter_ranks(lambda k: jax.random.normal(k, (2, 2, 3, 3)), jax.random.key(0))) >= 1


NORMALS_SHAPES = [(3,), (2, 3, 4), (5, 2), (1,), (0, 2), (4, 1, 3, 3)]


@pytest.mark.parametrize("partitionable", [True, False])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_normals_are_jax_randoms_numbers(dtype, partitionable):
    keys = jax.random.split(jax.random.key(11), len(NORMALS_SHAPES))
    with jax.threefry_partitionable(partitionable):
        want = [jax.random.normal(k, s, dtype) for k, s in zip(keys, NORMALS_SHAPES)]
        for got, ref in zip(_random.normals(keys, NORMALS_SHAPES, dtype), want, strict=True):
            assert_same_numbers(got, ref)
        # under jit and vmap over a seed axis of keys (the sweeps draw per seed)
        seeds = jax.random.split(jax.random.key(2), 3)
        many = jax.jit(jax.vmap(lambda k: _random.normals(jax.random.split(k, 2), [(2, 3, 2), (7,)], dtype)))(seeds)
        for i, s in enumerate([(2, 3, 2), (7,)]):
            ref = jnp.stack([jax.random.normal(jax.random.split(k, 2)[i], s, dtype) for k in seeds])
            assert_same_numbers(many[i], ref)


def test_normals_checks_its_keys_and_falls_back_for_other_key_implementations():
    with pytest.raises(ValueError, match="`keys` must be a key array of shape \\(2,\\)"):
        _random.normals(jax.random.split(jax.random.key(0), 3), [(2,), (3,)])
    keys = jax.random.split(jax.random.key(0, impl="rbg"), 2)
    for got, k, s in zip(_random.normals(keys, [(2, 3), (4,)]), keys, [(2, 3), (4,)], strict=True):
        np.testing.assert_array_equal(got, jax.random.normal(k, s))


@pytest.mark.parametrize("partitionable", [True, False])
def test_legacy_keys_draw_the_same_numbers_as_typed_keys(partitionable):
    """``jax.random.PRNGKey`` (raw uint32 key data) is a JAX key: every draw, the batched one included,
    gives the numbers of ``jax.random.key`` with the same seed, eagerly, under jit and under vmap."""
    legacy, typed = jax.random.PRNGKey(5), jax.random.key(5)
    shapes = [(2, 3, 4), (3,), (2, 2)]
    with jax.threefry_partitionable(partitionable):
        for got, want in zip(
            _random.normals(jax.random.split(legacy, 3), shapes),
            _random.normals(jax.random.split(typed, 3), shapes),
            strict=True,
        ):
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(_random.normal(legacy, (2, 3, 4)), _random.normal(typed, (2, 3, 4)))
        np.testing.assert_array_equal(_random.uniform(legacy, (5,)), _random.uniform(typed, (5,)))
        init = lambda k: cfm_jax.Transformer.init(k, dim=3, heads=2, mlp_width=4, layers=2)
        # each mode against itself: a compiled scaling may round differently from an eager one
        for got, want in ((init(legacy), init(typed)), (jax.jit(init)(legacy), jax.jit(init)(typed))):
            for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
                np.testing.assert_array_equal(a, b)
        batched = jax.vmap(init)(jax.random.split(legacy, 2))
        for i, k in enumerate(jax.random.split(typed, 2)):
            np.testing.assert_array_equal(batched.Q[i], init(k).Q)


@pytest.mark.parametrize(
    ("bad", "batch", "got"),
    [
        (0, False, "got 0"),  # a seed, not a key
        (np.zeros(2), False, "dtype float64 and shape \\(2,\\)"),
        (np.zeros(3, np.uint32), False, "dtype uint32 and shape \\(3,\\)"),
        (jax.random.split(jax.random.key(0), 2), False, "key array of shape \\(2,\\)"),
        (jax.random.PRNGKey(0), True, "dtype uint32 and shape \\(2,\\)"),  # one legacy key, a batch expected
        (jax.random.key(0), True, "key array of shape \\(\\)"),
    ],
)
def test_as_key_refuses_what_is_no_key_naming_the_argument(bad, batch, got):
    with pytest.raises(TypeError, match=f"^`my_key` must be .*{got}"):
        _random.as_key(bad, "my_key", batch=batch)


def test_as_key_passes_typed_keys_of_any_implementation_and_wraps_legacy_ones():
    rbg = jax.random.key(1, impl="rbg")
    assert _random.as_key(rbg) is rbg
    wrapped = _random.as_key(jax.random.PRNGKey(1))
    assert jnp.issubdtype(wrapped.dtype, jax.dtypes.prng_key)
    np.testing.assert_array_equal(jax.random.key_data(wrapped), jax.random.key_data(jax.random.key(1)))
    # under vmap the per-call shapes are checked
    assert jax.vmap(_random.as_key)(jax.random.split(jax.random.PRNGKey(0), 3)).shape == (3,)


HASHES = ("random_split", "random_fold_in", "random_bits", "threefry2x32")


def _threefry_calls(fn, *args) -> int:
    """How many threefry hashes ``fn`` computes (each a kernel XLA compiles): the equations of its
    jaxpr that hash (key splits, random bits, direct ``threefry2x32``), those of the sub-jaxprs it
    calls counted at every call."""

    def count(jaxpr) -> int:
        n = 0
        for eqn in jaxpr.eqns:
            n += eqn.primitive.name in HASHES
            for p in eqn.params.values():
                for sub in p if isinstance(p, tuple | list) else (p,):
                    if isinstance(sub, jax.extend.core.ClosedJaxpr):
                        n += count(sub.jaxpr)
                    elif isinstance(sub, jax.extend.core.Jaxpr):
                        n += count(sub)
        return n

    return count(jax.make_jaxpr(fn)(*args).jaxpr)


def test_model_weights_are_drawn_in_one_kernel_with_the_same_numbers():
    """Transformer.init: one hash for the key split, one for all weights (six before: one per
    draw), and jax.random.normal's numbers."""
    key = jax.random.key(5)
    L, H, d, m = 2, 2, 3, 4
    init = lambda k: cfm_jax.Transformer.init(k, d, heads=H, mlp_width=m, layers=L, qk_scale=0.7)  # noqa: E731
    assert _threefry_calls(init, key) == 2
    model, (kq, kk, kv, k1, k2) = init(key), jax.random.split(key, 5)
    expected = {
        "Q": 0.7 / d**0.5 * jax.random.normal(kq, (L, H, d, d)),
        "K": 0.7 / d**0.5 * jax.random.normal(kk, (L, H, d, d)),
        "V": 1 / (H * d) ** 0.5 * jax.random.normal(kv, (L, H, d, d)),
        "W1": 1 / d**0.5 * jax.random.normal(k1, (L, m, d)),
        "W2": 1 / m**0.5 * jax.random.normal(k2, (L, d, m)),
    }
    for name, want in expected.items():
        assert_same_numbers(model.stacked_params()[name], want, err_msg=name)
    no_mlp = cfm_jax.Transformer.init(key, d, heads=H, layers=L)  # three draws, the same Q, K, V
    np.testing.assert_array_equal(no_mlp.V, model.V)


def test_float64_without_x64_draws_float32_as_jax_random_does():
    """Without x64 a float64 request is float32 (jax.random's numbers, its warning), not an error
    from inside the draw; Transformer.init(dtype=float64) works there."""
    with jax.enable_x64(False):
        keys = jax.random.split(jax.random.key(0), 2)
        with pytest.warns(UserWarning, match="float64"):
            expected = [jax.random.normal(k, s, jnp.float64) for k, s in zip(keys, [(3,), (2, 2)])]
        drawn = _random.normals(keys, [(3,), (2, 2)], jnp.float64)
        for a, b in zip(drawn, expected, strict=True):
            assert a.dtype == jnp.float32
            np.testing.assert_array_equal(a, b)
        model = cfm_jax.Transformer.init(jax.random.key(1), 3, layers=2, dtype=jnp.float64)
        assert model.Q.dtype == jnp.float32


@pytest.mark.slow
def test_the_same_numbers_bit_for_bit_with_xlas_default_emitters():
    """The tests that compare draws through :func:`assert_same_numbers`, in a process compiling with
    XLA's default CPU emitters (the library's users' setting), where they compare bit for bit."""
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "xla_cpu_use_fusion_emitters" not in f]
    # no speed flags in the child (conftest): XLA's defaults, whatever this jaxlib's flags are
    env = dict(os.environ, XLA_FLAGS=" ".join(flags), CFM_JAX_TEST_XLA_FLAGS="")
    env.pop("CFM_JAX_TEST_XLA_FLAGS_DECIDED", None)
    selected = "jax_randoms_numbers or drawn_in_one_kernel"
    cmd = [sys.executable, "-m", "pytest", __file__, "-q", "-n", "0", "-p", "no:cacheprovider", "-m", "not slow"]
    proc = subprocess.run(
        [*cmd, "-k", selected], env=env, capture_output=True, text=True, cwd=Path(__file__).parents[1]
    )
    assert proc.returncode == 0 and re.search(r"\b5 passed\b", proc.stdout), proc.stdout[-3000:]
