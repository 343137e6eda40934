"""Attention kernels: the fused Pallas pair (interpret mode on a CPU) against the XLA path for the means,
the log-sum-exp, every local product and gradients through ``forward``; zero weights, huge logits, the
active mask and targets, vmap, forward mode refused (every derivative route × adjoint: works or names the
XLA kernel), the settings checked, the JAX versions it runs on, several (fake) devices."""

import os
import subprocess
import sys
import textwrap
from typing import cast

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.core import jaxprs_in_params

import cfm_jax
from cfm_jax import AttentionField, EmpiricalMeasure, PallasAttention, Transformer, XLAAttention, loss_and_grad
from cfm_jax._fields.attention import pallas as fused
from cfm_jax._fields.attention.pallas import TRITON_BEFORE_JAX

#: blocks of 16 keep the shapes small yet make every test span several query and key blocks
SMALL = PallasAttention(block_q=16, block_k=16)
TOL = {jnp.float32: 2e-5, jnp.float64: 1e-12}


def _problem(dtype, q, n, d, H, seed=0, keep=None, scale=1.0):
    k = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.normal(k[0], (q, d), dtype)
    z = jax.random.normal(k[1], (n, d), dtype)
    A = scale * jax.random.normal(k[2], (H, d, d), dtype) / d**0.5
    logw = jnp.log(jax.random.uniform(k[3], (n,), dtype, 0.5, 1.5))
    if keep is not None:
        logw = jnp.where(keep, logw, -jnp.inf)
    return x, z, logw, A


def _keep(pattern, n):
    """Which weights are positive: all, leading zeros, trailing zeros, all but one zero."""
    i = np.arange(n)
    return {"none": i >= 0, "leading": i >= 2 * n // 3, "trailing": i < n // 3, "all_but_one": i == n // 2}[pattern]


def _close(got, want, tol, what=""):
    want = np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * max(1.0, float(np.abs(want).max())), err_msg=what)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("H,d", [(1, 3), (3, 16), (8, 64)])
def test_means_lse_and_vjp_match_xla(dtype, H, d):
    """Means, log-sum-exp and the VJP (centred g, dK + dV, per-key bias gradient with a second
    cotangent) equal the dense XLA path; rows (q·H) and keys not multiples of the blocks, zero
    weights leading, trailing and all but one."""
    q, n = 21, 37
    ref = XLAAttention(chunk_size=None)
    means = jax.jit(lambda *a: (SMALL.means(*a), ref.means(*a)))
    vjp = jax.jit(lambda *a: (SMALL.means_vjp(*a), ref.means_vjp(*a)))

    @jax.jit(static_argnums=0)
    def grads(kernel, *a):
        def loss(x, z, logw, A):
            m, lse = kernel.means(x, z, logw, A)
            return jnp.sum(jnp.sin(m)) + jnp.sum(lse**2)

        return jax.grad(loss, argnums=(0, 1, 2, 3))(*a)

    for pattern in ("none", "leading", "trailing", "all_but_one"):
        x, z, logw, A = _problem(dtype, q, n, d, H, keep=_keep(pattern, n))
        (m, lse), (m0, lse0) = means(x, z, logw, A)
        _close(m, m0, TOL[dtype], f"means, {pattern}")
        _close(lse, lse0, TOL[dtype], f"lse, {pattern}")
        c = jax.random.normal(jax.random.key(9), (H, q, d), dtype)
        ck = c * (jnp.arange(q) % 3 > 0)[None, :, None]
        got, want = vjp(x, z, logw, A, m0, lse0, c, ck)
        for name, a, b in zip(("g", "dkeys", "dlogw"), got, want):
            _close(a, b, TOL[dtype], f"{name}, {pattern}")
        assert not np.any(np.asarray(got[2])[~_keep(pattern, n)]), "zero weights get a zero bias gradient"
        # autodiff through the custom_vjp, with cotangents on both the means and the log-sum-exp
        for a, b in zip(grads(SMALL, x, z, logw, A), grads(ref, x, z, logw, A)):
            _close(a, b, 10 * TOL[dtype], f"jax.grad, {pattern}")


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_local_products_match_xla_and_a_dense_reference(dtype):
    """Every local product of AttentionField (velocity, dx, dz, dlogw, dQ/dK/dV, dtargets, φ) with the
    `active` mask and targets: the Pallas kernel, the XLA closed form (dense and in blocks) and the
    generic jax.vjp of an independent dense softmax field agree."""

    class Dense(cfm_jax.AbstractField):
        def __call__(self, x, measure, params):
            A = jnp.einsum("hed,hef->hdf", params["Q"], params["K"])
            logits = jnp.einsum("qd,hdf,nf->hqn", x, A, measure.points)
            e = measure.weights * jnp.exp(logits - jax.lax.stop_gradient(logits.max(-1, keepdims=True)))
            return jnp.einsum("hed,hqn,nd->qe", params["V"], e / e.sum(-1, keepdims=True), measure.points)

    H, d, n, q = 3, 5, 29, 19
    k = jax.random.split(jax.random.key(4), 6)
    params = {name: jax.random.normal(kk, (H, d, d), dtype) / d for name, kk in zip("QKV", k[:3])}
    z = jax.random.normal(k[3], (n, d), dtype)
    w = jax.random.uniform(k[4], (n,), dtype, 0.5, 1.5).at[:7].set(0.0)
    mu = EmpiricalMeasure.unchecked(z, w / w.sum())
    rows = jax.random.normal(k[5], (q, d), dtype)
    cot = jax.random.normal(jax.random.key(8), (q, d), dtype)
    active = (jnp.arange(q) < 13).astype(dtype)
    targets = rows[13:]

    def products(field):
        return jax.jit(lambda r, c: field.local_vjp(r, mu, params, c, active=active, targets=targets))(rows, cot)

    want = products(Dense())
    for field in (
        AttentionField(kernel=SMALL),
        AttentionField(kernel=XLAAttention(chunk_size=None)),
        AttentionField(chunk_size=4, key_chunk_size=6),
    ):
        got = products(field)
        for name, a, b in zip(want._fields, jax.tree.leaves(got._asdict()), jax.tree.leaves(want._asdict())):
            _close(a, b, 10 * TOL[dtype], f"{name} of {field.attention_kernel()!r}")


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_gradients_through_forward_match_xla(dtype):
    """jax.grad of a loss through `forward` with the Pallas kernel: by the hand adjoint (which calls
    the kernel's VJP) and by autodiff through its custom_vjp, both equal to the XLA path's; the
    forward solve too. n and B·H not multiples of the blocks, an MLP beside the attention."""
    model = Transformer.init(jax.random.key(2), 4, heads=3, mlp_width=5, layers=2, dtype=dtype)
    pallas = model.with_kernel(SMALL)
    k = jax.random.split(jax.random.key(3), 3)
    x0 = jax.random.normal(k[0], (5, 4), dtype)
    ctx = EmpiricalMeasure(jax.random.normal(k[1], (23, 4), dtype))
    y = jax.random.normal(k[2], (5, 4), dtype)
    ref_sol, sol = cfm_jax.forward(model, x0, ctx), cfm_jax.forward(pallas, x0, ctx)
    _close(sol.x1, ref_sol.x1, TOL[dtype], "x1")
    _close(sol.context.points, ref_sol.context.points, TOL[dtype], "context")
    loss0, g0 = loss_and_grad(model, x0, ctx, y)
    by_hand, by_autodiff = (
        loss_and_grad(pallas, x0, ctx, y),
        loss_and_grad(pallas, x0, ctx, y, adjoint=diffrax.RecursiveCheckpointAdjoint()),
    )
    for adjoint, (loss, g) in (("hand", by_hand), ("autodiff", by_autodiff)):
        _close(loss, loss0, TOL[dtype], "loss")
        for a, b in zip(g.stacked_params().values(), g0.stacked_params().values()):
            _close(a, b, 10 * TOL[dtype], f"gradient by {adjoint}")


def test_dq_is_centred():
    """g = Cov_α v does not change when every key moves by the same offset (the logits move by a
    constant per row): float32, keys 100 away from the origin with unit spread. Without the centring
    (Σ_j α_j s_j) m, the rounding of m enters g amplified by |m|² and breaks this by ~1e-3."""
    H, d, q, n = 1, 3, 10, 40
    x, z, logw, A = _problem(jnp.float32, q, n, d, H, seed=3)
    c = jax.random.normal(jax.random.key(1), (H, q, d), jnp.float32)
    vjp = jax.jit(lambda z: SMALL.means_vjp(x, z, logw, A, *SMALL.means(x, z, logw, A), c, c)[0])
    _close(vjp(z + 100.0), vjp(z), 1e-4, "g with the keys shifted by 100")


def test_logits_of_1e4_stay_finite_in_float32():
    """Logits of size 1e4 (far past exp's float32 range): the running log-sum-exp keeps the means and
    gradients finite and equal to the float64 XLA path."""
    x, z, logw, A = _problem(jnp.float64, 9, 21, 3, 2, scale=60.0)
    x, z = 10 * x, 10 * z
    u = jnp.einsum("qd,hdf->hqf", x, A)
    assert float(jnp.abs(jnp.einsum("hqf,nf->hqn", u, z)).max()) > 1e4
    f32 = [a.astype(jnp.float32) for a in (x, z, logw, A)]

    def loss(kernel, *a):
        return jnp.sum(kernel.means(*a)[0] ** 2)

    m = jax.jit(SMALL.means)(*f32)[0]
    g = jax.jit(jax.grad(lambda *a: loss(SMALL, *a), argnums=(0, 1, 3)))(*f32)
    assert all(bool(jnp.isfinite(a).all()) for a in (m, *g))
    ref = XLAAttention(chunk_size=None)
    _close(m, ref.means(x, z, logw, A)[0], 1e-4, "means")
    # the softmax is nearly one-hot, so the float32 gradient is checked against float64 autodiff
    g64 = jax.grad(lambda *a: loss(ref, *a), argnums=(0, 1, 3))(x, z, logw, A)
    for a, b in zip(g, g64):
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-3 * float(jnp.abs(b).max()))


def test_vmap_over_seeds():
    """vmap over context draws (seeds) of the means and of their gradient: each equals its own call."""
    x, _, logw, A = _problem(jnp.float64, 7, 19, 3, 2)
    keys = jax.random.split(jax.random.key(5), 3)

    def one(key):
        z = jax.random.normal(key, (19, 3), jnp.float64)
        return jax.value_and_grad(lambda z: jnp.sum(jnp.tanh(SMALL.means(x, z, logw, A)[0])))(z)

    batched = jax.jit(jax.vmap(one))(keys)
    for i, key in enumerate(keys):
        for a, b in zip(batched, jax.jit(one)(key)):
            _close(a[i], b, 1e-13, f"seed {i}")


def test_forward_mode_is_refused():
    """Forward mode cannot run through the kernel's custom_vjp: a TypeError, not wrong numbers; through
    `forward` (any adjoint, also jax.hessian, which the XLA path supports) one naming the XLA kernel."""
    x, z, logw, A = _problem(jnp.float64, 5, 9, 3, 1)
    with pytest.raises(TypeError, match="jvp|forward-mode"):
        jax.jvp(lambda z: SMALL.means(x, z, logw, A)[0], (z,), (jnp.ones_like(z),))

    def f(z):
        return jnp.sum(SMALL.means(x, z, logw, A)[0] ** 2)

    for second in (jax.hessian(f), jax.grad(lambda z: jnp.sum(jax.grad(f)(z)))):
        with pytest.raises(TypeError, match="XLAAttention"):
            second(z)
    model = Transformer.init(jax.random.key(0), 3, layers=1, dtype=jnp.float64).with_kernel(SMALL)

    def loss(x0, adjoint=None):
        kw = {} if adjoint is None else {"adjoint": adjoint}
        return jnp.sum(cfm_jax.forward(model, x0, z, **kw).x1 ** 2)

    with pytest.raises(TypeError, match="XLAAttention"):
        jax.hessian(loss)(x)  # the default hand adjoint: forward mode over its backward sweep
    for adjoint in (diffrax.DirectAdjoint(), diffrax.RecursiveCheckpointAdjoint()):
        with pytest.raises(TypeError, match="XLAAttention"):
            jax.jvp(lambda x0: loss(x0, adjoint), (x,), (x,))


def test_settings_are_checked():
    assert PallasAttention()._config().interpret is True  # off a GPU
    with pytest.raises(ValueError, match="`precision`"):
        PallasAttention(precision="bf16")
    with pytest.raises(ValueError, match="`block_q`"):
        PallasAttention(block_q=24)
    with pytest.raises(ValueError, match="`mesh`"):
        PallasAttention(mesh="data")  # pyright: ignore[reportArgumentType]


def _shapes(dtype, q, n, d, H):
    return [jax.ShapeDtypeStruct(s, dtype) for s in ((q, d), (n, d), (n,), (H, d, d))]


#: the refusal on a JAX that deprecates the Triton backend: the kernel, the running JAX, the alternative
_REFUSAL = rf"PallasAttention .*JAX {jax.__version__.replace('.', '[.]')} deprecates.*XLAAttention\(\)"


@pytest.mark.parametrize("d", [3, 64])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_kernels_lower_to_triton_for_a_gpu(dtype, d, monkeypatch):
    """Without a GPU, the kernels are lowered for CUDA as on one (jax.export to the "cuda" platform).
    On a JAX whose Pallas Triton backend is supported (< TRITON_BEFORE_JAX): the forward and the three
    backward-side calls of a gradient pass the Triton lowering (block shapes, dot shapes and dtypes,
    float64 included), and each precision gives its own program. On a later JAX (which deprecates that
    backend): one NotImplementedError naming PallasAttention, the JAX version and XLAAttention, raised
    before any lowering (so no deprecation warning from inside it)."""
    from jax import export

    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")  # the kernel's own choice: not interpreted
    # 160 query rows and 777 keys: padded to 192 and 832, neither a power of two
    shapes = _shapes(dtype, 40, 777, d, 4)
    triton_call = "__gpu$xla.gpu.triton"
    supported = jax.__version_info__ < TRITON_BEFORE_JAX
    modules = {}
    for precision in ("3xTF32", "TF32", "IEEE"):
        kernel = PallasAttention(precision=precision)

        def grad(x, z, logw, A, kernel=kernel):
            return jax.grad(lambda *a: jnp.sum(kernel.means(*a)[0] ** 2), argnums=(0, 1, 2, 3))(x, z, logw, A)

        for name, fn in (("forward", kernel.means), ("gradient", grad)):
            exporter = export.export(
                jax.jit(fn), platforms=["cuda"], disabled_checks=[export.DisabledSafetyCheck.custom_call(triton_call)]
            )
            if not supported:
                with pytest.raises(NotImplementedError, match=_REFUSAL):
                    exporter(*shapes)
                continue
            modules[precision, name] = text = exporter(*shapes).mlir_module()
            assert text.count(f"@{triton_call}") == (1 if name == "forward" else 3), (precision, name)
    if supported and dtype == jnp.float32:
        assert len({modules[p, "forward"] for p in ("3xTF32", "TF32", "IEEE")}) == 3


@pytest.mark.parametrize(
    "version,supported", [((0, 4, 35), True), ((0, 10, 2), True), ((0, 11, 0), False), ((0, 12, 1), False)]
)
def test_gpu_kernels_need_a_jax_with_the_triton_backend(version, supported, monkeypatch):
    """The version rule from jax.__version_info__ (whatever JAX runs the test): on a GPU, a JAX before
    TRITON_BEFORE_JAX runs the kernels (not interpreted) and a later one is refused at trace time with
    one sentence naming the version and XLAAttention; off a GPU, interpret mode on every version."""
    assert TRITON_BEFORE_JAX == (0, 11, 0)  # the release that deprecated Pallas Triton (Pallas changelog)
    monkeypatch.setattr(jax, "__version_info__", version)
    monkeypatch.setattr(jax, "__version__", ".".join(map(str, version)))
    shapes = _shapes(jnp.float32, 5, 9, 3, 2)
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert SMALL._config().interpret is True and SMALL.unsupported() is None
    jax.eval_shape(SMALL.means, *shapes)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    if supported:
        assert SMALL._config().interpret is False and SMALL.unsupported() is None
        jax.eval_shape(SMALL.means, *shapes)  # traced for the Triton lowering (not lowered: no GPU here)
        return
    match = rf"^PallasAttention .* JAX {'[.]'.join(map(str, version))} deprecates .*XLAAttention\(\)"
    for call in (lambda: jax.eval_shape(SMALL.means, *shapes), SMALL._config):
        with pytest.raises(NotImplementedError, match=match) as error:
            call()
        # one sentence (JAX appends its note on the traceback's filtered frames on lines of its own)
        sentence = str(error.value).splitlines()[0]
        assert sentence.endswith(".") and ". " not in sentence, sentence
        assert sentence == SMALL.unsupported()  # the kernel says why before it is called


def _eqns(jaxpr):
    """Every equation of ``jaxpr`` and of the jaxprs inside its equations (loops, custom rules, kernels)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in jaxprs_in_params(eqn.params):
            yield from _eqns(sub)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_gpu_program_pads_the_head_dimension_and_sets_the_dot_precision(dtype):
    """The kernels' program as traced for a GPU (not interpreted), read from its jaxpr: the forward and
    both backward passes of a gradient are three pallas_calls whose blocks have the head dimension
    padded to a power of two (d = 20 -> 32), whose rows are whole query blocks and keys whole key
    blocks (block_q = 16 < block_k = 32) holding every key, and whose every product is float64 at
    HIGHEST (the Triton lowering reads DEFAULT as TF32) or float32 at the preset asked for."""
    block_q, block_k, q, n, d, H = 16, 32, 7, 37, 20, 2
    x, z, logw, A = _problem(dtype, q, n, d, H)
    u = jnp.einsum("qd,hdf->hqf", x, A).reshape(H * q, d)
    for precision, preset in fused._PRESETS.items():
        cfg = fused._Config(block_q, block_k, precision, interpret=False, mesh=None)

        def grad(u, z, logw, cfg=cfg):
            return jax.grad(lambda *a: jnp.sum(cast(tuple, fused._pallas_means(cfg, *a))[0] ** 2), argnums=(0, 1, 2))(
                u, z, logw
            )

        calls = [e for e in _eqns(jax.make_jaxpr(grad)(u, z, logw).jaxpr) if e.primitive.name == "pallas_call"]
        assert len(calls) == 3
        want = (jax.lax.Precision.HIGHEST,) * 2 if dtype == jnp.float64 else preset
        for call in calls:
            refs = [v.aval.shape for v in call.params["jaxpr"].invars]  # the blocks the kernel sees
            assert {s[1] for s in refs if len(s) == 2} == {32}, refs
            (rows, _), (keys, _) = (v.aval.shape for v in call.invars[:2])  # the padded u and z
            assert rows % block_q == 0 and keys % block_k == 0 and n <= keys < n + block_k, (rows, keys)
            dots = [e for e in _eqns(call.params["jaxpr"]) if e.primitive.name == "dot_general"]
            assert dots and all(e.params["precision"] == want for e in dots), {e.params["precision"] for e in dots}


@pytest.mark.parametrize("block_q,block_k", [(16, 32), (32, 16)])
def test_unequal_blocks_match_xla(block_q, block_k):
    """Query and key blocks of different sizes, either way round, with rows (q·H = 42) and keys (n = 37)
    multiples of neither: the means, log-sum-exp and VJP equal the XLA path's (keys padded to whole
    key blocks, rows to whole query blocks)."""
    kernel = PallasAttention(block_q=block_q, block_k=block_k)
    ref = XLAAttention(chunk_size=None)
    x, z, logw, A = _problem(jnp.float64, 14, 37, 3, 3, keep=_keep("trailing", 37))
    (m, lse), (m0, lse0) = jax.jit(lambda *a: (kernel.means(*a), ref.means(*a)))(x, z, logw, A)
    _close(m, m0, TOL[jnp.float64], "means")
    _close(lse, lse0, TOL[jnp.float64], "lse")
    c = jax.random.normal(jax.random.key(9), m0.shape, jnp.float64)
    vjp = jax.jit(lambda k, *a: k.means_vjp(*a), static_argnums=0)
    for name, a, b in zip(
        ("g", "dkeys", "dlogw"), vjp(kernel, x, z, logw, A, m0, lse0, c, c), vjp(ref, x, z, logw, A, m0, lse0, c, c)
    ):
        _close(a, b, TOL[jnp.float64], name)


#: the start of the sharded scripts: ``same_means_and_gradient`` holds one device's kernel and the
#: mesh's to the same means (1e-13) and the same gradient of a loss of them (1e-12)
KERNELS_AGREE = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    import cfm_jax


    def same_means_and_gradient(one, many, x, z, logw, A):
        for a, b in zip(jax.jit(many.means)(x, z, logw, A), one.means(x, z, logw, A)):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-13)
        grad = lambda kern: jax.grad(lambda x, z, lw: jnp.sum(jnp.sin(kern.means(x, z, lw, A)[0])), (0, 1, 2))
        for a, b in zip(jax.jit(grad(many))(x, z, logw), grad(one)(x, z, logw)):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    """
)

SHARDED = KERNELS_AGREE + textwrap.dedent(
    """
    from cfm_jax import PallasAttention, Transformer
    for ndev in (2, 4):
        mesh = cfm_jax.context_mesh(jax.devices()[:ndev])
        one, many = PallasAttention(block_q=16, block_k=16), PallasAttention(block_q=16, block_k=16, mesh=mesh)
        k = jax.random.split(jax.random.key(ndev), 4)
        x, z = jax.random.normal(k[0], (11, 3)), jax.random.normal(k[1], (20, 3))
        A, logw = jax.random.normal(k[2], (2, 3, 3)), jnp.log(jax.random.uniform(k[3], (20,), minval=0.5))
        same_means_and_gradient(one, many, x, z, logw, A)
        # the hand-adjoint gradient of a sharded solve
        model = Transformer.init(jax.random.key(0), 3, heads=2, layers=2, dtype=jnp.float64)
        ctx = cfm_jax.EmpiricalMeasure(z, jnp.full(20, 0.05))
        y = jax.random.normal(k[3], (11, 3))
        loss0, g0 = cfm_jax.loss_and_grad(model.with_kernel(one), x, ctx, y)
        xs, cs = cfm_jax.shard_inputs(x, ctx, mesh)
        ms, ys = cfm_jax.replicate((model.with_kernel(many), y), mesh)
        # under a caller's jit, at top level (checks as data) and inside a user's compiled step
        step = cfm_jax.compiled(lambda m, x, c, y: cfm_jax.loss_and_grad(m, x, c, y))
        for how in (jax.jit(cfm_jax.loss_and_grad), cfm_jax.loss_and_grad, step):
            loss, g = cfm_jax.gather(how(ms, xs, cs, ys))
            np.testing.assert_allclose(loss, loss0, rtol=1e-13)
            for a, b in zip(g.stacked_params().values(), g0.stacked_params().values()):
                np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
        x1 = cfm_jax.forward(model.with_kernel(one), x, ctx).x1
        np.testing.assert_allclose(cfm_jax.gather(cfm_jax.forward(ms, xs, cs).x1), x1, rtol=0, atol=1e-12)
    print("SHARDED_OK")
    """
)


@pytest.mark.slow  # a second process and its programs on 2 and 4 devices
def test_sharded_kernel_matches_one_device():
    """Inside shard_map over query rows (context gathered, key-side gradients summed) on 2 and 4 fake
    CPU devices: the means, their gradient and a hand-adjoint loss gradient (under a caller's jit, at
    top level and in a ``cfm_jax.compiled`` step) and the forward at top level equal one device's."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", SHARDED], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "SHARDED_OK" in out.stdout


UNEVEN = KERNELS_AGREE + textwrap.dedent(
    """
    from cfm_jax import PallasAttention
    for ndev in (3, 4):
        mesh = cfm_jax.context_mesh(jax.devices()[:ndev])
        one = PallasAttention(block_q=16, block_k=32)
        many = PallasAttention(block_q=16, block_k=32, mesh=mesh)
        k = jax.random.split(jax.random.key(ndev), 4)
        x, z = jax.random.normal(k[0], (13, 3)), jax.random.normal(k[1], (21, 3))
        A, logw = jax.random.normal(k[2], (2, 3, 3)), jnp.log(jax.random.uniform(k[3], (21,), minval=0.5))
        same_means_and_gradient(one, many, x, z, logw, A)
    print("UNEVEN_OK")
    """
)


def test_sharded_kernel_with_rows_that_do_not_divide_over_the_mesh():
    """26 query rows (13 × 2 heads) on 3 and 4 fake CPU devices with blocks of 16 rows and 32 keys: the
    rows are padded to whole blocks on every device (48 and 64 rows), and the means and their gradient
    equal one device's."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", UNEVEN], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "UNEVEN_OK" in out.stdout


#: the derivative routes of a scalar loss: reverse mode, compiled reverse mode, forward mode, forward over reverse
_ROUTES = {"grad": jax.grad, "jit(grad)": lambda f: jax.jit(jax.grad(f)), "jacfwd": jax.jacfwd, "hessian": jax.hessian}
_ADJOINTS = {
    "hand": None,
    "RecursiveCheckpointAdjoint": diffrax.RecursiveCheckpointAdjoint(),
    "DirectAdjoint": diffrax.DirectAdjoint(),
}


@pytest.mark.parametrize("adjoint", list(_ADJOINTS))
@pytest.mark.parametrize("route", list(_ROUTES))
def test_every_derivative_route_works_or_names_the_xla_kernel(route, adjoint):
    """Each route through ``forward`` (in the tokens and the context points at once, zero weights among
    the context's) with the fused kernel either equals the XLA kernel's or, where forward mode meets
    the fused kernel, is refused with a TypeError naming XLAAttention; reverse mode always runs."""
    d, B, n = 2, 3, 5
    model = Transformer.init(jax.random.key(4), d, heads=2, mlp_width=3, layers=1, dtype=jnp.float64)
    k = jax.random.split(jax.random.key(5), 2)
    theta = jnp.concatenate([jax.random.normal(k[0], (B * d,)), jax.random.normal(k[1], (n * d,))])
    w = jnp.array([0.3, 0.0, 0.25, 0.45, 0.0])
    adj = {} if _ADJOINTS[adjoint] is None else {"adjoint": _ADJOINTS[adjoint]}

    def loss(m):
        def f(theta):
            x0, z = theta[: B * d].reshape(B, d), theta[B * d :].reshape(n, d)
            return jnp.sum(jnp.sin(cfm_jax.forward(m, x0, EmpiricalMeasure(z, w), **adj).x1))

        return f

    def attempt(m):
        try:
            return _ROUTES[route](loss(m))(theta)
        except TypeError as e:
            return e

    want, got = attempt(model.with_kernel(XLAAttention())), attempt(model.with_kernel(SMALL))
    if isinstance(got, TypeError):
        assert route in ("jacfwd", "hessian"), f"{route} with {adjoint}: {got}"
        assert "XLAAttention" in str(got).splitlines()[0], str(got)
        return
    assert not isinstance(want, TypeError), f"the fused kernel ran {route} where the XLA path is refused: {want}"
    _close(got, want, 1e-10, f"{route} with {adjoint}")
