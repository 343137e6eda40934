"""claims.common: a row's configuration and row selection."""

from cfm_experiments.claims.common import base_config, dim_of, select


def test_base_config_and_select():
    c = base_config(3, ns=(4, 16), dim=5, seeds=8)
    assert c == dict(
        law="gaussian", dim=5, heads=1, width=0, layers=4, scale=1.0, qk=1.0, v=1.0, seed=3, ns=[4, 16], seeds=8
    )
    rows = [{"config": base_config(0, ns=[4], dim=d, sweep=s)} for d, s in ((2, "qk"), (3, "scale"), (4, "qk"))]
    assert [dim_of(r) for r in select(rows, sweep="qk")] == [2, 4]
    assert select(rows, sweep="ball") == []
