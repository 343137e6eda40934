"""Memory policies: one validation, and the compiled memory they promise (no execution)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import Backsolve, ContinuousAdjoint, DiscreteAdjoint, Recompute, StoreAll, StoreEvery


def test_segment_steps_per_policy_by_the_strategys_type():
    """Each strategy reads the policy by its type: what it stores (steps per segment; L = 8 layers of
    2 steps) and which policies it refuses, naming ``memory``."""
    L, k = 8, 2
    assert DiscreteAdjoint(memory=StoreAll())._segment_steps(L, k) is None
    assert DiscreteAdjoint(memory=StoreEvery(4))._segment_steps(L, k) == 8
    assert DiscreteAdjoint(memory=StoreEvery(np.int64(4)))._segment_steps(L, k) == 8  # pyright: ignore
    assert DiscreteAdjoint(memory=Recompute())._segment_steps(L, k) == 2
    assert ContinuousAdjoint(memory=StoreEvery(1))._segment_steps(k) == 2
    assert ContinuousAdjoint(memory=Backsolve())._segment_steps(k) is None
    for bad in (StoreEvery(3), StoreEvery(0), Backsolve(), "layers"):
        with pytest.raises(ValueError, match="`memory`"):
            DiscreteAdjoint(memory=bad)._segment_steps(L, k)  # pyright: ignore[reportArgumentType]
    for bad in (StoreAll(), Recompute(), StoreEvery(2), "layers"):
        with pytest.raises(ValueError, match="`memory`"):
            ContinuousAdjoint(memory=bad)._segment_steps(k)  # pyright: ignore[reportArgumentType]


def _temp_bytes(adjoint, L, n=512, d=4):
    model = cfm_jax.Transformer.init(jax.random.key(0), d, heads=1, mlp_width=0, layers=L, dtype=jnp.float32)
    x0 = jnp.ones((2, d), jnp.float32)
    ctx = cfm_jax.EmpiricalMeasure(jax.random.normal(jax.random.key(1), (n, d), jnp.float32))
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def loss(p):
        return jnp.sum(cfm_jax.forward(eqx.combine(p, static), x0, ctx, adjoint=adjoint).x1 ** 2)

    mem = jax.jit(jax.grad(loss)).lower(params).compile().memory_analysis()
    assert mem is not None  # the CPU backend reports it
    return mem.temp_size_in_bytes


def test_recompute_memory_is_independent_of_depth_and_store_all_grows():
    """StoreAll keeps every state (grows with L by one (n + B)·d state per layer); Recompute keeps
    only s = 0 (flat in L); StoreEvery(4) keeps L/4 boundaries plus one recomputed segment."""
    state = (512 + 2) * 4 * 4  # one float32 state of n + B tokens
    store = {L: _temp_bytes(DiscreteAdjoint(), L) for L in (8, 32)}
    recompute = {L: _temp_bytes(DiscreteAdjoint(Recompute()), L) for L in (8, 32)}
    every = _temp_bytes(DiscreteAdjoint(StoreEvery(4)), 32)
    assert store[32] - store[8] >= 24 * state  # 24 more stored states
    assert abs(recompute[32] - recompute[8]) < state
    assert recompute[32] < every < store[32]


def test_continuous_policies_memory_backsolve_is_flat_in_depth():
    """ContinuousAdjoint(StoreEvery(1)) keeps one state per layer boundary (grows with L); Backsolve()
    keeps nothing (flat in L) and so needs less at depth."""
    state = (512 + 2) * 4 * 4
    every = {L: _temp_bytes(ContinuousAdjoint(), L) for L in (8, 32)}
    back = {L: _temp_bytes(ContinuousAdjoint(memory=Backsolve()), L) for L in (8, 32)}
    assert every[32] - every[8] >= 24 * state
    assert abs(back[32] - back[8]) < state
    assert back[32] < every[32]
