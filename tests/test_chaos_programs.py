"""cfm_jax._chaos.programs: the sweep's compiled programs: one per bucket and one for the reference,
counted (a compile counter, not a timer); padding, seed loops and device splits change no number."""

import dataclasses
import os
import subprocess
import sys
import textwrap
from typing import Any

import equinox as eqx
import jax
import numpy as np
import pytest
from _compiles import lowered_programs

from cfm_jax import HeavyTailWarning, chaos

_EXACT: dict[str, Any] = dict(n_ref=32, layers=2, heads=1, mlp_width=4, batch=2, num_probes=3, w1_size=32)
_PROGRAMS = ("jit(reference_program)", "jit(bucket_program)")


@pytest.mark.parametrize("field", ["attention", "control"])
def test_full_reference_deviation_is_exactly_zero(field):
    """n = n_ref: the coupled n-point context *is* the reference, so every deviation is 0 (exactly
    up to float64 round-off: the n-system and the reference are compiled as different programs),
    while n < n_ref is not (an independent n-point sample would fail the first assertion by O(1))."""
    spec = chaos.ChaosSpec(field=field, dim=1, ns=(8, 32), **_EXACT)
    res = chaos.run_seeds(spec, seeds=2)
    quantities = [q for q in chaos.QUANTITIES if q in res]
    assert set(quantities) == (
        {"token", "context", "w1", "adjoint", "grad_phi"} if field == "attention" else {"token", "context", "w1"}
    )
    for q in quantities:
        np.testing.assert_allclose(res[q][:, -1], 0.0, rtol=0, atol=1e-14, err_msg=q)
        assert (res[q][:, 0] > 1e-4).all(), q


@pytest.mark.parametrize(
    "field,dim",
    [pytest.param("attention", 2, marks=pytest.mark.slow), ("control", 1)],  # attention: every quantity's program
)
def test_padded_contexts_equal_unpadded(field, dim):
    """One padded n-system per bucket (zero-weight atoms, n an argument) = one unpadded system per n,
    to round-off; so does the single-seed loop."""
    spec = chaos.ChaosSpec(
        field=field,
        dim=dim,
        ns=(4, 8),
        n_ref=16,
        layers=1,
        heads=1,
        mlp_width=4,
        batch=2,
        num_probes=2,
        w1_size=16,
        relative_epsilon=0.05,
    )
    assert [b.ns for b in chaos.buckets(spec)] == [(4, 8)] and len(chaos.buckets(spec, padded=False)) == 2
    padded = chaos.run_seeds(spec, seeds=2, padded=True)
    plain = chaos.run_seeds(spec, seeds=2, padded=False)
    assert padded.keys() == plain.keys()
    for q in padded:
        np.testing.assert_allclose(padded[q], plain[q], rtol=1e-10, atol=1e-14, err_msg=q)
    if field == "control":  # a loop of single-seed programs (the benchmark's baseline), the same seeds
        rows = [chaos.seed_deviations(spec, k) for k in jax.random.split(jax.random.key(0), 2)]
        assert rows[0].keys() == padded.keys()
        for q in padded:
            loop = np.asarray([np.asarray(r[q]) for r in rows])
            np.testing.assert_allclose(loop, padded[q], rtol=1e-10, atol=1e-14, err_msg=q)


def _compiled(names: list[str]) -> int:
    """How many of the programs ``names`` are the sweep's."""
    return sum(name in _PROGRAMS for name in names)


@pytest.mark.slow  # compiles every bucket's program
def test_programs_are_one_per_bucket_for_every_seed_quantity_and_configuration():
    """The compile counter: a sweep compiles its reference program and one program per bucket, the
    1 + len(chaos.buckets(spec)) programs, and

    - a second quantity measured at the same sizes adds none (it is part of the bucket's program):
      token and context alone compile as many programs as with the adjoint, ∇φ and W1;
    - a second seed adds none; nor a second configuration of the same shapes (other n in the same
      buckets); a second configuration with other model constants adds only its reference program.

    The shapes are this test's own (d = 3, L = 1), so every program is lowered here (counted whether
    or not the persistent cache then serves its binary)."""
    base = chaos.ChaosSpec(field="attention", dim=3, ns=(3, 6, 24), n_ref=24, layers=1, heads=1, mlp_width=2)
    base = dataclasses.replace(base, batch=3, num_probes=2, w1_size=24, relative_epsilon=0.05)
    token_only = dataclasses.replace(base, adjoint=False, w1=False)
    assert [b.ns for b in chaos.buckets(base)] == [b.ns for b in chaos.buckets(token_only)] == [(3, 6), (24,)]
    assert 1 + len(chaos.buckets(base)) == 1 + len(chaos.buckets(token_only)) == 3
    with lowered_programs() as few:
        chaos.run_seeds(token_only, seeds=2)
    with lowered_programs() as every:
        res = chaos.run_seeds(base, seeds=2)
    assert set(res) >= {"token", "context", "adjoint", "grad_phi", "w1"}
    assert _compiled(few) == _compiled(every) == 3, (few, every)
    with lowered_programs() as seed:
        chaos.run_seeds(base, seeds=2, base_seed=7)
    with lowered_programs() as same_shapes:
        chaos.run_seeds(dataclasses.replace(base, ns=(2, 6, 24)), seeds=2)
    assert seed == same_shapes == [], (seed, same_shapes)
    with lowered_programs() as constants:
        chaos.run_seeds(dataclasses.replace(base, qk_scale=0.5, v_scale=2.0), seeds=2)
    assert constants == ["jit(reference_program)"], constants


def test_seed_count_and_base_seed_are_checked():
    spec = chaos.ChaosSpec(ns=(4, 8), n_ref=8)
    for seeds in (0, 8.0, True):
        with pytest.raises(ValueError, match="`seeds` must be an integer >= 1"):
            chaos.run_seeds(spec, seeds=seeds)  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="`base_seed` must be an integer >= 0"):
        chaos.run_seeds(spec, seeds=2, base_seed=-1)
    with pytest.raises(ValueError, match="`devices`"):
        chaos.seed_devices(4, [])
    assert chaos.seed_devices(3) == tuple(jax.local_devices()[:1])  # the test session has one device


_SEEDS_ON_DEVICES = textwrap.dedent(
    """
    import jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    from cfm_jax import HeavyTailWarning, chaos
    devs = jax.local_devices()
    assert len(devs) == 4, devs
    assert chaos.seed_devices(8) == tuple(devs) and chaos.seed_devices(6) == tuple(devs[:3])
    assert chaos.seed_devices(5) == tuple(devs[:1])
    spec = chaos.ChaosSpec(field="attention", dim=1, ns=(4, 8), n_ref=16, layers=1, heads=1, mlp_width=4,
                           batch=2, num_probes=2, w1_size=16)
    split = chaos.run_seeds(spec, 6)  # on 3 devices
    one = chaos.run_seeds(spec, 6, devices=devs[:1])
    assert split.keys() == one.keys() == {"token", "context", "w1", "adjoint", "grad_phi", "floor_token",
                                          "floor_w1", "floor_adjoint", "floor_grad_phi"}, split.keys()
    assert all(v.shape[0] == 6 for v in split.values()) and (one["token"] > 0).all()
    for q in one:
        np.testing.assert_allclose(split[q], one[q], rtol=1e-12, atol=1e-15, err_msg=q)
    print("SEEDS_SPLIT_OK")
    """
)


@pytest.mark.slow  # a second device layout compiles every program again
def test_seeds_split_across_devices_equal_one_device():
    """With 4 (forced host) devices, 8 seeds split across all 4 and 6 seeds across 3; every seed's
    deviations (adjoints and the exact 1-D W1 included) equal the single-device run's to round-off."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-c", _SEEDS_ON_DEVICES], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "SEEDS_SPLIT_OK" in out.stdout


@pytest.mark.slow  # the sweep compiled twice, vmapped and mapped
def test_run_seeds_is_the_same_vmapped_or_mapped():
    """The sweep's seeds vmapped all at once or one at a time: the same numbers
    (adjoints, W1 and floors included) to round-off; a bad ``batch_size`` is named."""
    spec = chaos.ChaosSpec(field="attention", dim=2, ns=(4, 8), n_ref=16, layers=1, batch=2, num_probes=2, w1_size=16)
    runs = [chaos.run_seeds(spec, 3, batch_size=b) for b in (0, 1)]
    assert runs[0].keys() >= {"token", "w1", "adjoint", "floor_token"}
    for other in runs[1:]:
        for q in runs[0]:
            np.testing.assert_allclose(other[q], runs[0][q], rtol=1e-10, atol=1e-14, err_msg=q)
    with pytest.raises(ValueError, match="`batch_size` must be an integer >= 0"):
        chaos.run_seeds(spec, 2, batch_size=-1)


@pytest.mark.parametrize(
    "spec",
    [
        chaos.ChaosSpec(field="control", dim=2, ns=(4, 8), n_ref=16, layers=1, reference="qmc", w1_size=16),
        chaos.ChaosSpec(field="control", dim=2, ns=(4, 8), n_ref=16, layers=1, w1_size=16),
        chaos.ChaosSpec(
            field="attention",
            dim=2,
            ns=(4, 8),
            n_ref=16,
            layers=1,
            heads=1,
            mlp_width=2,
            reference="gaussian",
            mlp_activation="linear",
            w1_size=16,
        ),
    ],
    ids=["control-qmc", "control-sample", "attention-gaussian"],
)
def test_sweep_programs_hold_no_host_callback(spec):
    """The sweep's programs check nothing of the inputs they draw themselves: a value check is a host
    callback, and a program with one is never stored by the persistent compilation cache (a warm
    ``cfm-jax rates`` would compile it again)."""
    from cfm_jax._chaos import programs, references

    keys = jax.random.split(jax.random.key(0), 2)
    key = references.ReferenceKey.of(spec)
    assert "callback" not in programs.reference_program.lower(key, keys, (), 1).as_text()
    shapes = eqx.filter_eval_shape(programs.reference_program, key, keys, (), 1)  # nothing compiled
    is_shape = lambda x: isinstance(x, jax.ShapeDtypeStruct)  # noqa: E731
    inputs, ref, _ = jax.tree.map(
        lambda s: jax.numpy.zeros(s.shape, s.dtype) if is_shape(s) else s, shapes, is_leaf=is_shape
    )
    for bucket in chaos.buckets(spec):
        m = programs.Measure.of(spec, bucket)
        n = np.asarray(bucket.ns[-1], np.int32)
        text = programs.bucket_program.lower(m, inputs, ref, n, np.asarray(0.05), (), 1).as_text()
        assert "callback" not in text, bucket


def test_a_gaussian_sweep_warns_in_the_heavy_tail_regime(monkeypatch):
    """run_seeds against the exact limit warns once when its models' ρ ≥ 1 at the population law (large
    qk_scale), naming the sweep's largest n; a light model sampled at enough points does not warn."""
    import warnings

    import cfm_jax._regime as regime_module

    spec = chaos.ChaosSpec(field="attention", dim=2, ns=(128, 256), n_ref=16, layers=1, heads=1, mlp_width=2)
    spec = dataclasses.replace(spec, reference="gaussian", mlp_activation="linear", w1_size=16, batch=2)
    spec = dataclasses.replace(spec, adjoint=False, w1=False)
    monkeypatch.setattr(regime_module, "_WARNED", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chaos.run_seeds(dataclasses.replace(spec, qk_scale=0.2), seeds=2)
    with pytest.warns(HeavyTailWarning, match="of n = 256 points") as record:
        chaos.run_seeds(dataclasses.replace(spec, qk_scale=4.0), seeds=2)
    assert record[0].filename == __file__
