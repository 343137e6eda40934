"""``cfm-jax demo``: one small forward solve on built-in defaults."""

from __future__ import annotations

import time


def add_arguments(parser):
    parser.add_argument("--dim", type=int, default=8, help="token dimension d")
    parser.add_argument("--context", type=int, default=512, help="context size n")
    parser.add_argument("--batch", type=int, default=4, help="number of target tokens B")
    parser.add_argument("--layers", type=int, default=12, help="layers L")
    parser.add_argument("--heads", type=int, default=2, help="attention heads H")
    parser.add_argument("--mlp-width", type=int, default=32, help="MLP width m (0: none)")
    parser.add_argument("--seed", type=int, default=0, help="PRNG seed of the model and the inputs")


def run(args) -> int:
    # the options were checked by the command line (experiments.options.validate_options)
    import jax
    import jax.numpy as jnp

    from . import EmpiricalMeasure, Transformer, forward

    k_model, k_x, k_z = jax.random.split(jax.random.key(args.seed), 3)
    model = Transformer.init(k_model, args.dim, heads=args.heads, mlp_width=args.mlp_width, layers=args.layers)
    x0 = jax.random.normal(k_x, (args.batch, args.dim))
    context = EmpiricalMeasure(jax.random.normal(k_z, (args.context, args.dim)))
    solve = jax.jit(forward)
    t0 = time.perf_counter()
    sol = jax.block_until_ready(solve(model, x0, context))
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    sol = jax.block_until_ready(solve(model, x0, context))
    t_run = time.perf_counter() - t0
    print(f"cfm-jax demo on {jax.devices()[0].platform} ({jax.device_count()} device(s))")
    print(
        f"  model: d={args.dim} heads={args.heads} mlp_width={args.mlp_width} layers={args.layers}; "
        f"context n={args.context}; batch B={args.batch}"
    )
    print(f"  forward (Euler, one step per layer): first call {t_compile:.2f} s, then {t_run * 1e3:.2f} ms")
    print(f"  x1[0] = [{', '.join(f'{float(v):.4f}' for v in sol.x1[0])}]")
    drift = float(jnp.linalg.norm(sol.x1 - x0, axis=-1).mean())
    spread0 = float(jnp.linalg.norm(context.points - context.mean(), axis=-1).mean())
    spread1 = float(jnp.linalg.norm(sol.z1 - sol.measure.mean(), axis=-1).mean())
    print(
        f"summary: mean token displacement {drift:.4f}; context spread {spread0:.4f} -> {spread1:.4f}; "
        f"finite: {bool(jnp.isfinite(sol.x1).all() and jnp.isfinite(sol.z1).all())}"
    )
    return 0
