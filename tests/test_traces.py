"""Traces kept once per file (``trace_files``): every raw line recoverable, export byte for byte,
and a store written before the table (every event with its line) reads, scores and exports the
same (issue 26 item 5)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics._traces import event_lines, trace_text
from hylo_analytics.scoring import EpisodeScorer, ScoringCall
from hylo_analytics.scoring.graders import EpisodeTask, EpisodeTrace, GradeEvent
from hylo_analytics.testing.older import inline_trace_lines


def _span(name: str, kind: str = "tool", **arguments: Any) -> str:
    return json.dumps(
        {"type": "span", "name": name, "kind": kind, "attributes": {"arguments": arguments}}
    )


def _hostile(data: Path, sample_dir: Path) -> None:
    """Two sample runs; in the first, traces with CRLF endings, blank lines, a malformed line,
    non-ASCII text, unknown events, a truncated last line, an empty file, spans and grades."""
    for run in sorted(sample_dir.iterdir())[:2]:
        shutil.copytree(run, data / run.name)
    run_dir = sorted(data.iterdir())[0]
    log = json.loads((run_dir / "evallog.json").read_text())
    traces = [run_dir / s["trace"] for s in log["samples"][:5]]
    lines = traces[0].read_bytes().split(b"\n")[:-1]
    odd = json.dumps({"type": "camera_frame", "t": 3, "uri": "frames/é 3.png", "x": [1, 2]})
    body = [lines[0] + b"\r", b"", lines[1] + b"\r\r", b"   ", b"{not json", odd.encode()]
    body += [ln + b"\r" for ln in lines[2:]]
    traces[0].write_bytes(b"\n".join(body) + b"\n")
    # a good trace with spans and grade lines (its own grader's)
    spans = [_span("search", q="caf\u00e9 \U0001f600"), _span("open", kind="llm")]
    spans += ['{"type": "grade", "grader": "op", "name": "success", "value": true}']
    spans += ['{"type": "grade", "grader": "op", "name": "style", "value": "good"}']
    traces[4].write_bytes(traces[4].read_bytes() + "\n".join(spans).encode() + b"\n")
    # a truncated write: no newline after a half line
    traces[1].write_bytes(traces[1].read_bytes() + b'{"type": "step", "t": 9')
    # one without a final newline, its last line with escapes
    text = traces[2].read_bytes().rstrip(b"\n")
    traces[2].write_bytes(text + b'\n{"type": "note", "text": "a\\tb \\u00e9"}')
    traces[3].write_bytes(b"")  # an empty trace


def _file_line(path: str, idx: int) -> str:
    return Path(path).read_bytes().split(b"\n")[idx - 1].rstrip(b"\r\n").decode()


@pytest.fixture()
def hostile(tmp_path: Path, sample_dir: Path) -> Path:
    _hostile(tmp_path / "data", sample_dir)
    return tmp_path / "data"


@pytest.mark.slow
def test_every_raw_line_is_recoverable(hostile: Path, tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "store")
    report = store.ingest(hostile, progress=False)
    assert report.quarantined == 2  # the malformed line and the truncated last one
    # no event row carries a copy of its line, but a grade (the grades scorer reads it in SQL)
    kept = store.sql("select type, count(raw) as n, count(*) as all from events group by 1")
    assert {t: (n, a) for t, n, a in kept.rows() if n} == {"grade": (44, 44)}
    lines = event_lines(store.parquet)
    assert lines.height == report.events_added and lines["raw"].null_count() == 0
    paths = store.sql("select run_id, key, episode_id, trace_path from samples")
    joined = lines.join(paths, on=["run_id", "key", "episode_id"])
    assert joined.height == lines.height
    for row in joined.iter_rows(named=True):
        assert row["raw"] == _file_line(row["trace_path"], row["idx"]), row
    assert lines.filter(pl.col("type") == "camera_frame")["raw"].to_list() == [
        json.dumps({"type": "camera_frame", "t": 3, "uri": "frames/é 3.png", "x": [1, 2]})
    ]
    # each trace file once, whole, with its digest and line count
    files = store.sql("select * from trace_files")
    traced = store.sql("select distinct trace_path from samples where trace_path is not null")
    assert sorted(files["path"].to_list()) == sorted(traced["trace_path"].to_list())
    for row in files.iter_rows(named=True):
        data = Path(row["path"]).read_bytes()
        assert trace_text(row["data"], row["size"]).encode() == data
        assert (row["sha256"], row["size"]) == (hashlib.sha256(data).hexdigest(), len(data))
        last = 0 if not data or data.endswith(b"\n") else 1  # a last line with no newline
        assert row["n_lines"] == data.count(b"\n") + last


@pytest.mark.slow
def test_export_writes_each_trace_byte_for_byte(sample_dir: Path, tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "store")
    store.ingest(sample_dir, progress=False)
    runs = store.sql("select run_id, source_path from runs order by run_id").rows()
    n = 0
    for i, (run, source) in enumerate(runs):
        out = ha.export_evallog(store, run, tmp_path / "out" / str(i) / "evallog.json")
        for trace in Path(source).parent.glob("episodes/*.jsonl"):
            back = out.parent / "episodes" / trace.name
            assert back.read_bytes() == trace.read_bytes(), trace
            n += 1
    assert n == store.sql("select count(*) from trace_files").item()


class _Grader:
    name = "counter"

    def grade(self, trace: EpisodeTrace, task: EpisodeTask) -> GradeEvent:
        kinds = sorted({str(e.get("type")) for e in trace.events})
        value = None if not trace.events else float(len(trace.events) % 2)
        return GradeEvent(value, "odd", ",".join(kinds), {"n": len(trace.events)})


def _events_scorer(call: ScoringCall) -> float:
    # every field of every line: a change of one byte of a raw line changes the score
    text = json.dumps([dict(e) for e in call.events], sort_keys=True)
    return float(int(hashlib.sha256(text.encode()).hexdigest()[:8], 16))


_SCORERS: list[Any] = [
    None,  # the built-ins, grades included
    [EpisodeScorer("lines", _events_scorer)],
    {"tools": {"expected_actions": {"check": "selection", "actions": ["search", "open"]}}},
    {"llm": {"expected_actions": {"check": "selection", "actions": ["open"], "span_kind": "llm"}}},
]


def _everything(store: ha.Store, out: Path) -> dict[str, Any]:
    """Scores, event lines and exported files of ``store``, after grading and scoring."""
    store.grade(_Grader())
    for s in _SCORERS:
        store.score(s)
    scores = store.sql(
        "select * exclude (batch_seq) from stg_scores order by run_id, key, epoch, metric, source"
    )
    files: dict[str, bytes] = {}
    for i, run in enumerate(store.sql("select run_id from runs order by 1")["run_id"]):
        for version in ("v0.1", "v0.2"):
            target = out / version / str(i)
            ha.export_evallog(store, run, target / "evallog.json", version=version)  # type: ignore[arg-type]
            for p in sorted(target.rglob("*")):
                if p.is_file():
                    files[str(p.relative_to(out))] = p.read_bytes()
    lines = event_lines(store.parquet).drop("type")
    return {"scores": scores, "lines": lines, "files": files}


@pytest.mark.slow
def test_an_older_store_scores_and_exports_the_same(hostile: Path, tmp_path: Path) -> None:
    new = ha.open_store(tmp_path / "new")
    new.ingest(hostile, progress=False)
    shutil.copytree(tmp_path / "new", tmp_path / "old")
    inline_trace_lines(tmp_path / "old")  # as an older version wrote it: raw per event
    old = ha.open_store(tmp_path / "old", create=False)
    assert not old.parquet.manifest.current_schemas
    assert old.sql("select count(*) from trace_files").item() == 0
    assert old.sql("select count(*) - count(raw) from events").item() == 0

    want = _everything(new, tmp_path / "out-new")
    got = _everything(old, tmp_path / "out-old")
    assert got["lines"].equals(want["lines"])
    assert want["scores"].height > 0 and got["scores"].equals(want["scores"], null_equal=True)
    assert want["files"] and got["files"] == want["files"]
    graded = want["scores"].filter(pl.col("source") == "grade:counter")
    assert graded.height and graded["value"].drop_nulls().len()  # the grader saw the events
    # the grade lines of the traces themselves: a boolean counts 1, a string is no number
    op = want["scores"].filter(pl.col("source") == "grade:op")
    assert op.select("metric", "value", "skip_reason").rows() == [
        ("style", None, 'non-numeric grade value: "good"'),
        ("success", 1.0, None),
    ]
    tools = want["scores"].filter(
        (pl.col("source") == "scorer:tools") & pl.col("value").is_not_null()
    )
    assert tools.height == 1  # the one trace with spans called both


@pytest.mark.slow
def test_a_replaced_run_supersedes_its_trace_files(hostile: Path, tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "store")
    store.ingest(hostile, progress=False)
    before = store.sql("select count(*) from trace_files").item()
    run_dir = sorted(hostile.iterdir())[1]
    trace = next((run_dir / "episodes").glob("*.jsonl"))
    trace.write_bytes(trace.read_bytes() + b'{"type": "note"}\n')
    log = run_dir / "evallog.json"
    log.write_text(log.read_text() + " ")  # a changed log: the run is read again
    store.ingest(hostile, progress=False)
    assert store.sql("select count(*) from trace_files").item() == before
    assert store.sql("select count(*) from raw_trace_files").item() > before
    lines = event_lines(store.parquet).filter(pl.col("type") == "note")
    assert lines["raw"].to_list()[-1] == '{"type": "note"}'
