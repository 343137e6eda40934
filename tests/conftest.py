"""The library's test fixtures (the session's configuration is the repository's ``conftest.py``)."""

import jax
import jax.numpy as jnp
import pytest
from _ogd_problem import setup  # noqa: F401  (the OGD tests' shared problem, a module-scoped fixture)

import cfm_jax


@pytest.fixture(scope="session")
def small_model():
    """Float64 transformer: d=3, H=2 heads, MLP width 5, L=4 layers."""
    return cfm_jax.Transformer.init(jax.random.key(0), 3, heads=2, mlp_width=5, layers=4, dtype=jnp.float64)


@pytest.fixture(scope="session")
def small_problem(small_model):
    """(model, x0 (B=2, d=3), non-uniform context n=7)."""
    kx, kz, kw = jax.random.split(jax.random.key(1), 3)
    x0 = jax.random.normal(kx, (2, 3), jnp.float64)
    z = jax.random.normal(kz, (7, 3), jnp.float64)
    w = jax.random.uniform(kw, (7,), jnp.float64, 0.5, 1.5)
    return small_model, x0, cfm_jax.EmpiricalMeasure(z, w / w.sum())
