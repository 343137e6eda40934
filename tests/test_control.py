"""cfm_jax._control: the W1-Lipschitz control field V(x, μ) = c · W1(μ, ν) · e."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import EmpiricalMeasure
from cfm_jax._control import W1ControlField
from cfm_jax._wasserstein import wasserstein1


def test_control_field_population_fixed_point_and_lipschitz():
    """With ν = the reference, the reference system does not move; |V(μ) − V(μ')| ≤ W1(μ, μ')."""
    nu = EmpiricalMeasure(jax.random.normal(jax.random.key(4), (64, 1), jnp.float64))
    field = W1ControlField.create(nu)
    model = cfm_jax.PiecewiseConstantCFM(field, {"c": jnp.ones(3)}, 1)
    sol = jax.jit(cfm_jax.forward)(model, jnp.zeros((1, 1)), nu)
    assert float(jnp.abs(sol.x1).max()) < 1e-12
    mu1 = EmpiricalMeasure(jax.random.normal(jax.random.key(5), (20, 1), jnp.float64))
    mu2 = EmpiricalMeasure(mu1.points * 1.3 + 0.2)
    q = jnp.zeros((1, 1))
    dv = float(jnp.abs(field(q, mu1, {}) - field(q, mu2, {})).max())
    assert 0 < dv <= float(wasserstein1(mu1, mu2)) + 1e-12
    with pytest.raises(ValueError, match="direction"):
        W1ControlField.create(nu, direction=jnp.zeros(2))


def test_translated_context_moves_by_the_translation():
    """In d = 1, W1(ν + t, ν) = |t| exactly: the field is c·|t|·e for a translated copy of ν."""
    nu = EmpiricalMeasure(jax.random.normal(jax.random.key(6), (30, 1), jnp.float64))
    field = W1ControlField.create(nu)
    v = field(jnp.zeros((2, 1)), EmpiricalMeasure(nu.points + 0.3, nu.weights), {"c": jnp.asarray(2.0)})
    np.testing.assert_allclose(v, 0.6, rtol=1e-10)


def test_create_checks_values_eagerly_and_under_jit():
    """A zero or non-finite direction, a bad relative_epsilon or a non-finite ν is refused by name:
    EquinoxRuntimeError eagerly, the same message from inside the program under jax.jit (where the
    checks used to vanish and a zero direction gave a NaN field). Each check rides on the attribute it
    guards, so the jitted function returns the whole field."""
    import equinox as eqx

    pts = jax.random.normal(jax.random.key(4), (8, 2), jnp.float64)
    errors = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError)

    def build(p, e, r):
        return W1ControlField.create(EmpiricalMeasure.unchecked(p, jnp.full((8,), 1 / 8)), e, relative_epsilon=r)

    jitted = jax.jit(build)
    bad = (
        (pts, jnp.zeros(2), 0.01, "`direction` must be a finite, non-zero vector"),
        (pts, jnp.array([1.0, jnp.inf]), 0.01, "`direction` must be a finite, non-zero vector"),
        (pts, jnp.ones(2), 0.0, "`relative_epsilon` must be finite and > 0"),
        (pts, jnp.ones(2), float("nan"), "`relative_epsilon` must be finite and > 0"),
        (pts.at[0, 0].set(jnp.nan), jnp.ones(2), 0.01, "`nu` points contain non-finite"),
    )
    for p, e, r, match in bad + ((pts, jnp.ones(2), -1.0, "`relative_epsilon` must be finite and > 0"),):
        with pytest.raises(eqx.EquinoxRuntimeError, match=match):
            build(p, e, r)
        with pytest.raises(eqx.EquinoxRuntimeError, match=match):
            eqx.filter_jit(build)(p, e, jnp.asarray(r))
        with pytest.raises(errors, match=match):
            jax.block_until_ready(jitted(p, e, r))
    np.testing.assert_allclose(jitted(pts, jnp.array([3.0, 4.0]), 0.01).direction, [0.6, 0.8], rtol=1e-12)
    with pytest.raises(ValueError, match="`max_iterations`"):
        W1ControlField.create(EmpiricalMeasure(pts), max_iterations=0)
    with pytest.raises(ValueError, match="`threshold`"):
        W1ControlField.create(EmpiricalMeasure(pts), threshold=0.0)
    numpy = W1ControlField.create(EmpiricalMeasure(pts), max_iterations=np.int64(50), threshold=np.float64(1e-3))
    assert (type(numpy.max_iterations), type(numpy.threshold)) == (int, float)  # NumPy scalars, as wasserstein1


def test_epsilon_is_relative_to_the_spread_of_nu():
    """ε = relative_epsilon·(2 Var_ν)^{1/2} with Var_ν = Σ_i b_i‖y_i − ȳ‖² (the documented scale: the
    root mean squared distance of two independent draws of ν), for a weighted ν in d = 2."""
    rng = np.random.default_rng(0)
    y = rng.normal(size=(10, 2)) * np.array([1.0, 3.0])
    b = rng.uniform(0.5, 1.5, 10)
    b /= b.sum()
    field = W1ControlField.create(EmpiricalMeasure(jnp.asarray(y), jnp.asarray(b)), relative_epsilon=0.02)
    var = b @ np.sum((y - b @ y) ** 2, axis=1)
    assert float(field.epsilon) == pytest.approx(0.02 * np.sqrt(2 * var), rel=1e-12)
    pairs = np.sum((y[:, None] - y[None]) ** 2, axis=-1)
    assert float(field.epsilon) == pytest.approx(0.02 * np.sqrt(b @ pairs @ b), rel=1e-12)  # E‖Y − Y'‖²


def test_a_field_built_in_a_compiled_sweep_holds_no_callback():
    """A field built inside a sweep's ``cfm_jax.compiled`` program from its own reference keeps its
    checks as data (no host callback: JAX's persistent compilation cache can store the program),
    equals the one built under a plain ``jax.jit`` (which holds callbacks), and a NaN reference still
    raises naming ``nu``."""
    pts = jax.random.normal(jax.random.key(4), (8, 2), jnp.float64)

    def build(p):
        return W1ControlField.create(EmpiricalMeasure.unchecked(p, jnp.full((8,), 1 / 8))).epsilon

    assert "callback" not in cfm_jax.compiled(build).lower(pts).as_text()  # pyright: ignore[reportFunctionMemberAccess]
    assert "callback" in jax.jit(build).lower(pts).as_text()
    assert float(cfm_jax.compiled(build)(pts)) == pytest.approx(float(jax.jit(build)(pts)), rel=1e-12)
    with pytest.raises(eqx.EquinoxRuntimeError, match="`nu`"):
        cfm_jax.compiled(build)(pts.at[0, 0].set(jnp.nan))
