"""experiments.runner: resumable sweeps, torn-line repair, strict JSON, the write lock."""

import json
import math

import numpy as np
import pytest

from cfm_jax.experiments.runner import WRITE_LOCK, Sweep, config_key, read_rows, write_summary


def _strict(text):
    """json.loads that refuses NaN/Infinity (they are not JSON)."""
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))


def _fn(config):
    return {"y": config["x"] ** 2, "arr": np.arange(3) * config["x"]}


def test_resume_runs_only_missing_rows_in_sweep_order(tmp_path):
    configs = [{"x": x} for x in (3, 1, 2)]
    calls = []
    fn = lambda c: calls.append(c["x"]) or _fn(c)  # noqa: E731
    Sweep(tmp_path / "r.jsonl", progress=False).run(configs, fn, stop_after=2)
    assert calls == [3, 1]
    rows = Sweep(tmp_path / "r.jsonl", resume=True, progress=False).run(configs, fn)
    assert calls == [3, 1, 2]  # only the missing one ran
    assert [r["config"]["x"] for r in rows] == [3, 1, 2] and [r["y"] for r in rows] == [9, 1, 4]
    assert rows[0]["arr"] == [0, 3, 6]
    fresh = Sweep(tmp_path / "r.jsonl", resume=False, progress=False)
    assert fresh.rows == []  # resume=False starts over


def test_torn_last_line_is_dropped(tmp_path):
    path = tmp_path / "r.jsonl"
    Sweep(path, progress=False).run([{"x": 1}, {"x": 2}], _fn)
    path.write_text(path.read_text() + '{"config": {"x": 3}, "ke')  # killed mid-write
    assert len(read_rows(path)) == 2
    rows = Sweep(path, resume=True, progress=False).run([{"x": 1}, {"x": 2}, {"x": 3}], _fn)
    assert [r["y"] for r in rows] == [1, 4, 9]
    assert all(_strict(line) for line in path.read_text().splitlines())


def test_missing_numbers_are_null(tmp_path):
    rows = Sweep(tmp_path / "r.jsonl", progress=False).run([{"x": 1}], lambda c: {"v": float("nan"), "w": [math.inf, 1.0]})
    assert rows[0]["v"] is None and rows[0]["w"] == [None, 1.0]
    path = write_summary(tmp_path, {"a": np.float32("nan"), "b": np.array([1.0, np.nan])})
    assert _strict(path.read_text()) == {"a": None, "b": [1.0, None]}


def test_config_key_is_order_independent():
    assert config_key({"a": 1, "b": (2, 3)}) == config_key({"b": [2, 3], "a": 1})
    assert config_key({"a": 1}) != config_key({"a": 2})


def test_rows_are_written_under_the_write_lock(tmp_path, monkeypatch):
    """The signal watcher takes WRITE_LOCK before exiting; a row append must hold it, the row's
    computation must not (or an interrupt would wait for it)."""
    import os

    seen = []
    real_open = os.open

    def spy(*a, **k):
        seen.append(("append", WRITE_LOCK.locked()))
        return real_open(*a, **k)

    def fn(config):
        seen.append(("compute", WRITE_LOCK.locked()))
        return {}

    monkeypatch.setattr(os, "open", spy)
    Sweep(tmp_path / "r.jsonl", progress=False).run([{"x": 1}], fn)
    assert seen == [("compute", False), ("append", True)]
