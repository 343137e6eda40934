"""cfm_jax._chaos.spec: spec validation, the paper's rates, the quantities' sizes and the buckets."""

from typing import Any

import numpy as np
import pytest

from cfm_jax import chaos

_EXACT_REF: dict[str, Any] = dict(
    field="attention", dim=2, ns=(4, 16, 64), n_ref=256, layers=2, heads=1, mlp_width=3, mlp_activation="linear"
)


def test_expected_slopes_are_the_papers():
    assert chaos.expected_slope("attention", "token", 8) == chaos.expected_slope("attention", "grad_phi", 1) == -0.5
    assert chaos.expected_slope("attention", "w1", 4) == chaos.expected_slope("control", "token", 4) == -0.25
    assert chaos.expected_slope("control", "token", 1) == chaos.wasserstein_slope(2) == -0.5


def test_size_buckets():
    assert chaos.size_buckets((16, 64, 256, 1024, 2048)) == [[16, 64], [256, 1024], [2048]]
    assert chaos.size_buckets((8,)) == [[8]]
    assert chaos.size_buckets((64, 16, 17)) == [[16, 17, 64]]


def test_buckets_group_the_sizes_measured_alike():
    """The default rates row: ∇φ up to 256 and W1 at 16…128 give one program per (measurements,
    padded size): [16, 64] with everything, [32, 128] with W1 alone, [256] with ∇φ, [1024, 4096]."""
    spec = chaos.ChaosSpec(
        **dict(_EXACT_REF, ns=(16, 64, 256, 1024, 4096), w1_ns=(16, 32, 64, 128), grad_phi_max_n=256),
        reference="gaussian",
    )
    got = {(b.ns, b.size, b.core, b.probes, b.w1) for b in chaos.buckets(spec)}
    assert got == {
        ((16, 64), 64, True, True, True),
        ((32, 128), 128, False, False, True),
        ((256,), 256, True, True, False),
        ((1024, 4096), 4096, True, False, False),
    }
    # every n of every quantity is in exactly one bucket that measures it
    for q, flag in (("token", "core"), ("w1", "w1"), ("grad_phi", "probes")):
        owned = sorted(n for b in chaos.buckets(spec) if getattr(b, flag) for n in b.ns)
        assert owned == sorted(spec.quantity_ns(q)), q
    unpadded = chaos.buckets(spec, padded=False)
    assert all(b.ns == (b.size,) for b in unpadded) and len(unpadded) == 7
    # no adjoint, no W1: one measurement everywhere, so the buckets are size_buckets(ns)
    plain = chaos.ChaosSpec(**dict(_EXACT_REF, ns=(4, 8, 64)), adjoint=False, w1=False, reference="gaussian")
    assert [b.ns for b in chaos.buckets(plain)] == [(4, 8), (64,)] and plain.measured() == ("token", "context")


def test_sample_reference_measures_everything_at_every_n():
    spec = chaos.ChaosSpec(field="attention", dim=2, ns=(8, 16, 128), n_ref=256)
    assert spec.measured() == ("token", "context", "w1", "adjoint", "grad_phi")
    assert [(b.ns, b.core, b.probes, b.w1) for b in chaos.buckets(spec)] == [
        ((8, 16), True, True, True),
        ((128,), True, True, True),
    ]
    control = chaos.ChaosSpec(field="control", dim=2, ns=(8, 16), n_ref=256)
    assert control.measured() == ("token", "context", "w1")  # no adjoint for the control field


def test_quantity_ns_and_references():
    spec = chaos.ChaosSpec(**dict(_EXACT_REF, dim=1, ns=(4, 16, 64), grad_phi_max_n=16), reference="gaussian")
    assert spec.quantity_ns("w1") == (4, 16, 64) and spec.quantity_ns("grad_phi") == (4, 16)
    assert [chaos.quantity_reference(spec, q) for q in ("token", "w1", "adjoint", "grad_phi")] == [
        "gaussian",
        "gaussian",
        "gaussian",
        "qmc",
    ]
    d2 = chaos.ChaosSpec(**dict(_EXACT_REF, w1_ns=(4, 8)), reference="gaussian")
    assert chaos.quantity_reference(d2, "w1") == "qmc" and d2.quantity_ns("w1") == (4, 8)
    none = chaos.ChaosSpec(**dict(_EXACT_REF, grad_phi_max_n=2), reference="gaussian")
    assert "grad_phi" not in none.measured()  # no n <= 2: ∇φ is not measured at all


def test_spec_validation_names_the_field():
    with pytest.raises(ValueError, match="`ns`"):
        chaos.validate_spec(chaos.ChaosSpec(ns=(8, 64), n_ref=32))
    with pytest.raises(ValueError, match="`ns` must be a non-empty tuple"):
        chaos.validate_spec(chaos.ChaosSpec(ns=()))
    with pytest.raises(ValueError, match="field"):
        chaos.validate_spec(chaos.ChaosSpec(field="mlp"))  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="population"):
        chaos.validate_spec(chaos.ChaosSpec(population="cauchy"))  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="`layers` must be an integer >= 1"):
        chaos.validate_spec(chaos.ChaosSpec(ns=(4, 8), n_ref=8, layers=0))
    # the value used is the value checked: a float is refused, not passed as int(2.5) = 2 and used as 2.5
    for field, value in (("w1_size", 2.5), ("dim", 2.0), ("n_ref", 8.5), ("batch", True)):
        with pytest.raises(ValueError, match=f"`{field}` must be an integer >= 1"):
            chaos.validate_spec(chaos.ChaosSpec(**{"ns": (4, 8), "n_ref": 16, field: value}))
    with pytest.raises(ValueError, match="`ns` must be a non-empty tuple"):
        chaos.validate_spec(chaos.ChaosSpec(ns=(4, 8.5), n_ref=16))
    with pytest.raises(ValueError, match="`grad_phi_max_n` must be None or an integer"):
        chaos.validate_spec(chaos.ChaosSpec(**dict(_EXACT_REF, grad_phi_max_n=2.5), reference="gaussian"))
    spec = chaos.ChaosSpec(ns=(np.int64(4), 8), n_ref=np.int64(16), w1_size=np.int32(8))  # pyright: ignore[reportArgumentType]
    chaos.validate_spec(spec)
    for eps in (0.0, -0.01, float("inf")):
        with pytest.raises(ValueError, match="`relative_epsilon`"):
            chaos.validate_spec(chaos.ChaosSpec(field="attention", dim=2, ns=(4, 8), n_ref=16, relative_epsilon=eps))
    chaos.validate_spec(chaos.ChaosSpec(field="attention", dim=2, ns=(4, 8), n_ref=16, relative_epsilon=1e-6))


def test_exact_reference_validation():
    with pytest.raises(ValueError, match="`reference`='gaussian' needs"):
        chaos.validate_spec(chaos.ChaosSpec(**dict(_EXACT_REF, mlp_activation="gelu"), reference="gaussian"))
    with pytest.raises(ValueError, match="`reference`='gaussian' needs"):
        chaos.validate_spec(chaos.ChaosSpec(**dict(_EXACT_REF, field="control"), reference="gaussian"))
    with pytest.raises(ValueError, match="`reference` must be"):
        chaos.validate_spec(chaos.ChaosSpec(reference="mc"))  # pyright: ignore[reportArgumentType]  # bad on purpose
    chaos.validate_spec(chaos.ChaosSpec(**dict(_EXACT_REF, ns=(4, 512)), reference="gaussian"))  # n > n_ref is fine


def test_quantity_sizes_need_an_exact_reference():
    with pytest.raises(ValueError, match="`w1_ns` and `grad_phi_max_n` need an exact reference"):
        chaos.validate_spec(chaos.ChaosSpec(ns=(4, 8), n_ref=16, w1_ns=(4,)))
    with pytest.raises(ValueError, match="`w1_ns` must be"):
        chaos.validate_spec(chaos.ChaosSpec(**dict(_EXACT_REF, w1_ns=(0, 4)), reference="gaussian"))
    with pytest.raises(ValueError, match="`grad_phi_max_n`"):
        chaos.validate_spec(chaos.ChaosSpec(**dict(_EXACT_REF, grad_phi_max_n=0), reference="gaussian"))
