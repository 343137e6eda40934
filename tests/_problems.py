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
    assert model.b1 is not None and model.b2 is not None  # the MLP is on
    model = eqx.tree_at(lambda m: (m.b1, m.b2), model, (0.3 * jnp.ones_like(model.b1), -0.2 * jnp.ones_like(model.b2)))
    x0 = jax.random.normal(kx, (B, d))
    w = jax.random.uniform(kw, (n,), minval=0.2, maxval=2.0)
    ctx = cfm_jax.EmpiricalMeasure(jax.random.normal(kz, (n, d)), w / w.sum())
    y = jax.random.normal(ky, (B, d))
    return model, x0, ctx, y


def residual_network(model, x0, context):
    """The L-layer residual network x_{l+1} = x_l + V(x_l, μ_l; θ_l)/L as a bare ``lax.scan``: ``(x1, z1)``.

    The same maths as ``cfm_jax.forward`` with Euler and one step per layer, written independently of
    the library's loop, so that tests can compare the two (and differentiate it by plain autodiff).
    """
    context = cfm_jax.as_measure(context)
    x = jnp.atleast_2d(x0)
    w, L = context.weights, model.num_layers

    def layer(state, l):
        x, z = state
        v = model.velocity(jnp.concatenate([x, z]), cfm_jax.EmpiricalMeasure.unchecked(z, w), model.layer_params(l))
        return (x + v[: x.shape[0]] / L, z + v[x.shape[0] :] / L), None

    (x1, z1), _ = jax.lax.scan(layer, (x, context.points), jnp.arange(L))
    return (x1[0] if jnp.ndim(x0) == 1 else x1), z1
