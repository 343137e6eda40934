"""cfm_jax._deprecations: every renamed or moved name works for one release, warns naming what replaced
it (from the user's line), and is public nowhere (not in ``__all__``, not cached in its module)."""

import importlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cfm_jax
from cfm_jax import chaos, distributed
from cfm_jax._deprecations import Deprecated, deprecated_attribute

#: (module, old name, its replacement as a public path) for the renames and moves to a subpackage
RENAMED = [
    ("cfm_jax", "CFM", "cfm_jax.PiecewiseConstantCFM"),
    ("cfm_jax", "gaussian", "cfm_jax.isotropic_gaussian"),
    ("cfm_jax", "linear", "jax.nn.identity"),
    *[
        ("cfm_jax", n, f"cfm_jax.ogd.{n}")
        for n in (
            "LipschitzEstimate",
            "OGDResult",
            "OGDState",
            "coupled_run",
            "estimate_lipschitz",
            "load_checkpoint",
            "ridge_sgd",
            "run_ogd",
            "save_checkpoint",
        )
    ],
    *[("cfm_jax", n, f"cfm_jax.stochastic.{n}") for n in ("NoiseKernel", "SphereSDE", "StochasticTransformer")],
]
#: (module, old name, a phrase of the warning) for the names kept without a public replacement object
RETIRED = [
    ("cfm_jax", "gaussian_flow", "use cfm_jax.forward"),
    ("cfm_jax.chaos", "program_count", r"use 1 \+ len\(cfm_jax.chaos.buckets\(spec\)\)"),
    ("cfm_jax.chaos", "run_seeds_loop", "use cfm_jax.chaos.run_seeds"),
    ("cfm_jax.distributed", "main", "use the command python -m cfm_jax.distributed"),
]


def _resolve(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_the_tables_list_exactly_these_names():
    """Every table entry is tested here (a new alias without a test fails)."""
    tables = {m: importlib.import_module(m)._DEPRECATED for m in ("cfm_jax", "cfm_jax.chaos", "cfm_jax.distributed")}
    listed = {(m, n) for m, t in tables.items() for n in t}
    assert listed == {(m, n) for m, n, _ in RENAMED + RETIRED}


@pytest.mark.parametrize("module,old,new", RENAMED, ids=[f"{m}.{o}" for m, o, _ in RENAMED])
def test_a_renamed_name_is_the_new_object_and_warns_naming_it(module, old, new):
    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=f"{module}.{old} is deprecated .*: use {new}") as record:
        value = getattr(mod, old)
    assert value is _resolve(new)
    assert record[0].filename == __file__  # the warning points at the line that used the old name
    assert old not in mod.__all__ and old not in vars(mod)  # not public, not cached: the next use warns too
    with pytest.warns(DeprecationWarning):
        getattr(mod, old)


@pytest.mark.parametrize("module,old,phrase", RETIRED, ids=[f"{m}.{o}" for m, o, _ in RETIRED])
def test_a_retired_name_warns_with_its_replacement(module, old, phrase):
    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=f"{module}.{old} is deprecated .*: {phrase}") as record:
        assert callable(getattr(mod, old))
    assert record[0].filename == __file__
    assert old not in mod.__all__


def test_from_import_of_an_old_name_warns():
    with pytest.warns(DeprecationWarning, match="cfm_jax.PiecewiseConstantCFM"):
        from cfm_jax import CFM  # noqa: F401  # pyright: ignore[reportAttributeAccessIssue]


@pytest.mark.parametrize("module,old,_", RENAMED + RETIRED, ids=[f"{m}.{o}" for m, o, _ in RENAMED + RETIRED])
def test_from_import_warns_once(module, old, _):
    """``from package import old`` reads the attribute twice (the import system's hasattr probe, then
    the binding): one warning, at the import line."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        exec(f"from {module} import {old}", {})
    deprecations = [r for r in record if issubclass(r.category, DeprecationWarning)]
    assert len(deprecations) == 1, [str(r.message) for r in deprecations]
    assert f"{module}.{old} is deprecated" in str(deprecations[0].message)


def test_an_unknown_name_is_still_an_attribute_error():
    for mod in (cfm_jax, chaos, distributed):
        with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
            mod.nothing_here  # noqa: B018  # pyright: ignore[reportAttributeAccessIssue]


def _model():
    return cfm_jax.Transformer.init(jax.random.key(0), 2, heads=1, mlp_width=2, layers=2, dtype=jnp.float64)


def test_the_old_names_still_compute_what_they_did():
    """Old code runs unchanged: CFM builds the same path, linear declares the affine MLP,
    gaussian_flow is forward on a Gaussian, the chaos tooling gives the programs and the same rows."""
    model = _model()
    x0 = jnp.array([[0.3, -0.2]], jnp.float64)
    z = jnp.array([[0.1, 0.2], [-0.4, 0.5], [0.7, -0.3]], jnp.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old_cfm, old_linear, old_flow = cfm_jax.CFM, cfm_jax.linear, cfm_jax.gaussian_flow
        program_count, run_seeds_loop = chaos.program_count, chaos.run_seeds_loop
    path = old_cfm(model.field, model.stacked_params(), 2)
    np.testing.assert_array_equal(cfm_jax.forward(path, x0, z).x1, cfm_jax.forward(model, x0, z).x1)
    affine = cfm_jax.Transformer.init(
        jax.random.key(1), 2, heads=1, mlp_width=2, layers=2, activation=old_linear, qk_scale=0.3
    )
    assert isinstance(affine.field, cfm_jax.AbstractGaussianField)
    mu = cfm_jax.GaussianMeasure(jnp.zeros(2), jnp.eye(2))
    np.testing.assert_array_equal(old_flow(affine, x0, mu).x1, cfm_jax.forward(affine, x0, mu).x1)
    with pytest.raises(ValueError, match="`mu` must be a GaussianMeasure"):
        old_flow(affine, x0, z)
    spec = chaos.ChaosSpec(field="control", dim=1, ns=(2, 4), n_ref=8, layers=1, batch=2)
    assert program_count(spec) == 1 + len(chaos.buckets(spec))
    rows = run_seeds_loop(spec, 2)
    np.testing.assert_allclose(rows["token"], chaos.run_seeds(spec, 2)["token"], rtol=1e-10, atol=1e-14)


def test_the_old_launcher_entry_point_still_runs():
    with pytest.warns(DeprecationWarning, match="python -m cfm_jax.distributed"):
        main = distributed.main
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    assert main(["--processes", "0", "--", "true"]) == 2  # one line on stderr, exit 2


@pytest.mark.parametrize("kind", ["forward", "adjoint_trajectories"])
def test_ss_is_ts_with_a_warning(kind):
    """``FlowSolution.ts`` and ``AdjointSolution.ts`` (diffrax's name); ``ss`` reads it and warns."""
    model = _model()
    x0, z = jnp.ones((1, 2), jnp.float64), jnp.array([[0.1, 0.2], [-0.4, 0.5]], jnp.float64)
    if kind == "forward":
        sol = cfm_jax.forward(model, x0, z, saveat=cfm_jax.SaveAt(layers=True))
        owner = "FlowSolution"
    else:
        sol = cfm_jax.adjoint_trajectories(model, x0, z, x0)
        owner = "AdjointSolution"
    assert sol.ts is not None
    assert float(sol.ts[0]) == 0.0 and float(sol.ts[-1]) == 1.0
    with pytest.warns(DeprecationWarning, match=f"{owner}.ss is deprecated .*: use {owner}.ts") as record:
        ss = sol.ss
    assert ss is sol.ts and record[0].filename == __file__


def test_coupled_deviations_ss_key_is_ts_with_a_warning():
    """``chaos.coupled_deviations`` returns the depths under ``"ts"``; ``["ss"]`` (and ``.get``) reads
    them for one release and warns; the result stays a pytree through the caller's ``jit`` and ``vmap``."""
    model = _model()
    x0, ref = jnp.ones((1, 2), jnp.float64), jax.random.normal(jax.random.key(0), (6, 2), jnp.float64)
    dev = chaos.coupled_deviations(model, x0, ref[:3], ref, adjoint=False)
    assert "ss" not in dev and float(dev["ts"][0]) == 0.0 and float(dev["ts"][-1]) == 1.0
    match = r"coupled_deviations\(\.\.\.\)\['ss'\] is deprecated .*: use \['ts'\]"
    with pytest.warns(DeprecationWarning, match=match) as record:
        ss = dev["ss"]
    assert ss is dev["ts"] and record[0].filename == __file__
    with pytest.warns(DeprecationWarning, match=match):
        assert dev.get("ss") is dev["ts"]
    assert dev.get("absent") is None
    with pytest.raises(KeyError):
        dev["absent"]
    f = jax.jit(lambda r: chaos.coupled_deviations(model, x0, r[:3], r, adjoint=False))
    jitted = f(ref)
    assert type(jitted) is type(dev) and set(jitted) == set(dev)
    np.testing.assert_array_equal(jitted["token"], dev["token"])
    batched = jax.vmap(f)(jnp.stack([ref, ref + 1.0]))
    assert type(batched) is type(dev) and batched["token"].shape == (2, *dev["token"].shape)
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(dev)[0]]
    assert paths == [f"[{k!r}]" for k in sorted(dev)]  # key paths like a dict's


def test_deprecated_attribute_reads_the_value_at_each_use():
    entry = Deprecated("math", "pi", "math.tau / 2")
    with pytest.warns(DeprecationWarning, match=r"pkg.PI is deprecated and will be removed .*: use math.tau / 2\."):
        assert deprecated_attribute("pkg", "PI", entry) == pytest.approx(3.141592653589793)
