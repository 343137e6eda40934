"""Finite vs infinite context (propagation of chaos, SPEC §4) and the ``cfm-jax rates`` command.

The infinite-context system is approximated by a reference sample of ``n_ref`` points drawn from
the population P; the n-point system is coupled synchronously to it: its context is the first n
points of the reference sample, and both carry the same target tokens x0 (and loss targets y).
At every layer boundary s = l/L we measure

- ``token``    ‖x_s − x̂_s‖ for each target token (then sup over s, mean over tokens);
- ``context``  (1/n) Σ_{i<n} ‖z_i(s) − ẑ_i(s)‖, the coupled context particles; it bounds
  W1(μ_s, Φ̂_s#μ_0), the transport of the *same* initial sample by the population flow;
- ``w1``       W1(μ_s, μ̂_s) between the n-point measure and the reference measure (its first
  ``w1_size`` particles), which contains the initial sampling error W1(μ_0, P) ~ n^{-1/d'};
- ``adjoint``  ‖p_s − p̂_s‖ per target token (p for the per-token loss ½‖x_1 − y‖²);
- ``grad_phi`` sup_{z ∈ probes} ‖∇φ_s(z) − ∇φ̂_s(z)‖ on fixed probe points in the ball of radius R
  (φ for the batch-mean loss).

Every quantity is reported as a sup over s. The reference's own error ("floor") is measured by
the same code between two independent references and reported next to every result; a slope
is only called meaningful where the floor is well below the deviation at the largest n.

Expected (paper's table): transformer token quantities ~ n^{-1/2} whatever d; W1 between
measures ~ n^{-1/d'} (d' the intrinsic dimension of P; n^{-1/2} up to a log at d' ≤ 2); the
general W1-Lipschitz control field (:class:`~cfm_jax.fields.control.W1ControlField`) drives its
tokens at the slower n^{-1/d'}.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ..fields.control import W1ControlField
from ..flow import SaveAt
from ..solve import forward
from ..measures import EmpiricalMeasure
from ..paths import CFM, AbstractCFM, Transformer
from ..populations import make_population
from ..wasserstein import wasserstein1
from ..stats import fit_loglog
from .runner import Sweep, read_rows, write_summary

#: quantity -> (description, expected slope for attention as a function of the intrinsic dim)
QUANTITIES = {
    "token": "sup_s ‖x_s − x̂_s‖",
    "context": "sup_s mean_i ‖z_i(s) − ẑ_i(s)‖ (coupled context)",
    "w1": "sup_s W1(μ_s, μ̂_s)",
    "adjoint": "sup_s ‖p_s − p̂_s‖",
    "grad_phi": "sup_{s,|z|≤R} ‖∇φ_s(z) − ∇φ̂_s(z)‖",
}


def wasserstein_slope(intrinsic_dim: int) -> float:
    """Empirical W1 rate exponent: −1/d' for d' ≥ 2 (with a log at d' = 2), −1/2 for d' = 1."""
    return -1.0 / max(2, intrinsic_dim)


def expected_slope(field: str, quantity: str, intrinsic_dim: int) -> float:
    """The paper's rate: −1/2 for attention's token-level quantities, −1/d' for W1 and the control."""
    if quantity == "w1" or field == "control":
        return wasserstein_slope(intrinsic_dim)
    return -0.5


# ----------------------------------------------------------------------------------------------
# Configuration of one experiment (static: it fixes shapes and the jitted function)


@dataclasses.dataclass(frozen=True)
class ChaosSpec:
    """One (field, population, d, n) experiment; hashable, so it keys the jit cache.

    ``field``: ``"attention"`` (a random :class:`Transformer`) or ``"control"``
    (:class:`W1ControlField` with ν = the reference sample). Populations are scaled to unit
    second moment (E‖z‖² = 1) so that constants can be compared across d.
    """

    field: str = "attention"
    population: str = "gaussian"
    dim: int = 2
    intrinsic_dim: int | None = None
    ns: tuple = (16, 32, 64, 128)
    n_ref: int = 4096
    layers: int = 4
    heads: int = 2
    mlp_width: int = 16
    batch: int = 4
    num_probes: int = 16
    radius: float = 1.0
    qk_scale: float = 1.0
    v_scale: float = 1.0
    w1: bool = True
    w1_size: int = 1024
    relative_epsilon: float = 0.01
    adjoint: bool = True
    control_strength: float = 1.0

    def population_law(self):
        d = self.dim
        k = self.intrinsic_dim
        if self.population in ("gaussian", "gaussian_mixture"):
            scale = 1.0 / math.sqrt(d) if self.population == "gaussian" else 0.5
            return make_population(self.population, d, scale=scale)
        if self.population == "subspace_gaussian":
            return make_population(self.population, d, k, scale=1.0 / math.sqrt(k or 2))
        return make_population(self.population, d, k)

    @property
    def d_intrinsic(self) -> int:
        return self.population_law().intrinsic_dim


def _validate_spec(spec: ChaosSpec):
    if spec.field not in ("attention", "control"):
        raise ValueError(f"`field` must be 'attention' or 'control', got {spec.field!r}.")
    for name in ("dim", "n_ref", "layers", "batch", "num_probes", "w1_size"):
        if int(getattr(spec, name)) < 1:
            raise ValueError(f"`{name}` must be >= 1, got {getattr(spec, name)!r}.")
    if not isinstance(spec.ns, tuple) or not spec.ns or any(int(n) < 1 for n in spec.ns):
        raise ValueError(f"`ns` must be a non-empty tuple of positive context sizes, got {spec.ns!r}.")
    if max(spec.ns) > spec.n_ref:
        raise ValueError(f"`ns` ({spec.ns}) must be <= `n_ref` ({spec.n_ref}): each n-point context is a prefix of the reference.")
    spec.population_law()  # raises a ValueError for unknown populations


# ----------------------------------------------------------------------------------------------
# Pure per-seed pieces


def _ball(key, num, dim, radius, dtype):
    """``num`` points uniform in the ball of radius ``radius`` (probe points)."""
    kd, kr = jax.random.split(key)
    g = jax.random.normal(kd, (num, dim), dtype)
    u = g / jnp.linalg.norm(g, axis=-1, keepdims=True)
    return radius * u * jax.random.uniform(kr, (num, 1), dtype) ** (1.0 / dim)


def build_model(spec: ChaosSpec, key, reference=None) -> AbstractCFM:
    """The model of ``spec``: a random transformer, or the control field around ``reference``."""
    dtype = jnp.result_type(float)
    if spec.field == "attention":
        return Transformer.init(
            key,
            spec.dim,
            heads=spec.heads,
            mlp_width=spec.mlp_width,
            layers=spec.layers,
            qk_scale=spec.qk_scale,
            v_scale=spec.v_scale,
            dtype=dtype,
        )
    field = W1ControlField.create(EmpiricalMeasure(reference), relative_epsilon=spec.relative_epsilon)
    return CFM(field, {"c": jnp.full((spec.layers,), spec.control_strength, dtype)}, spec.dim)


def _adjoint_fallback(model, x0, context, y):
    """p at the layer boundaries by autodiff through the residual scheme (no probe gradients).

    p_l = ∂ℓ/∂x_l, obtained by injecting a zero perturbation δ_l at every boundary.
    """
    from ..flow import _stacked_velocity

    L = model.num_layers
    w = context.weights

    def loss(deltas):
        def layer(state, l):
            x, z = state
            x = x + deltas[l]
            vx, vz = _stacked_velocity(model, w, model.layer_params(l), (x, z))
            return (x + vx / L, z + vz / L), None

        (x1, _), _ = jax.lax.scan(layer, (x0, context.points), jnp.arange(L))
        x1 = x1 + deltas[L]
        return 0.5 * jnp.mean(jnp.sum((x1 - y) ** 2, -1))

    ps = jax.grad(loss)(jnp.zeros((L + 1,) + x0.shape, x0.dtype))
    return ps, None


def adjoint_states(model, x0, context, y, probes=None):
    """(ps (S, B, d), probe_grads (S, P, d) or None) at the layer boundaries, batch-mean loss.

    Uses :func:`cfm_jax.adjoint_trajectories` (discrete adjoint) when the build provides it,
    else autodiff through the Euler scheme for p only.
    """
    import cfm_jax

    adj = getattr(cfm_jax, "adjoint_trajectories", None)
    if adj is None:
        return _adjoint_fallback(model, x0, context, y)
    sol = adj(model, x0, context, y, method="discrete_adjoint", probes=probes)
    return sol.ps, sol.probe_grads


def _w1_path(zs_a, zs_b, relative_epsilon):
    """W1 between two context trajectories (S, n, d) and (S, m, d) at every depth."""

    def one(za, zb):
        return wasserstein1(EmpiricalMeasure(za), EmpiricalMeasure(zb), relative_epsilon=relative_epsilon)

    return jax.vmap(one)(zs_a, zs_b)


def _system(model, x0, z, y=None, probes=None, adjoint: bool = False) -> dict:
    """Trajectories of one system at the layer boundaries: xs, zs (and ps, probe_grads)."""
    sol = forward(model, x0, z, saveat=SaveAt(layers=True))
    out = {"xs": sol.xs, "zs": sol.zs}
    if adjoint and y is not None:
        out["ps"], out["pg"] = adjoint_states(model, x0, EmpiricalMeasure(z), y, probes)
    return out


def _compare(a: dict, b: dict, *, coupled: bool, w1_size, relative_epsilon) -> dict:
    """Deviation trajectories between two systems from :func:`_system` (``b`` the reference)."""
    out = {"token": jnp.linalg.norm(a["xs"] - b["xs"], axis=-1)}
    n = a["zs"].shape[1]
    if coupled:
        out["context"] = jnp.mean(jnp.linalg.norm(a["zs"] - b["zs"][:, :n], axis=-1), axis=-1)
    if w1_size is not None:
        # Coupled: the whole n-point measure; otherwise (two references) both truncated alike.
        za = a["zs"] if coupled else a["zs"][:, :w1_size]
        out["w1"] = _w1_path(za, b["zs"][:, :w1_size], relative_epsilon)
    if "ps" in a and "ps" in b:
        B = a["xs"].shape[1]
        out["adjoint"] = B * jnp.linalg.norm(a["ps"] - b["ps"], axis=-1)
        if a["pg"] is not None and b["pg"] is not None:
            out["grad_phi"] = jnp.max(jnp.linalg.norm(a["pg"] - b["pg"], axis=-1), axis=-1)
    return out


def coupled_deviations(
    model: AbstractCFM,
    x0,
    context,
    reference,
    *,
    y=None,
    probes=None,
    coupled: bool = True,
    w1_size: int | None = None,
    relative_epsilon: float = 0.01,
    adjoint: bool = True,
) -> dict:
    """Deviations between two systems at every layer boundary (trajectories, not sups).

    Args:
        model: the CFM (one step per layer, explicit Euler: the residual network).
        x0: ``(B, d)`` target tokens shared by both systems.
        context, reference: ``(n, d)`` and ``(n_ref, d)`` context points (uniform weights).
        y: ``(B, d)`` loss targets; with ``adjoint`` the adjoints are compared too.
        probes: ``(P, d)`` fixed points for ∇φ (needs :func:`cfm_jax.adjoint_trajectories`).
        coupled: ``context`` is the prefix of ``reference`` (synchronous coupling), so the
            particles can be compared one by one.
        w1_size: when set, W1(μ_s, μ̂_s) with μ̂_s the first ``w1_size`` reference particles
            (and, when not ``coupled``, μ_s truncated to its first ``w1_size`` particles too).

    Returns:
        dict with ``ss (S,)``, ``token (S, B)``, and where applicable ``context (S,)``,
        ``w1 (S,)``, ``adjoint (S, B)`` (per-token adjoint, i.e. B·p for the batch-mean loss),
        ``grad_phi (S,)`` (max over probes).
    """
    a = _system(model, x0, context, y, probes, adjoint)
    b = _system(model, x0, reference, y, probes, adjoint)
    out = _compare(a, b, coupled=coupled, w1_size=w1_size, relative_epsilon=relative_epsilon)
    out["ss"] = jnp.arange(a["xs"].shape[0], dtype=a["xs"].dtype) / model.num_layers
    return out


def _sups(dev: dict) -> dict:
    """sup over depth (then mean over target tokens) of every deviation trajectory."""
    res = {}
    for k, v in dev.items():
        if k == "ss":
            continue
        s = jnp.max(v, axis=0)
        res[k] = jnp.mean(s) if s.ndim else s
    return res


def _seed_inputs(spec: ChaosSpec, key):
    dtype = jnp.result_type(float)
    k_model, k_ref, k_ref2, k_x, k_y, k_probe = jax.random.split(key, 6)
    law = spec.population_law()
    ref = law(k_ref, spec.n_ref).astype(dtype)
    ref2 = law(k_ref2, spec.n_ref).astype(dtype)
    x0 = law(k_x, spec.batch).astype(dtype)
    y = law(k_y, spec.batch).astype(dtype)
    probes = _ball(k_probe, spec.num_probes, spec.dim, spec.radius, dtype)
    return k_model, ref, ref2, x0, y, probes


def seed_deviations(spec: ChaosSpec, key) -> dict:
    """Sup-over-depth deviations for one seed, every n of ``spec.ns`` (pure in ``key``).

    The reference (first ``n_ref`` draws) is solved once; each n-point system starts from its
    first n points. ``floor_<quantity>`` compares the reference with an independent second
    reference (the proxy's own error). Model, references, targets and probes depend on ``key``
    only, so the n-sweep uses common random numbers.

    Returns quantity -> ``(len(ns),)`` and ``floor_<quantity>`` -> scalar.
    """
    k_model, ref, ref2, x0, y, probes = _seed_inputs(spec, key)
    model = build_model(spec, k_model, ref)
    use_adj = spec.adjoint and spec.field == "attention"
    w1_size = min(spec.w1_size, spec.n_ref) if spec.w1 else None
    eps = spec.relative_epsilon
    sys_ref = _system(model, x0, ref, y, probes, use_adj)
    sys_ref2 = _system(model, x0, ref2, y, probes, use_adj)
    per_n = [
        _sups(_compare(_system(model, x0, ref[:n], y, probes, use_adj), sys_ref,
                       coupled=True, w1_size=w1_size, relative_epsilon=eps))
        for n in spec.ns
    ]
    out = {k: jnp.stack([r[k] for r in per_n]) for k in per_n[0]}
    floor = _sups(_compare(sys_ref2, sys_ref, coupled=False, w1_size=w1_size, relative_epsilon=eps))
    out.update({f"floor_{k}": v for k, v in floor.items()})
    return out


@functools.lru_cache(maxsize=64)
def _batched(spec: ChaosSpec):
    return jax.jit(jax.vmap(lambda k: seed_deviations(spec, k)))


def run_seeds(spec: ChaosSpec, seeds: int, base_seed: int = 0) -> dict:
    """All seeds at once (``jit(vmap)``); returns quantity -> NumPy ``(seeds, len(ns))`` (floors ``(seeds,)``)."""
    _validate_spec(spec)
    if int(seeds) < 1:
        raise ValueError(f"`seeds` must be >= 1, got {seeds!r}.")
    keys = jax.random.split(jax.random.key(base_seed), seeds)
    out = jax.block_until_ready(_batched(spec)(keys))
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def run_seeds_loop(spec: ChaosSpec, seeds: int, base_seed: int = 0) -> dict:
    """Same as :func:`run_seeds` with a Python loop over seeds (the benchmark's baseline)."""
    _validate_spec(spec)
    keys = jax.random.split(jax.random.key(base_seed), seeds)
    fn = _single(spec)
    rows = [jax.block_until_ready(fn(k)) for k in keys]
    return {k: np.asarray([r[k] for r in rows], dtype=np.float64) for k in rows[0]}


@functools.lru_cache(maxsize=16)
def _single(spec: ChaosSpec):
    return jax.jit(lambda k: seed_deviations(spec, k))


# ----------------------------------------------------------------------------------------------
# Analytic special case


def uniform_attention_deviation(model: Transformer, mean_difference) -> jax.Array:
    """Closed-form token deviation x_l − x̂_l for K = 0 (uniform attention) and no MLP.

    Then V(x, μ) = M_l · mean(μ) with M_l = Σ_h V_{l,h}; the context mean obeys
    m_{l+1} = (I + M_l/L) m_l and x_{l+1} = x_l + M_l m_l / L, so for the Euler scheme

        x_l − x̂_l = (Π_{k<l} (I + M_k/L) − I)(m_0 − m̂_0),

    independent of x_0. Returns ``(L + 1, d)``.
    """
    L = model.num_layers
    M = jnp.sum(model.V, axis=1)  # (L, d, d)
    eye = jnp.eye(model.dim, dtype=M.dtype)

    def step(G, Ml):
        G = (eye + Ml / L) @ G
        return G, G

    _, Gs = jax.lax.scan(step, eye, M)
    Gs = jnp.concatenate([eye[None], Gs], axis=0)
    return jnp.einsum("lde,e->ld", Gs - eye, jnp.asarray(mean_difference, M.dtype))


# ----------------------------------------------------------------------------------------------
# Sweeps and fits


def default_grid(quick: bool = False) -> dict:
    """Built-in sizes of ``cfm-jax rates`` (``quick``: about a minute on 2 CPU cores)."""
    if quick:
        return dict(
            attention_dims=[2, 8],
            control_dims=[4],
            ns=[16, 32, 64, 128],
            control_ns=[8, 16, 32, 64],
            n_ref=1024,
            control_n_ref=256,
            seeds=6,
            subspace=None,
        )
    return dict(
        attention_dims=[1, 2, 4, 8, 16],
        control_dims=[1, 2, 4, 8],
        ns=[16, 32, 64, 128],
        control_ns=[8, 16, 32, 64],
        n_ref=2048,
        control_n_ref=512,
        seeds=8,
        subspace=(8, 2),
    )


def sweep_configs(grid: dict, *, base_seed: int = 0, layers: int = 4, adjoint: bool = True) -> list[dict]:
    """Configurations (JSON-able dicts), one per (field, population, d): all n and the floor.

    W1 between measures is only computed where the intrinsic dimension d' <= 3: beyond, a CPU-size
    reference cannot resolve n^{-1/d'} (the control field shows the curse of dimension instead).
    In d' = 1 (exact sorted formula, cheap) the whole reference is used; otherwise its first 512
    particles and Sinkhorn at ε = 2 % of the cost scale (bias ≲ 5 %, see ``cfm_jax.wasserstein``).
    """
    configs = []

    def group(field, population, d, k, ns, n_ref):
        configs.append(
            dict(field=field, population=population, dim=d, intrinsic_dim=k, ns=list(ns), n_ref=n_ref,
                 seeds=grid["seeds"], seed=base_seed, layers=layers, w1=(k or d) <= 3,
                 w1_size=min(1024 if (k or d) == 1 else 512, n_ref),
                 **({} if (k or d) == 1 else {"relative_epsilon": 0.02}),
                 **({} if adjoint else {"adjoint": False}))
        )

    for d in grid["attention_dims"]:
        group("attention", "gaussian", d, None, grid["ns"], grid["n_ref"])
    for d in grid["control_dims"]:
        group("control", "gaussian", d, None, grid["control_ns"], grid["control_n_ref"])
    if grid.get("subspace"):
        D, k = grid["subspace"]
        group("attention", "subspace_gaussian", D, k, grid["ns"], grid["n_ref"])
        group("control", "subspace_gaussian", D, k, grid["control_ns"], grid["control_n_ref"])
    return configs


def spec_from_config(config: dict) -> ChaosSpec:
    """The :class:`ChaosSpec` of one :func:`sweep_configs` entry (extra keys such as seeds ignored)."""
    names = {f.name for f in dataclasses.fields(ChaosSpec)}
    kw = {k: v for k, v in config.items() if k in names}
    kw["ns"] = tuple(int(n) for n in config["ns"])
    return ChaosSpec(**kw)


def run_config(config: dict) -> dict:
    """One sweep row: per-seed sup deviations (``values[q]``: seeds × ns), floors, wall time."""
    spec = spec_from_config(config)
    t0 = time.perf_counter()
    res = run_seeds(spec, config["seeds"], config.get("seed", 0))
    values = {k: v.tolist() for k, v in res.items() if not k.startswith("floor_")}
    floors = {k[len("floor_"):]: v.tolist() for k, v in res.items() if k.startswith("floor_")}
    return {"values": values, "floor": floors, "seconds": time.perf_counter() - t0}


def run_sweep(configs, out_dir, *, resume: bool = False, progress: bool = True, stop_after=None) -> list[dict]:
    """Run ``configs`` with the resumable :class:`Sweep` (rows in ``out_dir/rows.jsonl``)."""
    sweep = Sweep(Path(out_dir) / "rows.jsonl", resume=resume, progress=progress)
    return sweep.run(configs, run_config, desc="rates", stop_after=stop_after)


def fit_rates(rows: list[dict], *, floor_ratio: float = 0.5, n_boot: int = 1000) -> list[dict]:
    """Fitted log-log slopes with bootstrap 95 % CIs, per (field, population, d, quantity).

    The floor is the median over seeds of the deviation between two independent references,
    i.e. √2 × the reference's own error. A fit is flagged ``meaningful`` only where that error,
    floor/√2, is below ``floor_ratio`` times the mean deviation at the largest n; otherwise the
    slope reflects the proxy, not the rate.
    """
    fits = []
    for r in rows:
        cfg = r["config"]
        field, d = cfg["field"], cfg["dim"]
        dk = cfg.get("intrinsic_dim") or d
        ns = np.asarray(cfg["ns"], dtype=np.float64)
        for q in QUANTITIES:
            if q not in r["values"]:
                continue
            y = np.asarray(r["values"][q], dtype=np.float64).T  # (K, S)
            fit = fit_loglog(ns, y, n_boot=n_boot)
            fl = float(np.median(r["floor"][q])) if q in r.get("floor", {}) else float("nan")
            top = float(y[-1].mean())
            fits.append(
                dict(
                    field=field,
                    population=cfg["population"],
                    dim=d,
                    intrinsic_dim=dk,
                    quantity=q,
                    slope=fit.slope,
                    ci_low=fit.ci_low,
                    ci_high=fit.ci_high,
                    prefactor=fit.prefactor,
                    expected=expected_slope(field, q, dk),
                    floor=fl,
                    deviation_at_max_n=top,
                    meaningful=bool(not np.isfinite(fl) or fl / math.sqrt(2) < floor_ratio * top),
                    ns=ns.tolist(),
                    mean=y.mean(axis=1).tolist(),
                )
            )
    return fits


def format_table(fits: list[dict]) -> str:
    """Plain-text table: quantity, field, population, d (d'), slope, 95 % CI, expected, prefactor."""
    head = f"{'quantity':9} {'field':9} {'population':17} {'d':>3} {'dʹ':>3} {'slope':>7} {'95% CI':>17} {'expected':>8} {'prefactor':>9} {'floor/dev':>9}  note"
    lines = [head, "-" * len(head)]
    for f in fits:
        ratio = f["floor"] / f["deviation_at_max_n"] if np.isfinite(f["floor"]) else float("nan")
        note = "" if f["meaningful"] else "floor-limited: n_ref^(-1/d) not << n^(-1/d), slope not meaningful"
        lines.append(
            f"{f['quantity']:9} {f['field']:9} {f['population']:17} {f['dim']:>3} {f['intrinsic_dim']:>3} "
            f"{f['slope']:>7.3f} [{f['ci_low']:>7.3f},{f['ci_high']:>7.3f}] {f['expected']:>8.3f} "
            f"{f['prefactor']:>9.3g} {ratio:>9.2f}  {note}"
        )
    return "\n".join(lines)


def plot_rates(fits: list[dict], path) -> Path:
    """Log-log deviation vs n, one panel per quantity (attention) plus the control field; the
    expected slopes are drawn dashed through the last point of each curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("attention", q) for q in QUANTITIES if any(f["quantity"] == q and f["field"] == "attention" for f in fits)]
    panels += [("control", q) for q in ("token", "w1") if any(f["quantity"] == q and f["field"] == "control" for f in fits)]
    ncol = 3
    nrow = -(-len(panels) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.4 * nrow), squeeze=False)
    cmap = plt.get_cmap("viridis")
    for ax, (field, q) in zip(axes.ravel(), panels):
        sel = [f for f in fits if f["field"] == field and f["quantity"] == q]
        for i, f in enumerate(sel):
            color = cmap(i / max(1, len(sel) - 1))
            ns, m = np.array(f["ns"]), np.array(f["mean"])
            lab = f"d={f['dim']}" + (f" (dʹ={f['intrinsic_dim']})" if f["intrinsic_dim"] != f["dim"] else "")
            lab += f": {f['slope']:.2f}" + ("" if f["meaningful"] else " (floor)")
            ax.loglog(ns, m, "o-", color=color, label=lab, ms=3)
            ax.loglog(ns, m[-1] * (ns / ns[-1]) ** f["expected"], "--", color=color, lw=0.8, alpha=0.7)
            if np.isfinite(f["floor"]):
                ax.axhline(f["floor"], color=color, ls=":", lw=0.7)
        ax.set_title(f"{field}: {QUANTITIES[q]}", fontsize=8)
        ax.set_xlabel("context size n")
        ax.legend(fontsize=6)
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    fig.suptitle("finite vs infinite context (dashed: expected slope, dotted: reference floor)", fontsize=9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def prefactors_vs_dim(fits: list[dict]) -> dict:
    """Dimension-free constants: the fitted prefactor of attention's token quantities vs d."""
    out: dict = {}
    for f in fits:
        if f["field"] == "attention" and f["population"] == "gaussian" and f["quantity"] != "w1":
            out.setdefault(f["quantity"], {})[f["dim"]] = f["prefactor"]
    return out


# ----------------------------------------------------------------------------------------------
# CLI: cfm-jax rates


def add_arguments(parser):
    from ..cli import add_experiment_arguments

    add_experiment_arguments(parser, "cfm_out/rates")
    parser.add_argument("--dims", type=int, nargs="+", help="attention dimensions d")
    parser.add_argument("--control-dims", type=int, nargs="+", help="control-field dimensions d")
    parser.add_argument("--ns", type=int, nargs="+", help="context sizes n (attention)")
    parser.add_argument("--control-ns", type=int, nargs="+", help="context sizes n (control)")
    parser.add_argument("--n-ref", type=int, help="reference sample size (attention)")
    parser.add_argument("--control-n-ref", type=int, help="reference sample size (control)")
    parser.add_argument("--seeds", type=int, help="seeds per configuration (vmapped)")
    parser.add_argument("--layers", type=int, default=4, help="layers L")
    parser.add_argument("--no-subspace", action="store_true", help="skip the d'-subspace population")
    parser.add_argument("--no-adjoint", action="store_true", help="skip the adjoint quantities (p, ∇φ)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args) -> int:
    grid = default_grid(args.quick)
    for name, attr in (("attention_dims", "dims"), ("control_dims", "control_dims"), ("ns", "ns"),
                       ("control_ns", "control_ns"), ("n_ref", "n_ref"), ("control_n_ref", "control_n_ref"),
                       ("seeds", "seeds")):
        v = getattr(args, attr, None)
        if v is not None:
            grid[name] = v
    if args.no_subspace:
        grid["subspace"] = None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    configs = sweep_configs(grid, base_seed=args.seed, layers=args.layers, adjoint=not args.no_adjoint)
    t0 = time.perf_counter()
    rows = run_sweep(configs, out, resume=args.resume, progress=not args.no_progress)
    wall = time.perf_counter() - t0
    fits = fit_rates(rows)
    table = format_table(fits)
    print(table)
    print(
        "\nnote: W1 between measures is only computed where the intrinsic dimension d' <= 3 and only "
        "called meaningful where the reference's own error (floor/sqrt2, floor = two independent references) is < 0.5x the "
        "deviation at the largest n; in higher d the reference is too coarse (n_ref^(-1/d) is not "
        "<< n^(-1/d)) and the control field's slope shows the curse of dimension instead."
    )
    pre = prefactors_vs_dim(fits)
    if pre:
        print("\nfitted prefactor vs d (attention, Gaussian; dimension-free constants):")
        for q, by_d in pre.items():
            print(f"  {q:9} " + "  ".join(f"d={d}: {c:.3g}" for d, c in sorted(by_d.items())))
    fig = plot_rates(fits, out / "rates.png")
    (out / "table.txt").write_text(table + "\n")
    write_summary(
        out,
        dict(
            grid=grid,
            wall_seconds_this_run=wall,
            sweep_seconds=sum(r.get("seconds", 0.0) for r in read_rows(out / "rows.jsonl")),
            backend=jax.default_backend(),
            fits=fits,
            prefactor_vs_dim=pre,
            figure=fig.name,
            rows="rows.jsonl",
        ),
    )
    print(f"\nwrote {out / 'summary.json'}, {out / 'rows.jsonl'}, {fig} ({wall:.1f} s)")
    return 0


__all__ = [
    "ChaosSpec",
    "QUANTITIES",
    "adjoint_states",
    "build_model",
    "coupled_deviations",
    "default_grid",
    "expected_slope",
    "fit_rates",
    "format_table",
    "plot_rates",
    "run_config",
    "run_seeds",
    "run_seeds_loop",
    "run_sweep",
    "seed_deviations",
    "spec_from_config",
    "sweep_configs",
    "uniform_attention_deviation",
]
