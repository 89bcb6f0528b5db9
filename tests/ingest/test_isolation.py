"""One bad file is one quarantine row: deep JSON, files that are not plain files, bad paths,
symlinked folders and a reader that raises never end the ingest or lose the good run beside."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics.ingest._files import MAX_JSON_DEPTH, deep_json

GOOD = "run-octo-ft-1.0.0-0000"
GOOD_SAMPLES = 200


@pytest.fixture()
def data(tmp_path: Path, sample_dir: Path) -> Path:
    """A folder holding one good run (with its traces)."""
    dst = tmp_path / "data"
    shutil.copytree(sample_dir / GOOD, dst / GOOD)
    return dst


def _ingest(data: Path, store_dir: Path) -> tuple[ha.Store, ha.IngestReport]:
    store = ha.open_store(store_dir)
    return store, store.ingest(data, progress=False)


def _good_run_intact(store: ha.Store) -> None:
    n = store.sql(f"SELECT count(*) AS n FROM stg_samples WHERE run_id = '{GOOD}'")["n"][0]
    assert n == GOOD_SAMPLES
    events = store.sql(f"SELECT count(*) AS n FROM stg_events WHERE run_id = '{GOOD}'")["n"][0]
    assert events > 0


def _quarantined(store: ha.Store) -> list[dict[str, object]]:
    return store.sql("SELECT path, line, field, error FROM stg_quarantine ORDER BY path").to_dicts()


def _small_log(sample_dir: Path, run_id: str) -> dict[str, object]:
    log = json.loads((sample_dir / GOOD / "evallog.json").read_text())
    log["run_id"] = run_id
    log["samples"] = log["samples"][:3]
    for s in log["samples"]:
        s.pop("trace", None)
    return log


def _nest(n: int) -> str:
    return "[" * n + "]" * n


# -- bounded JSON --------------------------------------------------------------------------


def test_depth_scan_ignores_brackets_in_strings_and_escapes() -> None:
    deep = _nest(MAX_JSON_DEPTH + 1).encode()
    assert deep_json([b"[" + _nest(MAX_JSON_DEPTH - 1).encode() + b"]"]) == {}
    assert deep_json([b'{"a": "' + deep + b'"}']) == {}  # text, not structure
    assert deep_json([b'{"a": "x\\"' + deep + b'"}']) == {}  # an escaped quote stays text
    doc = b'{"a": "x\\\\", "b": ' + deep + b"}"  # an escaped backslash: the quote is real
    col = doc.index(b"[") + MAX_JSON_DEPTH  # the bracket that is one level too deep
    assert deep_json([b"{}", doc, b"[]"]) == {1: (1, col)}
    # a JSONL file whose broken line leaves a string open: the next lines are not shifted
    jsonl = b'{"a": "open\n' + b'{"b": "[[[["}\n' * 200
    assert deep_json([jsonl], 3) == {}


@pytest.mark.parametrize("depth", [2_000, 100_000, 1_000_000])
def test_deep_evallog_is_a_problem_not_a_crash(
    data: Path, tmp_path: Path, sample_dir: Path, depth: int
) -> None:
    log = _small_log(sample_dir, "deep-run")
    text = json.dumps(log).replace('"samples": [', f'"extra": {_nest(depth)}, "samples": [', 1)
    (data / "deep").mkdir()
    (data / "deep" / "evallog.json").write_text(text)
    store, rep = _ingest(data, tmp_path / "s")
    _good_run_intact(store)
    [p] = rep.problems
    col = text.index('"extra": [') + len('"extra": ') + MAX_JSON_DEPTH
    assert p.path == str(data / "deep" / "evallog.json") and p.line == 1
    assert p.error == f"JSON nested deeper than {MAX_JSON_DEPTH} levels (line 1, column {col})"
    assert store.sql("SELECT count(*) AS n FROM stg_runs WHERE run_id = 'deep-run'")["n"][0] == 0


@pytest.mark.slow
@pytest.mark.parametrize("depth", [2_000, 100_000])
def test_deep_trace_line_is_that_line_only(data: Path, tmp_path: Path, depth: int) -> None:
    ep = sorted((data / GOOD / "episodes").iterdir())[0]
    lines = ep.read_text().splitlines()
    lines.insert(1, '{"type": "step", "t": 99, "obs": ' + _nest(depth) + "}")
    ep.write_text("\n".join(lines) + "\n")
    store, rep = _ingest(data, tmp_path / "s")
    [p] = rep.problems
    assert p.path == str(ep) and p.line == 2
    assert p.error.startswith(f"JSON nested deeper than {MAX_JSON_DEPTH} levels (line 2, column")
    assert store.sql("SELECT count(*) AS n FROM stg_samples")["n"][0] == GOOD_SAMPLES
    st = store.sql("SELECT trace_status FROM stg_samples WHERE trace_path = ?", [str(ep)])
    assert st["trace_status"].to_list() == ["bad"]


def test_deep_inspect_json_and_metric_line(tmp_path: Path) -> None:
    deep = _nest(100_000)
    ij = tmp_path / "d" / "insp.json"
    ij.parent.mkdir()
    ij.write_text('{"eval": {"eval_id": "e1", "task": "t"}, "x": ' + deep + ', "samples": []}')
    mr = tmp_path / "d" / "agent.jsonl"
    good = {"sample_id": "s#1", "metric_id": "fvd", "raw_value": 1.0, "valid": True}
    mr.write_text(json.dumps(good) + "\n" + '{"sample_id": "s#2", "x": ' + deep + "}\n")
    ok = tmp_path / "d" / "ok.jsonl"
    ok.write_text(json.dumps(good) + "\n")
    store = ha.open_store(tmp_path / "s")
    rep = store.ingest(tmp_path / "d", progress=False)
    by_path = {p.path: p for p in rep.problems}
    assert set(by_path) == {str(ij), str(mr)}
    assert by_path[str(mr)].line == 2
    assert all(p.error.startswith("JSON nested deeper than") for p in rep.problems)
    assert rep.runs_added == 1  # ok.jsonl


# -- files that are not plain files --------------------------------------------------------

_INGEST_CHILD = textwrap.dedent(
    """
    import json, sys
    import hylo_analytics as ha
    rep = ha.open_store(sys.argv[1]).ingest(sys.argv[2], progress=False)
    print(json.dumps({"runs": rep.runs_added, "problems": [str(p) for p in rep.problems]}))
    """
)


def _ingest_in_child(data: Path, store_dir: Path, **env_vars: str) -> dict[str, object]:
    """Ingest in a child process with a timeout: a hang fails the test instead of the suite."""
    env = {**os.environ, "PYTHONPATH": str(Path(ha.__file__).parents[1]), **env_vars}
    out = subprocess.run(
        [sys.executable, "-c", _INGEST_CHILD, str(store_dir), str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    )
    result: dict[str, object] = json.loads(out.stdout.splitlines()[-1])
    return result


@pytest.mark.slow
def test_fifo_log_and_fifo_trace_are_refused_not_waited_on(data: Path, tmp_path: Path) -> None:
    (data / "pipe").mkdir()
    os.mkfifo(data / "pipe" / "evallog.json")
    log_path = data / GOOD / "evallog.json"
    log = json.loads(log_path.read_text())
    os.mkfifo(data / GOOD / "episodes" / "fifo.jsonl")
    log["samples"][0]["trace"] = "episodes/fifo.jsonl"
    log_path.write_text(json.dumps(log))
    res = _ingest_in_child(data, tmp_path / "s")
    assert res["runs"] == 1
    problems = res["problems"]
    assert isinstance(problems, list) and len(problems) == 2
    assert f"{data / 'pipe' / 'evallog.json'}: not a regular file (fifo)" in problems
    fifo = data / GOOD / "episodes" / "fifo.jsonl"
    assert any(
        p.startswith(f"{log_path}: samples[0].trace: trace file '{fifo}'")
        and p.endswith("not a regular file (fifo)")
        for p in problems
    )
    store = ha.open_store(tmp_path / "s")
    assert store.sql("SELECT count(*) AS n FROM stg_samples")["n"][0] == GOOD_SAMPLES


def test_device_file_is_refused(data: Path, tmp_path: Path) -> None:
    """Named directly (in a folder, a link to /dev is refused as leading outside)."""
    zero = tmp_path / "zero.json"
    os.symlink("/dev/zero", zero)  # endless if read
    store = ha.open_store(tmp_path / "s")
    rep = store.ingest([data, zero], progress=False)
    _good_run_intact(store)
    assert [str(p) for p in rep.problems] == [f"{zero}: not a regular file (character device)"]


def test_unreadable_file_is_a_problem(data: Path, tmp_path: Path, sample_dir: Path) -> None:
    locked = data / "locked" / "evallog.json"
    locked.parent.mkdir()
    locked.write_text(json.dumps(_small_log(sample_dir, "locked-run")))
    locked.chmod(0)
    try:
        store, rep = _ingest(data, tmp_path / "s")
    finally:
        locked.chmod(0o644)
    _good_run_intact(store)
    if os.geteuid() == 0:  # root reads it anyway: then it is simply ingested
        assert rep.runs_added == 2 and not rep.problems
    else:
        assert [str(p) for p in rep.problems] == [f"{locked}: cannot read: Permission denied"]


def test_nul_byte_in_trace_path_is_a_problem_on_that_sample(data: Path, tmp_path: Path) -> None:
    log_path = data / GOOD / "evallog.json"
    log = json.loads(log_path.read_text())
    log["samples"][3]["trace"] = "ep\u0000.jsonl"
    log_path.write_text(json.dumps(log))
    store, rep = _ingest(data, tmp_path / "s")
    [p] = rep.problems
    assert (p.path, p.field) == (str(log_path), "samples[3].trace")
    assert p.error == "trace path 'ep\\x00.jsonl' contains a NUL byte"
    assert store.sql("SELECT count(*) AS n FROM stg_samples")["n"][0] == GOOD_SAMPLES


@pytest.mark.slow
@pytest.mark.parametrize(
    ("bad", "field", "error"),
    [
        ('"success": NaN', "samples[0].scores.success", "non-finite number NaN"),
        ('"success": 0.0, "success": 1.0', "samples[0].scores.success", "duplicate key 'success'"),
    ],
)
def test_bad_field_beside_nesting_deeper_than_python_recurses_is_quarantined(
    data: Path, tmp_path: Path, sample_dir: Path, bad: str, field: str, error: str
) -> None:
    """With the depth limit raised to 5,000, a value nested 2,000 deep (beyond Python's
    recursion) sits beside a bad field: the file is quarantined naming file, line and field
    (the walk that finds it used to give up on RecursionError, and the value was stored)."""
    log = _small_log(sample_dir, "deep-beside-bad")
    log["samples"][1]["nest"] = "@NEST"  # type: ignore[index]
    text = json.dumps(log, indent=1).replace('"@NEST"', _nest(2_000))
    text = re.sub(r'"success": [0-9.]+', bad, text, count=1)
    bad_log = data / "deep" / "evallog.json"
    bad_log.parent.mkdir()
    bad_log.write_text(text)
    res = _ingest_in_child(data, tmp_path / "s", HYLO_INGEST_MAX_JSON_DEPTH="5000")
    assert res["runs"] == 1  # the good run beside it
    [problem] = res["problems"]
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.strip().startswith(bad[:9]))
    assert isinstance(problem, str) and problem.startswith(f"{bad_log}:{line}: {field}: {error}")
    store = ha.open_store(tmp_path / "s")
    assert (
        store.sql("SELECT count(*) AS n FROM stg_runs WHERE run_id = 'deep-beside-bad'")["n"][0]
        == 0
    )


# -- symlinked folders ---------------------------------------------------------------------


def test_symlinked_folder_outside_is_recorded_inside_is_followed(
    data: Path, tmp_path: Path, sample_dir: Path
) -> None:
    outside = tmp_path / "elsewhere"
    shutil.copytree(sample_dir / "run-octo-ft-1.1.0-0001", outside)
    os.symlink(outside, data / "linked-out")
    hidden = data / ".store-of-runs" / "run-octo-ft-1.2.0-rc1-0002"
    shutil.copytree(sample_dir / "run-octo-ft-1.2.0-rc1-0002", hidden)
    os.symlink(hidden, data / "linked-in")  # the only way the walk reaches it
    os.symlink(data, data / GOOD / "loop")  # a cycle: must end
    os.symlink(data / GOOD, data / "twice")  # reached directly too: not read twice
    store, rep = _ingest(data, tmp_path / "s")
    assert [str(p) for p in rep.problems] == [
        f"{data / 'linked-out'}: symlinked folder leads to {str(outside)!r}, "
        f"outside {str(data)!r}: skipped"
    ]
    runs = store.sql("SELECT run_id, source_path FROM stg_runs ORDER BY run_id").rows()
    assert runs == [
        (GOOD, str(data / GOOD / "evallog.json")),
        ("run-octo-ft-1.2.0-rc1-0002", str(data / "linked-in" / "evallog.json")),
    ]
    assert _quarantined(store)[0]["path"] == str(data / "linked-out")


def test_symlinked_file_outside_is_quarantined_unread_inside_is_read(
    data: Path, tmp_path: Path, sample_dir: Path
) -> None:
    """A log file linking out of the folder given (a private file, /proc/self/environ) is a
    quarantine row naming the link and its target; it is never read nor hashed. A link to a
    log inside the folder is read as the log."""
    secret = tmp_path / "private" / "evallog.json"
    secret.parent.mkdir()
    secret.write_text(json.dumps(_small_log(sample_dir, "private-run")))
    (data / "leak").mkdir()
    (data / "leak" / "evallog.json").symlink_to(secret)
    environ = "/proc/self/environ"  # resolved as /proc/<pid>/environ
    (data / "env.json").symlink_to(environ)
    hidden = data / ".kept" / "evallog.json"
    hidden.parent.mkdir()
    hidden.write_text(json.dumps(_small_log(sample_dir, "linked-inside")))
    (data / "inside").mkdir()
    (data / "inside" / "evallog.json").symlink_to(hidden)
    store, rep = _ingest(data, tmp_path / "s")
    top = str(data)
    assert sorted(str(p) for p in rep.problems) == [
        f"{data / 'env.json'}: symlinked file leads to {os.path.realpath(environ)!r}, "
        f"outside {top!r}: skipped",
        f"{data / 'leak' / 'evallog.json'}: symlinked file leads to {str(secret)!r}, "
        f"outside {top!r}: skipped",
    ]
    runs = dict(store.sql("SELECT run_id, source_path FROM stg_runs").rows())
    assert runs == {
        GOOD: str(data / GOOD / "evallog.json"),
        "linked-inside": str(data / "inside" / "evallog.json"),
    }
    assert [q["path"] for q in _quarantined(store)] == [
        str(data / "env.json"),
        str(data / "leak" / "evallog.json"),
    ]
    hashed = store.sql("SELECT path, sha256 FROM stg_ingested_files").rows()
    assert not [p for p, _ in hashed if "leak" in p or "env.json" in p]
    _good_run_intact(store)


def test_link_swapped_out_after_the_walk_is_refused_when_read(tmp_path: Path) -> None:
    """The walk's verdict is checked again when the file is opened: a link that leads out
    by then is refused unread (``read_files`` with the folder as root)."""
    from hylo_analytics.ingest._files import read_files
    from hylo_analytics.ingest._walk import discover

    folder, secret = tmp_path / "logs", tmp_path / "secret.json"
    folder.mkdir()
    secret.write_text('{"token": "s3cret"}')
    (folder / "ok.json").write_text("{}")
    link = folder / "a.json"
    link.symlink_to(folder / "ok.json")
    roots: dict[Path, Path] = {}
    found = discover([folder], roots=roots)
    assert found == [link, folder / "ok.json"]
    link.unlink()
    link.symlink_to(secret)  # swapped between the walk and the read
    first = next(read_files([link], roots=[roots[link]]))
    assert first.refused and first.data == b"" and first.sha256 == ""
    assert first.error == f"{str(link)!r} is a link to {str(secret)!r}, outside {str(folder)!r}"


# -- a reader that raises ------------------------------------------------------------------


@pytest.mark.slow
def test_reader_exception_is_one_problem_and_the_batch_survives(
    data: Path, tmp_path: Path, sample_dir: Path
) -> None:
    """With the depth limit set too high for this interpreter, a log nested 3,000 deep makes
    the reader itself raise (RecursionError re-encoding a nested value): that log is one
    problem, and the good log parsed in the same batch is stored."""
    log = _small_log(sample_dir, "too-deep-for-python")
    log["agent"]["components"] = {"policy": "x"}  # type: ignore[index]
    text = json.dumps(log).replace('"policy": "x"', '"policy": ' + _nest(3_000))
    bad = data / "deep" / "evallog.json"
    bad.parent.mkdir()
    bad.write_text(text)
    res = _ingest_in_child(data, tmp_path / "s", HYLO_INGEST_MAX_JSON_DEPTH="100000")
    assert res["runs"] == 1
    assert res["problems"] == [
        f"{bad}: hylo.evallog/v0.1 reader failed: RecursionError: "
        "maximum recursion depth exceeded while encoding a JSON object"
    ]
    store = ha.open_store(tmp_path / "s")
    _good_run_intact(store)
    files = dict(store.sql("SELECT path, outcome FROM stg_ingested_files").rows())
    assert files[str(bad)] == "quarantined"
    assert _quarantined(store)[0]["path"] == str(bad)


def test_duplicate_key_and_lone_surrogate_get_their_own_message(
    data: Path, tmp_path: Path, sample_dir: Path
) -> None:
    text = json.dumps(_small_log(sample_dir, "x"))
    (data / "dup").mkdir()
    (data / "dup" / "evallog.json").write_text(
        text.replace('"run_id": "x"', '"run_id": "x", "run_id": "y"')
    )
    (data / "sur").mkdir()
    (data / "sur" / "evallog.json").write_text(
        text.replace('"run_id": "x"', '"run_id": "x\\ud800"')
    )
    store, rep = _ingest(data, tmp_path / "s")
    _good_run_intact(store)
    by_path = {p.path: p for p in rep.problems}
    dup = by_path[str(data / "dup" / "evallog.json")]
    assert (dup.field, dup.error) == (
        "run_id",
        "duplicate key 'run_id' in one object (which one counts is unclear)",
    )
    sur = by_path[str(data / "sur" / "evallog.json")].error
    assert sur.startswith("lone surrogate escape \\ud800 (column ")
    assert all("got dict" not in p.error for p in rep.problems)


def test_strict_raises_on_the_first_such_file_and_stores_nothing(
    data: Path, tmp_path: Path
) -> None:
    os.symlink("/dev/zero", data / "zero.json")
    store = ha.open_store(tmp_path / "s")
    with pytest.raises(ha.IngestError, match=r"zero\.json: symlinked file leads to '/dev/zero'"):
        store.ingest(data, strict=True, progress=False)
    assert store.sql("SELECT count(*) AS n FROM stg_runs")["n"][0] == 0
