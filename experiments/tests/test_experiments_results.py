"""experiments.runner: resumable sweeps, torn-line repair, strict JSON, the write lock."""

import json
import math

import numpy as np
import pytest

from cfm_experiments.results import MANIFEST, ResultsFolder, Sweep, config_key, read_rows
from cfm_experiments.signals import WRITE_LOCK


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
    rows = Sweep(tmp_path / "r.jsonl", progress=False).run(
        [{"x": 1}], lambda c: {"v": float("nan"), "w": [math.inf, 1.0]}
    )
    assert rows[0]["v"] is None and rows[0]["w"] == [None, 1.0]
    folder = ResultsFolder(tmp_path / "o", "exp", {})
    path = folder.write_summary({"a": np.float32("nan"), "b": np.array([1.0, np.nan])})
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


def _lines(path):
    """The rows of ``path`` without their wall times (which differ between runs)."""
    return [{k: v for k, v in json.loads(line).items() if k != "seconds"} for line in path.read_text().splitlines()]


def test_resume_twice_with_and_without_stop_after(tmp_path):
    """Three partial runs (stop_after 2, then 1, then to the end) give the file of one full run, each
    configuration computed exactly once."""
    configs = [{"x": x} for x in (5, 3, 1, 2)]
    full = tmp_path / "full.jsonl"
    Sweep(full, progress=False).run(configs, _fn)
    calls = []
    fn = lambda c: calls.append(c["x"]) or _fn(c)  # noqa: E731
    path = tmp_path / "r.jsonl"
    assert len(Sweep(path, progress=False).run(configs, fn, stop_after=2)) == 2
    assert len(Sweep(path, resume=True, progress=False).run(configs, fn, stop_after=1)) == 3
    rows = Sweep(path, resume=True, progress=False).run(configs, fn)
    assert calls == [5, 3, 1, 2] and [r["config"]["x"] for r in rows] == [5, 3, 1, 2]
    assert _lines(path) == _lines(full)
    assert Sweep(path, resume=True, progress=False).run(configs, fn) == rows and len(calls) == 4  # nothing left


def test_crash_mid_line_resumes_from_the_last_complete_row(tmp_path, capsys):
    """A torn last line (with or without its newline) is dropped, said on stderr, and the run resumes
    after the last complete row; a bad line followed by complete rows is corruption: an error naming
    the file and the line, and the file is left as it was."""
    configs = [{"x": x} for x in (1, 2, 3)]
    path = tmp_path / "r.jsonl"
    Sweep(path, progress=False).run(configs[:2], _fn)
    good = path.read_text()
    for torn in ('{"config": {"x": 3}, "ke', '{"config": {"x": 3}, "ke\n', "\x00\x00\x00\n"):
        path.write_text(good + torn)
        assert len(read_rows(path)) == 2
        calls = []
        rows = Sweep(path, resume=True, progress=False).run(configs, lambda c: calls.append(c["x"]) or _fn(c))
        assert calls == [3] and [r["y"] for r in rows] == [1, 4, 9]
        assert "torn last line" in capsys.readouterr().err
        assert len(_lines(path)) == 3 and all(_strict(line) for line in path.read_text().splitlines())
        path.write_text(good)
    lines = good.splitlines()
    corrupt = lines[0][:-5] + "\n" + lines[1] + "\n"
    path.write_text(corrupt)
    for call in (lambda: read_rows(path), lambda: Sweep(path, resume=True, progress=False)):
        with pytest.raises(ValueError, match=rf"{path.name}: line 1 is corrupt"):
            call()
    assert path.read_text() == corrupt
    # a row whose key is not its configuration's is corrupt too (appended under a foreign key)
    row = json.loads(lines[0])
    row["key"] = config_key({"x": 99})
    path.write_text(json.dumps(row) + "\n" + lines[1] + "\n")
    with pytest.raises(ValueError, match="line 1 is corrupt"):
        read_rows(path)


def test_rows_of_other_configurations_are_refused(tmp_path):
    path = tmp_path / "r.jsonl"
    Sweep(path, progress=False).run([{"x": 1}, {"x": 2}], _fn)
    with pytest.raises(ValueError, match=rf"{path.name} holds 1 row\(s\) of configurations"):
        Sweep(path, resume=True, progress=False).run([{"x": 1}, {"x": 3}], _fn)
    assert len(_lines(path)) == 2


def test_failure_rows_are_run_again(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    Sweep(path, progress=False).run([{"x": 1}, {"x": 2}], lambda c: {"C": None if c["x"] == 1 else 2.0})
    calls = []
    rows = Sweep(path, resume=True, progress=False).run(
        [{"x": 1}, {"x": 2}], lambda c: calls.append(c["x"]) or {"C": 1.0}, valid=lambda r: r["C"] is not None
    )
    assert calls == [1] and [r["C"] for r in rows] == [1.0, 2.0]
    assert "recorded a failure" in capsys.readouterr().err and len(_lines(path)) == 2


def test_a_sweep_whose_rows_all_failed_is_run_again_in_full(tmp_path, capsys):
    """Every row on disk recorded a failure: none counts as done, every configuration runs again, and
    the file ends with each configuration's new row once."""
    path = tmp_path / "r.jsonl"
    configs = [{"x": 1}, {"x": 2}, {"x": 3}]
    Sweep(path, progress=False).run(configs, lambda c: {"C": None})
    calls = []
    rows = Sweep(path, resume=True, progress=False).run(
        configs, lambda c: calls.append(c["x"]) or {"C": 1.0}, valid=lambda r: r["C"] is not None
    )
    assert calls == [1, 2, 3] and [r["C"] for r in rows] == [1.0] * 3
    assert "3 row(s) recorded a failure" in capsys.readouterr().err
    assert [r["C"] for r in read_rows(path)] == [1.0] * 3


def test_no_resume_truncates_nothing_before_the_first_row(tmp_path):
    path = tmp_path / "r.jsonl"
    Sweep(path, progress=False).run([{"x": 1}, {"x": 2}], _fn)
    old = path.read_text()
    sweep = Sweep(path, resume=False, progress=False)
    assert sweep.rows == [] and path.read_text() == old  # not reused, not yet removed

    def fn(c):
        assert path.read_text() == old
        raise RuntimeError("crash before the first row")

    with pytest.raises(RuntimeError):
        sweep.run([{"x": 7}], fn)
    assert path.read_text() == old
    rows = Sweep(path, resume=False, progress=False).run([{"x": 7}], _fn)
    assert [r["y"] for r in rows] == [49] and len(_lines(path)) == 1


def _folder_run(out, config, mode, fn=_fn, *extra):
    folder = ResultsFolder(out, "exp", config, mode=mode)
    rows = folder.sweep(progress=False).run([{"x": 1}, {"x": 2}], fn)
    folder.write_summary({"n": len(rows)}, *extra)
    return folder


def test_results_folder_records_what_wrote_it_and_refuses_to_mix(tmp_path):
    from cfm_jax import __version__

    out = tmp_path / "out"
    (out / "fig.png").parent.mkdir()
    (out / "fig.png").write_text("old figure")
    (out / "notes.txt").write_text("the user's")
    _folder_run(out, {"seed": 0}, "new", _fn, "fig.png")
    run = _strict((out / MANIFEST).read_text())
    assert run["experiment"] == "exp" and run["config"] == {"seed": 0} and run["version"] == __version__
    assert sorted(run["files"]) == ["fig.png", "rows.jsonl", "summary.json"] and run["float64"] is True
    with pytest.raises(ValueError, match="already holds results of `exp`.*--resume.*--overwrite.*--out"):
        ResultsFolder(out, "exp", {"seed": 0})
    with pytest.raises(ValueError, match=r"holds results of `exp` with seed=0, not of this run, `exp` with seed=1"):
        ResultsFolder(out, "exp", {"seed": 1}, mode="resume")
    with pytest.raises(ValueError, match=r"holds results of `exp`, not of this run, `other`.*--overwrite"):
        ResultsFolder(out, "other", {"seed": 0}, mode="resume")
    calls = []
    _folder_run(out, {"seed": 0}, "resume", lambda c: calls.append(c) or _fn(c))
    assert calls == [] and len(_lines(out / "rows.jsonl")) == 2


def test_overwrite_removes_the_old_results_only_at_the_first_row(tmp_path):
    out = tmp_path / "out"
    _folder_run(out, {"seed": 0}, "new", _fn, "fig.png")
    (out / "fig.png").write_text("old figure")
    (out / "notes.txt").write_text("the user's")
    before = {p.name: p.read_text() for p in out.iterdir()}

    def crash(c):
        assert {p.name: p.read_text() for p in out.iterdir()} == before
        raise RuntimeError("interrupted before the first row")

    with pytest.raises(RuntimeError):
        _folder_run(out, {"seed": 1}, "overwrite", crash)
    assert {p.name: p.read_text() for p in out.iterdir()} == before  # an interrupted overwrite changes nothing
    _folder_run(out, {"seed": 1}, "overwrite")
    assert not (out / "fig.png").exists() and (out / "notes.txt").exists()  # only what the old run wrote
    run = _strict((out / MANIFEST).read_text())
    assert run["config"] == {"seed": 1} and sorted(run["files"]) == ["rows.jsonl", "summary.json"]
    # a folder from before run.json: resumed only when its rows are this sweep's
    (out / MANIFEST).unlink()
    _folder_run(out, {"seed": 2}, "resume")
    assert sorted(_strict((out / MANIFEST).read_text())["files"]) == ["rows.jsonl", "summary.json"]  # adopted
    with pytest.raises(ValueError, match="corrupt"):
        (out / MANIFEST).write_text("{")
        ResultsFolder(out, "exp", {}, mode="resume")


def test_a_manifest_naming_files_outside_the_folder_is_corrupt_and_overwrite_deletes_nothing_outside(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (out / "rows.jsonl").write_text("")
    for name in ("../victim.txt", str(victim), ".."):
        (out / MANIFEST).write_text(json.dumps({"experiment": "x", "config": {}, "files": [name, "rows.jsonl"]}))
        for mode in ("new", "resume"):
            with pytest.raises(ValueError, match=r"run\.json is corrupt \(its file list names something other"):
                ResultsFolder(out, "x", {}, mode=mode)
        folder = ResultsFolder(out, "x", {}, mode="overwrite")
        folder.commit()
        assert victim.read_text() == "keep me"
        assert json.loads((out / MANIFEST).read_text())["files"] == []


def test_a_corrupt_manifest_is_replaced_by_overwrite(tmp_path):
    (tmp_path / MANIFEST).write_text("{not json")
    (tmp_path / "rows.jsonl").write_text('{"config": {"x": 1}, "key": "{\\"x\\": 1}"}\n')
    with pytest.raises(ValueError, match="is corrupt .*start over with --overwrite"):
        ResultsFolder(tmp_path, "x", {"a": 1})
    folder = ResultsFolder(tmp_path, "x", {"a": 1}, mode="overwrite")
    assert (tmp_path / "rows.jsonl").exists()  # nothing removed before the first write
    rows = folder.sweep(progress=False).run([{"x": 2}], _fn)
    assert [r["config"] for r in rows] == [{"x": 2}]
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert manifest["config"] == {"a": 1} and manifest["files"] == ["rows.jsonl"]


def test_resume_refuses_results_written_in_the_other_precision(tmp_path):
    ResultsFolder(tmp_path, "x", {"a": 1}).sweep(progress=False).run([{"x": 1}], _fn)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    manifest["float64"] = not manifest["float64"]
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"--resume: .* holds results of `x` with float(32|64), not of this run"):
        ResultsFolder(tmp_path, "x", {"a": 1}, mode="resume")


def test_the_manifest_records_the_precision_that_wrote_it(tmp_path):
    import jax

    with jax.enable_x64(False):
        ResultsFolder(tmp_path, "x", {"a": 1}).sweep(progress=False).run([{"x": 1}], _fn)
    assert json.loads((tmp_path / MANIFEST).read_text())["float64"] is False
    with pytest.raises(ValueError, match=r"holds results of `x` with float32, not of this run, `x` with float64"):
        ResultsFolder(tmp_path, "x", {"a": 1}, mode="resume")  # this session computes in float64
    with jax.enable_x64(False):
        ResultsFolder(tmp_path, "x", {"a": 1}, mode="resume")  # the same precision resumes


def test_a_run_interrupted_before_its_first_row_does_not_block_a_rerun(tmp_path):
    ResultsFolder(tmp_path, "x", {"a": 1})  # wrote run.json, then stopped before any row
    assert json.loads((tmp_path / MANIFEST).read_text())["files"] == []
    folder = ResultsFolder(tmp_path, "x", {"a": 1})  # the same command again, without --resume
    assert [r["y"] for r in folder.sweep(progress=False).run([{"x": 3}], _fn)] == [9]
    ResultsFolder(tmp_path / "b", "x", {"a": 1})
    ResultsFolder(tmp_path / "b", "y", {"b": 2})  # nor another command: the folder holds no results
