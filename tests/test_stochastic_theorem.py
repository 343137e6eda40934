"""Assumption 2's ε: a lower estimate, ≤ 0 for identity attention and positive for repulsive attention."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cfm_jax.stochastic import (
    SphereAttention,
    attention_epsilon,
    energy_growth_ratio,
    normalise,
    random_tokens,
)


def test_assumption_two_epsilon_for_identity_and_repulsive_attention():
    """Q = K = V = I: dE_β/dt ≤ 0 along the noiseless flow, so the estimate is ≤ 0 up to
    round-off. V = −I (repulsive): for a small cluster the velocity is x_i − x̄, the
    half-squared distances grow at rate 2 and so does E_β (∝ their mean): the ratio at a
    cluster of spread 1e-5 is 2 up to O(spread), and the search must find ε ≥ that value."""
    d, n = 5, 12
    att = SphereAttention("SA", 1.0)
    est = attention_epsilon(jax.random.key(0), att, n, d, starts=64, steps=30)
    assert est.epsilon <= 1e-12 and est.configurations > 1000
    rep = SphereAttention("SA", 1.0, V=-jnp.eye(d))
    c = random_tokens(jax.random.key(1), 1, d)
    x = normalise(c + 1e-5 * jax.random.normal(jax.random.key(2), (n, d)))
    for a, expected in ((rep, 2.0), (att, -2.0)):
        de, e = energy_growth_ratio(a, x, 1.0)
        assert float(de / e) == pytest.approx(expected, rel=1e-3)
    est_rep = attention_epsilon(jax.random.key(0), rep, n, d, starts=64, steps=30)
    assert 2.0 * (1 - 1e-3) <= est_rep.epsilon


def test_attention_epsilon_checks_its_arguments():
    """NaN or negative inverse temperature, non-positive or NaN horizon, negative min_energy: an error
    naming the argument (a negative horizon would follow the flow backwards; at β = 0 the energy is
    identically 0); no configuration above min_energy is an error, not −inf."""
    att = SphereAttention("SA", 1.0)
    run = lambda **kw: attention_epsilon(jax.random.key(0), att, 3, 2, starts=2, steps=2, **kw)  # noqa: E731
    for kw, name in (
        ({"beta": float("nan")}, "beta"),
        ({"beta": -0.5}, "beta"),
        ({"beta": 0.0}, "beta"),
        ({"horizon": -1.0}, "horizon"),
        ({"horizon": 0.0}, "horizon"),
        ({"horizon": float("nan")}, "horizon"),
        ({"min_energy": -1e-3}, "min_energy"),
    ):
        with pytest.raises(ValueError, match=f"`{name}`"):
            run(**kw)
    with pytest.raises(ValueError, match="`attention`"):
        attention_epsilon(jax.random.key(0), "SA", 3, 2)  # pyright: ignore[reportArgumentType]  # bad on purpose
    with pytest.raises(ValueError, match="`beta`"):
        attention_epsilon(jax.random.key(0), SphereAttention("SA", 0.0), 3, 2)  # β taken from the attention
    with pytest.raises(ValueError, match="no visited configuration"):
        run(min_energy=1e6)
    assert np.isfinite(run(beta=1e-3, horizon=1e-3, min_energy=0.0).epsilon)


def test_attention_epsilon_reuses_its_program():
    """The search over noiseless flows is one compiled program: a second call with another key and
    another attention of the same kind compiles nothing (counted, not timed)."""
    from _compiles import count_compilations

    a = SphereAttention("SA", 1.0, V=-jnp.eye(3))
    b = SphereAttention("SA", 1.0, V=-2 * jnp.eye(3))
    keys = jax.random.split(jax.random.key(0), 2)
    attention_epsilon(keys[0], a, 3, 3, starts=4, steps=3)
    with count_compilations() as count:
        est = attention_epsilon(keys[1], b, 3, 3, starts=4, steps=3)
    assert count() == 0 and est.configurations > 0


def test_attention_epsilon_refuses_non_finite_attention_by_name():
    """NaN attention matrices give an error naming `attention`, not a ratio search that finds nothing."""
    import equinox as eqx

    bad = SphereAttention("SA", 1.0, Q=jnp.full((3, 3), jnp.nan))
    with pytest.raises(eqx.EquinoxRuntimeError, match="`attention` parameters contain non-finite"):
        attention_epsilon(jax.random.key(0), bad, 3, 3, starts=2, steps=2)
