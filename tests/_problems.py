"""Shared random problems and comparisons for the gradient tests (float64, tiny shapes)."""

import equinox as eqx
import jax
import jax.numpy as jnp

import cfm_jax


def flat(tree):
    return jnp.concatenate([jnp.ravel(a) for a in jax.tree.leaves(tree)])


def rel(a, b):
    """‖a − b‖ / ‖b‖ over all leaves of two pytrees of the same structure (‖a‖ when b is exactly 0)."""
    a, b = flat(a), flat(b)
    nb = float(jnp.linalg.norm(b))
    return float(jnp.linalg.norm(a - b)) / (nb if nb > 0 else 1.0)


def problem(seed, d=3, n=7, B=2, heads=2, mlp=5, layers=4):
    """A random float64 transformer (H heads, MLP on, non-zero biases), tokens, a non-uniform context and targets."""
    km, kx, kz, kw, ky = jax.random.split(jax.random.key(seed), 5)
    model = cfm_jax.Transformer.init(km, d, heads=heads, mlp_width=mlp, layers=layers, qk_scale=1.5, v_scale=1.5)
    model = eqx.tree_at(lambda m: (m.b1, m.b2), model, (0.3 * jnp.ones_like(model.b1), -0.2 * jnp.ones_like(model.b2)))
    x0 = jax.random.normal(kx, (B, d))
    w = jax.random.uniform(kw, (n,), minval=0.2, maxval=2.0)
    ctx = cfm_jax.EmpiricalMeasure(jax.random.normal(kz, (n, d)), w / w.sum())
    y = jax.random.normal(ky, (B, d))
    return model, x0, ctx, y
