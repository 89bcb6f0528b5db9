"""Ingest of hylo EvalLogs and traces: counts, idempotence, replacement and every bad input."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics._traces import with_raw_sql
from hylo_analytics.store import ParquetStore

N_RUNS, N_SAMPLES = 3, 200
# events with their raw lines (read from the trace files the store keeps once)
EVENTS = f"({with_raw_sql('SELECT * FROM stg_events')})"


def _log(run_dir: Path) -> dict:
    return json.loads((run_dir / "evallog.json").read_text())


def _write_log(run_dir: Path, log: dict) -> None:
    (run_dir / "evallog.json").write_text(json.dumps(log, indent=1))


def _runs(data: Path) -> list[Path]:
    return sorted(p for p in data.iterdir() if p.is_dir())


def _count(store: ha.Store, table: str) -> int:
    return int(store.sql(f"SELECT count(*) AS n FROM stg_{table}")["n"][0])


def _quarantine(store: ha.Store) -> list[dict]:
    return store.sql(
        "SELECT path, line, field, error FROM stg_quarantine ORDER BY path, line"
    ).to_dicts()


def test_sample_counts(sample_store: ha.Store, sample_dir: Path) -> None:
    assert _count(sample_store, "runs") == N_RUNS
    assert _count(sample_store, "samples") == N_RUNS * N_SAMPLES
    assert _count(sample_store, "quarantine") == 0
    lines = sum(
        sum(1 for line in p.read_text().splitlines() if line.strip())
        for p in sample_dir.glob("*/episodes/*.jsonl")
    )
    assert _count(sample_store, "events") == lines
    # every score from the logs, abstentions included and visible
    n_scores = sum(len(s["scores"]) for r in _runs(sample_dir) for s in _log(r)["samples"])
    assert _count(sample_store, "scores") == n_scores
    abstained = sample_store.sql(
        "SELECT count(*) AS n FROM stg_scores WHERE value IS NULL AND NOT valid "
        "AND skip_reason IN ('abstained', 'episode errored')"
    )["n"][0]
    expected = sum(
        v is None
        for r in _runs(sample_dir)
        for s in _log(r)["samples"]
        for v in s["scores"].values()
    )
    assert abstained == expected > 0


def test_sample_fields_round_trip(sample_store: ha.Store, sample_dir: Path) -> None:
    run_dir = _runs(sample_dir)[0]
    log = _log(run_dir)
    run = sample_store.sql("SELECT * FROM stg_runs WHERE run_id = ?", [log["run_id"]]).row(
        0, named=True
    )
    assert run["benchmark_id"] == log["benchmark"]["id"]
    assert run["benchmark_digest"] == log["benchmark"]["digest"]
    assert run["agent_name"] == log["agent"]["name"]
    assert json.loads(run["agent_components"]) == log["agent"]["components"]
    assert json.loads(run["results"]) == log["results"]
    s0 = log["samples"][0]
    row = sample_store.sql(
        "SELECT * FROM stg_samples WHERE run_id = ? AND key = ?", [log["run_id"], s0["key"]]
    ).row(0, named=True)
    assert (row["task_id"], row["seed"], row["episode_id"], row["status"], row["epoch"]) == (
        s0["task_id"],
        s0["seed"],
        s0["episode_id"],
        s0["status"],
        1,
    )
    assert row["trace_status"] == "ok"
    first = (run_dir / s0["trace"]).read_text().splitlines()
    ev = sample_store.sql(
        f"SELECT idx, type, raw FROM {EVENTS} WHERE run_id = ? AND episode_id = ? ORDER BY idx",
        [log["run_id"], s0["episode_id"]],
    )
    assert ev["raw"].to_list() == first
    assert ev["idx"].to_list() == list(range(1, len(first) + 1))
    assert ev["type"][0] == "start" and ev["type"][-1] == "end"


def test_unknown_event_types_and_fields_are_kept(tmp_path: Path, sample_copy: Path) -> None:
    run_dir = _runs(sample_copy)[0]
    log = _log(run_dir)
    trace = run_dir / log["samples"][0]["trace"]
    odd = {"type": "camera_frame", "t": 3, "uri": "frames/3.png", "exposure": [1, 2]}
    trace.write_text(trace.read_text() + json.dumps(odd) + "\n")
    store = ha.open_store(tmp_path / "s")
    store.ingest(run_dir, progress=False)
    got = store.sql(f"SELECT raw FROM {EVENTS} WHERE type = 'camera_frame'")
    assert [json.loads(r) for r in got["raw"]] == [odd]


def test_second_ingest_adds_nothing(tmp_path: Path, sample_dir: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    first = store.ingest(sample_dir, progress=False)
    assert first.runs_added == N_RUNS
    again = store.ingest(sample_dir, progress=False)
    assert (again.files_unchanged, again.runs_added, again.samples_added, again.events_added) == (
        N_RUNS,
        0,
        0,
        0,
    )
    assert _count(store, "samples") == N_RUNS * N_SAMPLES
    assert len(list((store.root / "batches").iterdir())) == 2  # the empty batch + one commit


@pytest.mark.slow
def test_touched_but_unchanged_file_is_not_reingested(tmp_path: Path, sample_copy: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    store.ingest(sample_copy, progress=False)
    log_path = _runs(sample_copy)[0] / "evallog.json"
    os.utime(log_path, ns=(1, 1))
    again = store.ingest(sample_copy, progress=False)
    assert again.runs_added == 0 and again.files_unchanged == N_RUNS
    third = store.ingest(sample_copy, progress=False)  # new mtime remembered: stat path again
    assert third.files_read == 0


@pytest.mark.slow
def test_changed_evallog_replaces_its_run(tmp_path: Path, sample_copy: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    store.ingest(sample_copy, progress=False)
    run_dir = _runs(sample_copy)[1]
    log = _log(run_dir)
    log["agent"]["version"] = "9.9.9"
    log["samples"] = log["samples"][:50]
    _write_log(run_dir, log)
    report = store.ingest(sample_copy, progress=False)
    assert report.runs_added == 1 and report.files_unchanged == N_RUNS - 1
    assert _count(store, "runs") == N_RUNS
    assert _count(store, "samples") == (N_RUNS - 1) * N_SAMPLES + 50
    per_run = store.sql("SELECT run_id, count(*) AS n FROM stg_samples GROUP BY run_id")
    assert dict(zip(per_run["run_id"], per_run["n"], strict=True))[log["run_id"]] == 50
    assert (
        store.sql("SELECT agent_version FROM stg_runs WHERE run_id = ?", [log["run_id"]]).item()
        == "9.9.9"
    )
    events = store.sql(
        "SELECT count(DISTINCT episode_id) AS n FROM stg_events WHERE run_id = ?", [log["run_id"]]
    ).item()
    assert events == 50
    dup = store.sql(
        "SELECT count(*) AS n FROM (SELECT run_id, key, metric FROM stg_scores "
        "GROUP BY ALL HAVING count(*) > 1)"
    ).item()
    assert dup == 0


@pytest.mark.slow
def test_changed_trace_reingests_the_run(tmp_path: Path, sample_copy: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    store.ingest(sample_copy, progress=False)
    run_dir = _runs(sample_copy)[0]
    trace = run_dir / _log(run_dir)["samples"][3]["trace"]
    trace.write_text(trace.read_text() + json.dumps({"type": "note", "t": 99}) + "\n")
    report = store.ingest(sample_copy, progress=False)
    assert report.runs_added == 1
    assert _count(store, "samples") == N_RUNS * N_SAMPLES
    assert store.sql("SELECT count(*) FROM stg_events WHERE type = 'note'").item() == 1


# -- bad input: every kind is quarantined with file, line and field; good files still land -----


def _ingest_with_one_bad(
    tmp_path: Path, sample_copy: Path, spoil
) -> tuple[ha.Store, Path, ha.IngestReport]:
    bad_dir = _runs(sample_copy)[0]
    spoil(bad_dir)
    store = ha.open_store(tmp_path / "s")
    report = store.ingest(sample_copy, progress=False)
    return store, bad_dir, report


def test_malformed_json(tmp_path: Path, sample_copy: Path) -> None:
    def spoil(d: Path) -> None:
        text = (d / "evallog.json").read_text().splitlines()
        text[5] = text[5] + ",,"
        (d / "evallog.json").write_text("\n".join(text))

    store, bad, report = _ingest_with_one_bad(tmp_path, sample_copy, spoil)
    q = _quarantine(store)
    assert len(q) == 1 and q[0]["path"] == str(bad / "evallog.json")
    assert q[0]["line"] == 6 and "malformed JSON" in q[0]["error"]
    assert report.runs_added == N_RUNS - 1 == _count(store, "runs")


def test_unknown_version(tmp_path: Path, sample_copy: Path) -> None:
    def spoil(d: Path) -> None:
        log = _log(d)
        log["version"] = "hylo.evallog/v9"
        _write_log(d, log)

    store, _bad, _ = _ingest_with_one_bad(tmp_path, sample_copy, spoil)
    (q,) = _quarantine(store)
    assert q["field"] == "version" and "hylo.evallog/v9" in q["error"]
    assert _count(store, "runs") == N_RUNS - 1


@pytest.mark.parametrize(
    ("mutate", "field", "message"),
    [
        (lambda log: log["samples"][3].pop("seed"), "samples[3].seed", "missing required field"),
        (
            lambda log: log["samples"][7].update(seed="abc"),
            "samples[7].seed",
            "expected integer, got string",
        ),
        (lambda log: log.pop("run_id"), "run_id", "missing required field"),
        (lambda log: log["agent"].update(name=3), "agent.name", "expected string, got integer"),
        (lambda log: log.update(samples={}), "samples", "expected array, got object"),
        (
            lambda log: log["samples"][2].update(key="x#1"),
            "samples[2].key",
            "is not '<task_id>#<seed>'",
        ),
        (lambda log: log["samples"][4].update(scores=[1]), "samples[4].scores", "expected object"),
    ],
)
@pytest.mark.slow
def test_missing_or_mistyped_field(
    tmp_path: Path, sample_copy: Path, mutate, field: str, message: str
) -> None:
    def spoil(d: Path) -> None:
        log = _log(d)
        mutate(log)
        _write_log(d, log)

    store, bad, _ = _ingest_with_one_bad(tmp_path, sample_copy, spoil)
    q = _quarantine(store)
    assert len(q) == 1, q
    assert q[0]["path"] == str(bad / "evallog.json")
    assert q[0]["field"] == field and message in q[0]["error"]
    # the line is the field's own, or (missing field) the line opening the object that lacks it
    text = (bad / "evallog.json").read_text().splitlines()[q[0]["line"] - 1]
    last = field.rsplit(".", 1)[-1].split("[")[0]
    assert f'"{last}"' in text if "missing" not in message else text.strip().startswith("{")
    assert _count(store, "runs") == N_RUNS - 1
    assert _count(store, "samples") == (N_RUNS - 1) * N_SAMPLES


def test_non_utf8(tmp_path: Path, sample_copy: Path) -> None:
    def spoil(d: Path) -> None:
        data = (d / "evallog.json").read_bytes().split(b"\n")
        data[2] = data[2] + b"\xff\xfe"
        (d / "evallog.json").write_bytes(b"\n".join(data))

    store, _, _ = _ingest_with_one_bad(tmp_path, sample_copy, spoil)
    (q,) = _quarantine(store)
    assert q["line"] == 3 and "not UTF-8" in q["error"]
    assert _count(store, "runs") == N_RUNS - 1


def test_missing_trace_file_keeps_the_run(tmp_path: Path, sample_copy: Path) -> None:
    def spoil(d: Path) -> None:
        (d / _log(d)["samples"][5]["trace"]).unlink()

    store, bad, _ = _ingest_with_one_bad(tmp_path, sample_copy, spoil)
    (q,) = _quarantine(store)
    assert q["path"] == str(bad / "evallog.json") and q["field"] == "samples[5].trace"
    assert "No such file" in q["error"]
    assert _count(store, "runs") == N_RUNS
    status = store.sql("SELECT trace_status, count(*) AS n FROM stg_samples GROUP BY 1 ORDER BY 1")
    assert status.to_dicts() == [
        {"trace_status": "missing", "n": 1},
        {"trace_status": "ok", "n": N_RUNS * N_SAMPLES - 1},
    ]


def test_truncated_last_line_keeps_good_lines(tmp_path: Path, sample_copy: Path) -> None:
    run_dir = _runs(sample_copy)[0]
    trace = run_dir / _log(run_dir)["samples"][0]["trace"]
    lines = trace.read_text().splitlines()
    trace.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    store = ha.open_store(tmp_path / "s")
    store.ingest(run_dir, progress=False)
    (q,) = _quarantine(store)
    assert q["path"] == str(trace) and q["line"] == len(lines) and "truncated" in q["error"]
    assert (
        store.sql(
            "SELECT count(*) FROM stg_events WHERE episode_id = ?",
            [_log(run_dir)["samples"][0]["episode_id"]],
        ).item()
        == len(lines) - 1
    )
    assert (
        store.sql("SELECT trace_status FROM stg_samples WHERE trace_status <> 'ok'").item()
        == "partial"
    )


def test_bad_event_line_names_line_and_field(tmp_path: Path, sample_copy: Path) -> None:
    run_dir = _runs(sample_copy)[0]
    trace = run_dir / _log(run_dir)["samples"][0]["trace"]
    lines = trace.read_text().splitlines()
    lines[2] = json.dumps({"t": 2, "reward": 0.0})  # no type
    trace.write_text("\n".join(lines) + "\n")
    store = ha.open_store(tmp_path / "s")
    store.ingest(run_dir, progress=False)
    (q,) = _quarantine(store)
    assert (q["path"], q["line"], q["field"]) == (str(trace), 3, "type")


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink"])
def test_trace_path_escaping_the_run_folder_is_refused(
    tmp_path: Path, sample_copy: Path, kind: str
) -> None:
    run_dir = _runs(sample_copy)[0]
    log = _log(run_dir)
    outside = tmp_path / "secret.jsonl"
    outside.write_text(json.dumps({"type": "step", "t": 1}) + "\n")
    if kind == "dotdot":
        log["samples"][0]["trace"] = "../../secret.jsonl"
    elif kind == "absolute":
        log["samples"][0]["trace"] = str(outside)
    else:
        (run_dir / "episodes" / "link.jsonl").symlink_to(outside)
        log["samples"][0]["trace"] = "episodes/link.jsonl"
    _write_log(run_dir, log)
    store = ha.open_store(tmp_path / "s")
    store.ingest(run_dir, progress=False)
    (q,) = _quarantine(store)
    assert q["field"] == "samples[0].trace" and (
        "escapes" in q["error"] or "absolute" in q["error"]
    )
    assert (
        store.sql("SELECT trace_status FROM stg_samples WHERE trace_status <> 'ok'").item()
        == "refused"
    )
    assert store.sql(f"SELECT count(*) FROM {EVENTS} WHERE raw LIKE '%\"t\": 1}}'").item() == 0


def test_unknown_format_is_quarantined(tmp_path: Path, sample_copy: Path) -> None:
    (sample_copy / "notes.json").write_text('{"hello": "world"}')
    store = ha.open_store(tmp_path / "s")
    report = store.ingest(sample_copy, progress=False)
    (q,) = _quarantine(store)
    assert q["path"] == str(sample_copy / "notes.json") and "unknown format" in q["error"]
    assert report.runs_added == N_RUNS


def test_strict_raises_and_stores_nothing(tmp_path: Path, sample_copy: Path) -> None:
    run_dir = _runs(sample_copy)[0]
    log = _log(run_dir)
    log["samples"][1]["seed"] = "x"
    _write_log(run_dir, log)
    store = ha.open_store(tmp_path / "s")
    with pytest.raises(ha.IngestError) as err:
        store.ingest(sample_copy, strict=True, progress=False)
    assert str(run_dir / "evallog.json") in str(err.value) and "samples[1].seed" in str(err.value)
    assert _count(store, "runs") == 0 and _count(store, "quarantine") == 0


@pytest.mark.slow
def test_quarantined_file_is_not_requarantined_until_it_changes(
    tmp_path: Path, sample_copy: Path
) -> None:
    run_dir = _runs(sample_copy)[0]
    (run_dir / "evallog.json").write_text("{not json")
    store = ha.open_store(tmp_path / "s")
    store.ingest(sample_copy, progress=False)
    store.ingest(sample_copy, progress=False)
    assert _count(store, "quarantine") == 1
    shutil.copy(_runs(Path(__file__).parents[2] / "data" / "sample")[0] / "evallog.json", run_dir)
    report = store.ingest(sample_copy, progress=False)
    assert report.runs_added == 1 and _count(store, "runs") == N_RUNS


def test_duplicate_run_id_in_one_ingest(tmp_path: Path, sample_copy: Path) -> None:
    runs = _runs(sample_copy)
    twin = sample_copy / "twin"
    shutil.copytree(runs[0], twin)
    store = ha.open_store(tmp_path / "s")
    store.ingest(sample_copy, progress=False)
    (q,) = _quarantine(store)
    assert q["field"] == "run_id" and "also in" in q["error"]
    assert _count(store, "samples") == N_RUNS * N_SAMPLES


# -- the fast path and the checked path agree --------------------------------------------


def _sorted(t, keys):  # type: ignore[no-untyped-def]
    import polars as pl

    frame = pl.from_arrow(t)
    assert isinstance(frame, pl.DataFrame)
    return frame.sort(keys).select(sorted(frame.columns))


def test_fast_and_checked_paths_give_the_same_tables(tmp_path: Path, sample_copy: Path) -> None:
    import duckdb

    from hylo_analytics.ingest import hylo
    from hylo_analytics.ingest._files import read_files

    # one extra log exercising omitted metrics, explicit nulls, booleans and repeated keys
    doc = {
        "version": "hylo.evallog/v0.1", "run_id": "odd", "benchmark": {"id": "b"},
        "agent": {"name": "a", "version": "1"},
        "samples": [
            {"key": "t#1", "task_id": "t", "seed": 1, "status": "success",
             "scores": {"success": True, "steps": 3}},
            {"key": "t#1", "task_id": "t", "seed": 1, "status": "failure", "scores": {"success": 0}},
            {"key": "t#2", "task_id": "t", "seed": 2, "status": "error", "scores": {"success": None}},
            {"key": "t#3", "task_id": "t", "seed": 3, "status": "error"},
        ],
    }  # fmt: skip
    (sample_copy / "odd.json").write_text(json.dumps(doc))
    paths = sorted(sample_copy.rglob("*.json"))
    files = list(read_files(paths))
    con = duckdb.connect()
    fast = hylo.parse_evallogs(con, files)
    checked = hylo._parse_checked(con, files)
    assert not fast.problems and not checked.problems
    for name, keys in (
        ("runs", ["run_id"]),
        ("samples", ["run_id", "sample_idx"]),
        ("scores", ["run_id", "key", "epoch", "metric"]),
    ):
        a = _sorted(getattr(fast, name), keys)
        b = _sorted(getattr(checked, name), keys)
        if name == "runs":  # JSON text of nested objects may differ in spacing only
            for col in ("agent_components", "results"):
                assert [json.loads(x) if x else x for x in a[col]] == [
                    json.loads(x) if x else x for x in b[col]
                ]
            a, b = a.drop("agent_components", "results"), b.drop("agent_components", "results")
        assert a.dtypes == b.dtypes or a.shape == b.shape
        assert a.to_dicts() == b.to_dicts(), name
    odd = _sorted(fast.scores, ["key", "epoch", "metric"]).filter(
        __import__("polars").col("run_id") == "odd"
    )
    assert odd.select("key", "epoch", "metric", "value", "skip_reason").rows() == [
        ("t#1", 1, "steps", 3.0, None),
        ("t#1", 1, "success", 1.0, None),
        ("t#1", 2, "steps", None, "abstained"),
        ("t#1", 2, "success", 0.0, None),
        # an errored episode's abstention says so (both paths, like the built-in scorers)
        ("t#2", 1, "steps", None, "episode errored"),
        ("t#2", 1, "success", None, "episode errored"),
    ]


@pytest.mark.slow
def test_traces_parsed_in_batches_give_the_same_rows(
    tmp_path: Path, sample_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hylo_analytics.ingest import traces

    run_dir = _runs(sample_copy)[0]
    trace = run_dir / _log(run_dir)["samples"][150]["trace"]
    trace.write_text(trace.read_text() + "{broken")  # a problem in a later batch
    whole = ha.open_store(tmp_path / "whole")
    whole.ingest(sample_copy, progress=False)
    monkeypatch.setattr(traces, "_BATCH_BYTES", 100_000)
    batched = ha.open_store(tmp_path / "batched")
    batched.parquet.ensure_on_disk()  # an empty store on disk, for the reader to open
    # another reader, looking after every commit: a chunk's commits are published together
    reader = ha.open_store(batched.root, create=False)
    orphans = (
        "SELECT count(*) FROM stg_events AS e "
        "WHERE NOT EXISTS (SELECT 1 FROM stg_runs AS r WHERE r.run_id = e.run_id)"
    )
    seen: list[tuple[int, int]] = []
    real_commit = ParquetStore.commit

    def watched(self: ParquetStore, *args: object, **kw: object) -> int:
        seq = real_commit(self, *args, **kw)  # type: ignore[arg-type]
        seen.append((reader.sql(orphans).item(), reader.sql("SELECT count(*) FROM runs").item()))
        return seq

    monkeypatch.setattr(ParquetStore, "commit", watched)
    batched.ingest(sample_copy, progress=False)
    monkeypatch.undo()
    assert len(seen) > 3 and all(o == 0 for o, _ in seen)
    assert {runs for _, runs in seen} == {0}  # one chunk: nothing visible until it is whole
    assert reader.sql("SELECT count(*) FROM runs").item() == 3
    for q in (
        f"SELECT run_id, episode_id, idx, type, raw FROM {EVENTS} ORDER BY ALL",
        "SELECT run_id, key, trace_status FROM stg_samples ORDER BY ALL",
        "SELECT path, line, field, error FROM stg_quarantine ORDER BY ALL",
    ):
        assert whole.sql(q).equals(batched.sql(q)), q
    assert (
        batched.sql("SELECT count(*) FROM stg_samples WHERE trace_status = 'partial'").item() == 1
    )
    # the traces came in several commits, and a run larger than a batch was split across two
    commits = "SELECT count(DISTINCT batch_seq) FROM raw_events"
    assert whole.sql(commits).item() == 1 and batched.sql(commits).item() > 3
    split = "SELECT count(*) FROM (SELECT run_id FROM raw_events GROUP BY 1 HAVING count(DISTINCT batch_seq) > 1)"
    assert batched.sql(split).item() > 0
    assert (
        batched.sql("SELECT count(*) FROM stg_runs").item()
        == whole.sql("SELECT count(*) FROM stg_runs").item()
    )


def _mixed_logs(folder: Path) -> list[Path]:
    """Logs of three different sample types, all clean, plus one with a bad sample key."""

    def log(run_id: str, samples: list[dict]) -> dict:
        return {
            "version": "hylo.evallog/v0.1", "run_id": run_id, "benchmark": {"id": "b"},
            "agent": {"name": "a", "components": {"p": 1, "q": None}}, "samples": samples,
        }  # fmt: skip

    def s(seed: int, status: str = "success", **more: object) -> dict:
        return {"key": f"t#{seed}", "task_id": "t", "seed": seed, "status": status, **more}

    docs = {
        # explicit epochs, two metrics, one sample without scores
        "a": log("a", [s(1, epoch=1, scores={"success": 1.0, "steps": 4.0}),
                       s(1, epoch=2, scores={"success": 0.0, "steps": None}),
                       s(2, "error", epoch=1)]),
        # repeated keys numbered in file order, one metric, a null scores object
        "b": log("b", [s(1, scores={"success": 1.0}), s(1, scores={"success": 0.0}),
                       s(2, "error", scores={"success": None}), s(3, scores=None)]),
        # the same sample type as "b": one group; no samples at all in "c2"
        "c": log("c", [s(1, scores={"success": 0.0})]),  # t#1 again, in another log
        "c2": log("c2", []),
        # a key that is not <task_id>#<seed> in a log of group "b": only this file is slow
        "bad": log("bad", [s(1, scores={"success": 1.0}), {**s(2), "key": "t#9",
                                                            "scores": {"success": 1.0}}]),
    }  # fmt: skip
    paths = []
    for name, doc in docs.items():
        path = folder / f"{name}.json"
        path.write_text(json.dumps(doc, indent=1))
        paths.append(path)
    return paths


def test_fast_path_batch_of_mixed_sample_types(tmp_path: Path) -> None:
    import duckdb

    from hylo_analytics.ingest import hylo
    from hylo_analytics.ingest._files import read_files
    from hylo_analytics.ingest.formats.hylo import _fast as _hylo_fast

    files = list(read_files(_mixed_logs(tmp_path)))
    con = duckdb.connect()
    checked = hylo._parse_checked(con, files[:4])
    for threads in (1, 2, 5):  # one part holding every log of a sample type, or split
        fast = _hylo_fast.parse_fast(files, hylo.FORMAT, threads=threads)
        assert fast.slow == (4,)  # every clean log stayed on the fast path
        assert fast.runs["n_samples"].to_pylist() == [3, 4, 1, 0]
        assert json.loads(fast.runs["agent_components"][0].as_py()) == {"p": 1, "q": None}
        keys = ["run_id", "sample_idx"]
        a = _sorted(fast.samples, keys).drop("extra", "trace")
        assert a.to_dicts() == _sorted(checked.samples, keys).select(a.columns).to_dicts()
    both = hylo.parse_evallogs(con, files)
    for name, keys in (
        ("runs", ["run_id"]),
        ("samples", ["run_id", "sample_idx"]),
        ("scores", ["run_id", "key", "epoch", "metric"]),
    ):
        a = _sorted(getattr(both, name), keys)
        b = _sorted(getattr(checked, name), keys)
        if name == "runs":
            a, b = a.drop("agent_components", "results"), b.drop("agent_components", "results")
        assert a.to_dicts() == b.to_dicts(), name
    assert _sorted(both.samples, ["run_id", "sample_idx"]).filter(
        __import__("polars").col("run_id") == "b"
    )["epoch"].to_list() == [1, 2, 1, 1]
    (problem,) = both.problems
    assert problem.field == "samples[1].key" and "is not '<task_id>#<seed>'" in problem.error
    assert problem.line is not None


@pytest.mark.slow
def test_small_chunks_commit_the_same_rows(tmp_path: Path, sample_copy: Path) -> None:
    from hylo_analytics.ingest import ingest_paths

    _mixed_logs(sample_copy)
    whole = ha.open_store(tmp_path / "whole")
    one = whole.ingest(sample_copy, progress=False)
    chunked = ha.open_store(tmp_path / "chunked")
    many = ingest_paths(chunked, [sample_copy], progress=False, chunk_bytes=1)  # a file each
    assert (many.runs_added, many.scores_added, many.quarantined) == (
        one.runs_added, one.scores_added, one.quarantined,
    )  # fmt: skip
    assert one.quarantined == 1
    batches = [p for p in (chunked.root / "batches").iterdir() if p.name.isdigit()]
    assert len(batches) > len(list((whole.root / "batches").iterdir()))
    for table in ("runs", "samples", "scores", "quarantine"):
        a, b = (s.sql(f"SELECT * FROM {table}") for s in (whole, chunked))
        cols = sorted(set(a.columns) - {"batch_seq", "ingested_at"})
        assert (
            a.height
            and a.select(cols).sort(cols).to_dicts() == b.select(cols).sort(cols).to_dicts()
        ), table


def test_strict_checks_every_trace_before_committing_a_batch(
    tmp_path: Path, sample_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hylo_analytics.ingest import traces

    run_dir = _runs(sample_copy)[-1]
    trace = run_dir / _log(run_dir)["samples"][-1]["trace"]
    trace.write_text(trace.read_text() + "{broken\n" + json.dumps({"type": "note"}) + "\n")
    monkeypatch.setattr(traces, "_BATCH_BYTES", 100_000)  # the bad line is in the last batch
    store = ha.open_store(tmp_path / "s")
    with pytest.raises(ha.IngestError) as err:
        store.ingest(sample_copy, strict=True, progress=False)
    assert str(trace) in str(err.value) and "malformed JSON line" in str(err.value)
    assert _count(store, "runs") == 0 and _count(store, "events") == 0


def test_a_commit_of_every_row_holds_no_second_copy() -> None:
    """One huge log is one chunk committed whole: its tables go to the writer as they are, not
    as filtered copies (benchmarks/bench_huge_line.py measures the peak: under 1 GB for a
    100 MB one-line log)."""
    import pyarrow as pa

    from hylo_analytics.ingest import _rows_of

    t = pa.table({"file_idx": pa.array([0, 0, 1], pa.int32()), "v": [1, 2, 3]})
    assert _rows_of(t, pa.array([0, 1], pa.int32())) is t
    assert _rows_of(t, pa.array([1], pa.int32())).column("v").to_pylist() == [3]
