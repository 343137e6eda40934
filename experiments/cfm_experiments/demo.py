"""``cfm-jax demo``: one small forward solve on built-in defaults (not an experiment: it writes nothing)."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

from cfm_jax import EmpiricalMeasure, Transformer, forward

from .declarations.demo import OPTIONS  # checked by the same rules as an experiment's options


def main(dim: int, context: int, batch: int, layers: int, heads: int, mlp_width: int, seed: int) -> int:
    """Solve once (compiling ``forward``), then again (the compiled program), and print what came out."""
    k_model, k_x, k_z = jax.random.split(jax.random.key(seed), 3)
    model = Transformer.init(k_model, dim, heads=heads, mlp_width=mlp_width, layers=layers)
    x0 = jax.random.normal(k_x, (batch, dim))
    ctx = EmpiricalMeasure(jax.random.normal(k_z, (context, dim)))
    t0 = time.perf_counter()
    sol = jax.block_until_ready(forward(model, x0, ctx))  # forward is compiled (eqx.filter_jit)
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    sol = jax.block_until_ready(forward(model, x0, ctx))
    t_run = time.perf_counter() - t0
    print(f"cfm-jax demo on {jax.devices()[0].platform} ({jax.device_count()} device(s))")
    print(f"  model: d={dim} heads={heads} mlp_width={mlp_width} layers={layers}; context n={context}; batch B={batch}")
    print(f"  forward (Euler, one step per layer): first call {t_compile:.2f} s, then {t_run * 1e3:.2f} ms")
    print(f"  x1[0] = [{', '.join(f'{float(v):.4f}' for v in sol.x1[0])}]")
    drift = float(jnp.linalg.norm(sol.x1 - x0, axis=-1).mean())
    spread0 = float(jnp.linalg.norm(ctx.points - ctx.mean, axis=-1).mean())
    spread1 = float(jnp.linalg.norm(sol.context.points - sol.context.mean, axis=-1).mean())
    finite = bool(jnp.isfinite(sol.x1).all() and jnp.isfinite(sol.context.points).all())
    print(
        f"summary: mean token displacement {drift:.4f}; context spread {spread0:.4f} -> {spread1:.4f}; finite: {finite}"
    )
    return 0


__all__ = ["OPTIONS", "main"]
