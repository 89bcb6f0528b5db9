"""Validate before write: what no reader may store, and the commit's last line of defence.

Each hostile value is ingested beside a good log: the bad file becomes quarantine rows naming
file, line and field, the good run is stored whole, and every view of the store still answers.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import hylo_analytics as ha
from hylo_analytics.store import ParquetStore


def _log(run_id: str, samples: list[dict], **top: object) -> dict:
    return {
        "version": "hylo.evallog/v0.1",
        "run_id": run_id,
        "benchmark": {"id": "bench"},
        "agent": {"name": "agent"},
        "samples": samples,
        **top,
    }


def _sample(seed: int, **more: object) -> dict:
    s = {
        "key": f"t#{seed}",
        "task_id": "t",
        "seed": seed,
        "status": "success",
        "scores": {"success": 1.0},
    }
    return {**s, **more}


def _good(folder: Path) -> Path:
    path = folder / "good.json"
    path.write_text(json.dumps(_log("good", [_sample(1), _sample(2), _sample(3)])))
    return path


def _quarantine(store: ha.Store) -> list[dict]:
    return store.sql("SELECT path, line, field, error FROM stg_quarantine ORDER BY ALL").to_dicts()


def _every_view_answers(store: ha.Store) -> None:
    """Each view of the store can be read whole (a bad string in Parquet fails them all)."""
    views = store.parquet.con.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'"
    ).fetchall()
    assert views
    for (name,) in views:
        store.parquet.con.execute(f'SELECT * FROM "{name}"').fetchall()


def _ingest(tmp_path: Path, name: str, data: bytes) -> tuple[ha.Store, Path, list[dict]]:
    folder = tmp_path / "in"
    folder.mkdir()
    _good(folder)
    bad = folder / name
    bad.write_bytes(data)
    store = ha.open_store(tmp_path / "store")
    store.ingest(folder, progress=False)
    assert store.sql("SELECT count(*) FROM stg_samples WHERE run_id = 'good'").item() == 3
    _every_view_answers(store)
    return store, bad, _quarantine(store)


_S = '{"key":"t#1","task_id":"t","seed":1,"status":"success","scores":{"success":1.0}}'


def _raw(run_id: str, sample: str = _S, top: str = "") -> bytes:
    return (
        '{"version":"hylo.evallog/v0.1","run_id":"' + run_id + '","benchmark":{"id":"b"},'
        '"agent":{"name":"a"}' + top + ',"samples":[' + sample + "]}"
    ).encode()


EVALLOG_CASES = {
    # kind: (file content, field, words of the error)
    "lone high surrogate": (_raw("r\\ud800"), None, "lone surrogate escape \\ud800"),
    "lone low surrogate in a sample": (
        _raw("r", _S.replace('"status":"success"', '"status":"succ\\udc00"')),
        None,
        "lone surrogate escape \\udc00",
    ),
    "invalid UTF-8 bytes in a string": (
        _raw("r").replace(b'"a"}', b'"a\xed\xa0\x80"}'),
        None,
        "not UTF-8",
    ),
    "Infinity score": (
        _raw("r", _S.replace("1.0", "Infinity")),
        "samples[0].scores.success",
        "non-finite number Infinity",
    ),
    "-Infinity score": (
        _raw("r", _S.replace("1.0", "-Infinity")),
        "samples[0].scores.success",
        "non-finite number -Infinity",
    ),
    "NaN score": (
        _raw("r", _S.replace("1.0", "NaN")),
        "samples[0].scores.success",
        "non-finite number NaN",
    ),
    "1e999 score": (
        _raw("r", _S.replace("1.0", "1e999")),
        "samples[0].scores.success",
        "non-finite number 1e999",
    ),
    "Infinity in results": (
        _raw("r", top=',"results":{"success_mean":Infinity}'),
        "results.success_mean",
        "non-finite number Infinity",
    ),
    "seed beyond int64": (
        json.dumps(_log("r", [_sample(2**70)])).encode(),
        "samples[0].seed",
        f"integer {2**70} does not fit in 64 bits",
    ),
    "seed beyond int64, within uint64": (
        json.dumps(_log("r", [_sample(2**63 + 1)])).encode(),
        "samples[0].seed",
        f"integer {2**63 + 1} does not fit in 64 bits",
    ),
    "epoch beyond int64": (
        json.dumps(_log("r", [_sample(1, epoch=2**64)])).encode(),
        "samples[0].epoch",
        "does not fit in 64 bits",
    ),
    "duplicate sample key in one epoch": (
        json.dumps(_log("r", [_sample(1), _sample(2), _sample(1, epoch=1)])).encode(),
        "samples[2].key",
        "duplicate sample key 't#1' in epoch 1 (also samples[0])",
    ),
    "duplicate sample key, epochs given": (
        json.dumps(_log("r", [_sample(1, epoch=2), _sample(1, epoch=2)])).encode(),
        "samples[1].key",
        "duplicate sample key 't#1' in epoch 2",
    ),
    "duplicate top-level JSON key": (
        _raw("r").replace(b'"run_id":"r"', b'"run_id":"r","run_id":"good"'),
        "run_id",
        "duplicate key 'run_id'",
    ),
    "duplicate JSON key in a sample": (
        _raw("r", _S.replace('"seed":1', '"seed":1,"seed":2')),
        "samples[0].seed",
        "duplicate key 'seed'",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(EVALLOG_CASES))
def test_hostile_evallog_value_is_a_field_error(tmp_path: Path, kind: str) -> None:
    data, field, words = EVALLOG_CASES[kind]
    store, bad, q = _ingest(tmp_path, "bad.json", data)
    assert len(q) == 1, q
    assert q[0]["path"] == str(bad) and q[0]["line"] == 1
    assert q[0]["field"] == field and words in q[0]["error"], q[0]
    assert store.sql("SELECT run_id FROM stg_runs")["run_id"].to_list() == ["good"]


@pytest.mark.slow
def test_pretty_printed_log_names_the_line(tmp_path: Path) -> None:
    log = _log("r", [_sample(1), _sample(2)])
    text = json.dumps(log, indent=1).replace('"seed": 2', '"seed": 2, "seed": 3')
    _, _, q = _ingest(tmp_path, "bad.json", text.encode())
    line = next(i for i, t in enumerate(text.splitlines(), 1) if '"seed": 2, "seed": 3' in t)
    assert [(r["field"], r["line"]) for r in q] == [("samples[1].seed", line)]


@pytest.mark.slow
def test_every_bad_log_and_sample_is_checked(tmp_path: Path) -> None:
    """No cap on problem rows: 1,500 bad logs and a log of 3,000 bad samples, all caught."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(1500):
        log = _log(f"bad-{i:04d}", [{**_sample(1), "key": "wrong"}])
        (folder / f"bad-{i:04d}.json").write_text(json.dumps(log))
    many = [{**_sample(i), "key": f"x#{i}"} for i in range(3000)]
    (folder / "many.json").write_text(json.dumps(_log("many", many)))
    # after them in file order: once the first 1,000 problems were read, these were stored
    for i in range(5):
        log = _log(f"zz-late-bad-{i}", [_sample(1), {**_sample(2), "seed": "two"}])
        (folder / f"zz-late-bad-{i}.json").write_text(json.dumps(log))
        (folder / f"zz-good-{i}.json").write_text(json.dumps(_log(f"good-{i}", [_sample(1)])))
    store = ha.open_store(tmp_path / "store")
    report = store.ingest(folder, progress=False)
    assert sorted(store.sql("SELECT run_id FROM stg_runs")["run_id"]) == [
        f"good-{i}" for i in range(5)
    ]
    per_file = store.sql("SELECT path, count(*) AS n FROM stg_quarantine GROUP BY 1")
    n = dict(zip(per_file["path"], per_file["n"], strict=True))
    assert len(n) == 1500 + 1 + 5
    assert n[str(folder / "many.json")] == 3000
    assert all(n[str(folder / f"zz-late-bad-{i}.json")] == 1 for i in range(5))
    assert report.quarantined == 1500 + 3000 + 5


def _trace_run(folder: Path, lines: list[str]) -> Path:
    (folder / "episodes").mkdir(parents=True)
    (folder / "episodes" / "e.jsonl").write_text("\n".join(lines) + "\n")
    log = _log("traced", [_sample(1, trace="episodes/e.jsonl")])
    (folder / "evallog.json").write_text(json.dumps(log))
    return folder / "episodes" / "e.jsonl"


@pytest.mark.parametrize(
    ("line", "field", "words"),
    [
        ('{"type":"step","t":1,"reward":Infinity}', "reward", "non-finite number inf"),
        ('{"type":"step","t":1,"reward":NaN}', "reward", "non-finite number nan"),
        ('{"type":"step","t":1,"latency_ms":1e999}', "latency_ms", "non-finite number inf"),
        ('{"type":"grade","t":1,"name":"success","value":-Infinity}', "value", "-inf"),
        (f'{{"type":"step","t":{2**64 - 1}}}', "t", f"integer {2**64 - 1} does not fit"),
        (f'{{"type":"step","t":{2**70}}}', "t", f"integer {2**70} does not fit"),
        ('{"type":"step\\ud800","t":1}', None, "lone surrogate escape \\ud800"),
    ],
)
@pytest.mark.slow
def test_hostile_trace_line_is_a_line_error(
    tmp_path: Path, line: str, field: str | None, words: str
) -> None:
    trace = _trace_run(tmp_path / "run", ['{"type":"start","t":0}', line, '{"type":"end","t":2}'])
    store = ha.open_store(tmp_path / "store")
    store.ingest(tmp_path / "run", progress=False)
    (q,) = _quarantine(store)
    assert (q["path"], q["line"], q["field"]) == (str(trace), 2, field)
    assert words in q["error"], q
    assert store.sql("SELECT trace_status FROM stg_samples").item() == "bad"
    assert store.sql("SELECT count(*) FROM stg_events").item() == 2
    _every_view_answers(store)


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ('"normalized_value":Infinity', "normalized_value"),
        ('"normalized_value":NaN', "normalized_value"),
        ('"raw_value":1e999', "raw_value"),
        ('"raw_value":-Infinity', "raw_value"),
        ('"raw_value":1,"raw_value":2', "raw_value"),
    ],
)
@pytest.mark.slow
def test_non_finite_or_repeated_metric_result_value_is_a_field_error(
    tmp_path: Path, record: str, field: str
) -> None:
    good = '{"sample_id":"a#1","metric_id":"m","raw_value":1.5,"valid":true}'
    bad = '{"sample_id":"a#2","metric_id":"m",' + record + ',"valid":true}'
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "ok.jsonl").write_text(good + "\n")
    (folder / "bad.jsonl").write_text(good + "\n" + bad + "\n")
    store = ha.open_store(tmp_path / "store")
    store.ingest(folder, progress=False)
    (q,) = _quarantine(store)
    assert (q["path"], q["line"], q["field"]) == (str(folder / "bad.jsonl"), 2, field)
    assert ("duplicate key" if "1," in record else "non-finite number") in q["error"]
    assert store.sql("SELECT count(*) FROM stg_scores").item() == 1
    _every_view_answers(store)


def _vla(steps: str) -> str:
    return (
        '{"benchmark":"libero","harness_version":"1","config":{"subname":"s"},"tasks":['
        '{"task":"t","episodes":[{"episode_id":"t_ep0","success":true,"steps":10},'
        '{"episode_id":"t_ep1","success":false,"steps":' + steps + "}]}]}"
    )


@pytest.mark.slow
def test_non_finite_vla_eval_steps_is_a_field_error(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "pi_s.json").write_text(_vla("12"))
    (folder / "oft_s.json").write_text(_vla("Infinity"))
    store = ha.open_store(tmp_path / "store")
    store.ingest(folder, progress=False)
    (q,) = _quarantine(store)
    assert (q["path"], q["field"]) == (str(folder / "oft_s.json"), "tasks[0].episodes[1].steps")
    assert "non-finite number inf" in q["error"]
    assert store.sql("SELECT agent_name FROM stg_runs")["agent_name"].to_list() == ["pi"]
    _every_view_answers(store)


@pytest.mark.slow
def test_commit_refuses_a_string_that_is_not_utf8(tmp_path: Path) -> None:
    """The last line of defence: nothing written, nothing published, the store still reads."""
    store = ha.open_store(tmp_path / "store")
    store.ingest(_good(tmp_path), progress=False)
    ps: ParquetStore = store.parquet
    before = sorted(p.name for p in (tmp_path / "store").rglob("*"))
    version = ps.data_version()
    # "bad\xed\xa0\x80": a surrogate encoded as if it were a character (CESU-8)
    data = b"bad\xed\xa0\x80"
    offsets = pa.py_buffer(np.array([0, len(data)], np.int32))
    bad = pa.Array.from_buffers(pa.string(), 1, [None, offsets, pa.py_buffer(data)])
    quarantine = pa.table(
        {
            "path": bad,
            "line": pa.array([1], pa.int64()),
            "field": pa.array([None], pa.string()),
            "error": ["x"],
        }
    )
    with ps.lock(), pytest.raises(ValueError, match=r"column 'path' .* not valid UTF-8"):
        ps.commit({"quarantine": quarantine})
    assert sorted(p.name for p in (tmp_path / "store").rglob("*")) == before
    assert ps.data_version() == version
    _every_view_answers(store)


def _inspect(eval_id: str, value: str, epoch: str = "1") -> str:
    return (
        '{"version":2,"status":"success","eval":{"eval_id":"' + eval_id + '","task":"arith",'
        '"model":"m/x"},"samples":[{"id":1,"epoch":' + epoch + ',"scores":{"match":{"value":1}}},'
        '{"id":2,"epoch":1,"scores":{"match":{"value":' + value + "}}}]}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("value", ["Infinity", "NaN", "1e999"])
def test_non_finite_inspect_score_abstains_with_a_reason(tmp_path: Path, value: str) -> None:
    """Inspect writes NaN where a scorer has none: the sample abstains and says why."""
    path = tmp_path / "log.json"
    path.write_text(_inspect("E1", value))
    store = ha.open_store(tmp_path / "store")
    store.ingest(path, progress=False)
    assert _quarantine(store) == []
    rows = store.sql("SELECT key, value, valid, skip_reason FROM stg_scores ORDER BY key")
    assert rows.to_dicts()[0] == {
        "key": "arith#1",
        "value": 1.0,
        "valid": True,
        "skip_reason": None,
    }
    second = rows.to_dicts()[1]
    assert second["value"] is None and not second["valid"]
    assert second["skip_reason"].startswith("non-finite value: ")
    _every_view_answers(store)


def test_inspect_epoch_beyond_int64_is_a_field_error(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.json").write_text(_inspect("E1", "0"))
    (folder / "bad.json").write_text(_inspect("E2", "0", epoch=str(2**70)))
    store = ha.open_store(tmp_path / "store")
    store.ingest(folder, progress=False)
    (q,) = _quarantine(store)
    assert (q["path"], q["field"]) == (str(folder / "bad.json"), "samples[0].epoch")
    assert str(2**70) in q["error"]
    assert store.sql("SELECT run_id FROM stg_runs")["run_id"].to_list() == ["E1"]


def _robots(real_dir: Path) -> dict:
    return json.loads((real_dir / "inspect-robots" / "adhoc_2cc4c3a8.success.json").read_text())


@pytest.mark.slow
def test_non_finite_inspect_robots_score_abstains_with_a_reason(
    tmp_path: Path, real_dir: Path
) -> None:
    doc = _robots(real_dir)
    doc["samples"] = [{**doc["samples"][0], "epochs": [{"m": 1.0}, {"m": float("inf")}]}]
    path = tmp_path / "log.json"
    path.write_text(json.dumps(doc))  # Python writes Infinity
    store = ha.open_store(tmp_path / "store")
    store.ingest(path, progress=False)
    assert _quarantine(store) == []
    rows = store.sql("SELECT epoch, value, skip_reason FROM stg_scores ORDER BY epoch").rows()
    assert rows == [(1, 1.0, None), (2, None, "non-finite value: Infinity")]
    _every_view_answers(store)


def test_inspect_robots_seed_beyond_int64_is_a_field_error(tmp_path: Path, real_dir: Path) -> None:
    doc = _robots(real_dir)
    doc["eval"]["seed"] = 2**70
    path = tmp_path / "log.json"
    path.write_text(json.dumps(doc))
    store = ha.open_store(tmp_path / "store")
    store.ingest(path, progress=False)
    (q,) = _quarantine(store)
    assert (q["path"], q["field"]) == (str(path), "eval.seed") and str(2**70) in q["error"]
    assert store.sql("SELECT count(*) FROM stg_runs").item() == 0


_MR = '{"sample_id":"a#1","metric_id":"m","raw_value":1.5,"valid":true}'


@pytest.mark.slow
@pytest.mark.parametrize("bad", [b"\\ud800", b"\xed\xa0\x80", b"\xff"])
@pytest.mark.parametrize("reader", ["inspect", "vla-eval", "metric_results", "trace"])
def test_no_reader_stores_a_string_that_is_not_utf8(
    tmp_path: Path, reader: str, bad: bytes
) -> None:
    """A lone surrogate escape or invalid bytes: the file (or trace line) is refused."""
    folder = tmp_path / "in"
    folder.mkdir()
    _good(folder)
    if reader == "inspect":
        path = folder / "log.json"
        path.write_bytes(_inspect("E1", "1").encode().replace(b'"m/x"', b'"m/x' + bad + b'"'))
    elif reader == "vla-eval":
        path = folder / "pi_s.json"
        path.write_bytes(_vla("1").encode().replace(b'"libero"', b'"libero' + bad + b'"'))
    elif reader == "metric_results":
        path = folder / "m.jsonl"
        path.write_bytes(_MR.encode().replace(b'"m"', b'"m' + bad + b'"') + b"\n")
    else:
        line = '{"type":"step","t":1,"reason":"x' + bad.decode("latin-1") + '"}'
        path = _trace_run(folder / "run", ['{"type":"start","t":0}', "LINE"])
        path.write_bytes(path.read_bytes().replace(b"LINE", line.encode("latin-1")))
    store = ha.open_store(tmp_path / "store")
    store.ingest(folder, progress=False)
    q = _quarantine(store)
    assert [r["path"] for r in q] == [str(path)], q
    assert "UTF-8" in q[0]["error"], q
    assert store.sql("SELECT count(*) FROM stg_samples WHERE run_id = 'good'").item() == 3
    _every_view_answers(store)


def test_duplicate_vla_eval_episode_is_a_field_error(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "pi_s.json").write_text(_vla("12"))
    (folder / "oft_s.json").write_text(_vla("12").replace("t_ep1", "t_ep0"))
    store = ha.open_store(tmp_path / "store")
    store.ingest(folder, progress=False)
    (q,) = _quarantine(store)
    assert (q["path"], q["field"]) == (
        str(folder / "oft_s.json"),
        "tasks[0].episodes[1].episode_id",
    )
    assert "duplicate episode 't_ep0'" in q["error"]
    assert store.sql("SELECT agent_name FROM stg_runs")["agent_name"].to_list() == ["pi"]


def test_duplicate_inspect_sample_in_one_epoch_is_a_field_error(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.json").write_text(_inspect("E1", "0"))
    (folder / "bad.json").write_text(_inspect("E2", "0").replace('"id":2', '"id":1'))
    store = ha.open_store(tmp_path / "store")
    store.ingest(folder, progress=False)
    (q,) = _quarantine(store)
    assert (q["path"], q["field"]) == (str(folder / "bad.json"), "samples[1].id")
    assert "duplicate sample 'arith#1' in epoch 1" in q["error"]
    assert store.sql("SELECT run_id FROM stg_runs")["run_id"].to_list() == ["E1"]
    assert store.sql("SELECT count(*) FROM stg_samples").item() == 2


@pytest.mark.parametrize("bad", ["failures", 1, ["failure"]])
def test_an_errors_policy_is_one_of_its_names(tmp_path: Path, bad: object) -> None:
    """A log's ``errors_policy`` (an exported run keeps its harness's) is ``failure`` or
    ``exclude``; anything else is a field error, and a valid one is the run's convention
    whichever reader path reads it (the fast path or the checked one)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "bad.json").write_text(json.dumps(_log("bad", [_sample(1)], errors_policy=bad)))
    (logs / "good.json").write_text(json.dumps(_log("good", [_sample(1)], errors_policy="failure")))
    # a log the fast path cannot take (a non-string status) is read by the checked path
    checked = _log("checked", [_sample(1)], errors_policy="failure", status={"odd": 1})
    (logs / "checked.json").write_text(json.dumps(checked))
    (logs / "plain.json").write_text(json.dumps(_log("plain", [_sample(1)])))
    store = ha.open_store(tmp_path / "s")
    store.ingest(logs, progress=False)
    q = store.sql("select field, error from quarantine")
    assert q["field"].to_list() == ["errors_policy"]
    assert 'expected "failure" or "exclude"' in q["error"].item()
    got = dict(store.sql("select run_id, errors_policy from runs").rows())
    assert got == {"good": "failure", "checked": "failure", "plain": "exclude"}
