"""claims.common: a row's configuration, row selection and the size buckets of the programs."""

from cfm_experiments.claims import rho as R
from cfm_experiments.claims.common import base_config, buckets, dim_of, select


def test_base_config_and_select():
    c = base_config(3, ns=(4, 16), dim=5, seeds=8)
    assert c == dict(
        law="gaussian", dim=5, heads=1, width=0, layers=4, scale=1.0, qk=1.0, v=1.0, seed=3, ns=[4, 16], seeds=8
    )
    rows = [{"config": base_config(0, ns=[4], dim=d, sweep=s)} for d, s in ((2, "qk"), (3, "scale"), (4, "qk"))]
    assert [dim_of(r) for r in select(rows, sweep="qk")] == [2, 4]
    assert select(rows, sweep="ball") == []


def test_buckets_keep_large_sizes_alone():
    assert buckets([10, 40, 160, 640, 2560, 10240], R.OWN_BUCKET) == [[10, 40], [160, 640], [2560], [10240]]
    assert buckets([2, 4, 8, 16, 32], 8) == [[2, 4, 8], [16], [32]]
