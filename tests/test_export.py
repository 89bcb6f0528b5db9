"""EvalLog export: v0.1 round trip is lossless (log and traces), v0.2 layout."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics._traces import with_raw_sql
from hylo_analytics.cli import main


def _normalised(doc: dict[str, object]) -> dict[str, object]:
    """Key order and sample order do not matter; numbers compare by value (1 == 1.0)."""
    samples = sorted(doc["samples"], key=lambda s: (s["key"], s.get("epoch", 1)))  # type: ignore[attr-defined]
    return {**doc, "samples": samples}


@pytest.mark.parametrize("run", ["run-octo-ft-1.0.0-0000", "run-octo-ft-1.2.0-rc1-0002"])
def test_v01_round_trip_is_lossless(
    run: str, sample_store: ha.Store, sample_dir: Path, tmp_path: Path
) -> None:
    out = ha.export_evallog(sample_store, run, tmp_path / run / "evallog.json")
    orig = json.loads((sample_dir / run / "evallog.json").read_text())
    assert _normalised(json.loads(out.read_text())) == _normalised(orig)
    traces = sorted((sample_dir / run / "episodes").iterdir())
    assert traces
    for t in traces:
        assert (tmp_path / run / "episodes" / t.name).read_bytes() == t.read_bytes()
    # and the export reads back into the same rows
    store = ha.open_store(tmp_path / "s")
    rep = store.ingest(out, progress=False)
    assert rep.quarantined == 0
    q = "SELECT key, epoch, metric, value FROM stg_scores WHERE run_id = ? ORDER BY ALL"
    assert store.sql(q, [run]).equals(sample_store.sql(q, [run]))


def test_round_trip_with_epochs_extra_and_abstentions(tmp_path: Path) -> None:
    doc = {
        "version": "hylo.evallog/v0.1",
        "run_id": "r1",
        "note": {"kept": True},
        "benchmark": {"id": "b"},
        "agent": {"name": "a"},
        "samples": [
            {
                "key": "t#1",
                "task_id": "t",
                "seed": 1,
                "epoch": 1,
                "status": "success",
                "scores": {"success": 1, "steps": {"value": 3.5, "explanation": "why"}},
                "x": [1],
            },
            {
                "key": "t#1",
                "task_id": "t",
                "seed": 1,
                "epoch": 2,
                "status": "error",
                "scores": {"success": None},
            },
            {"key": "t#2", "task_id": "t", "seed": 2, "episode_id": "e2", "status": "failure"},
        ],
    }
    src = tmp_path / "in" / "log.json"
    src.parent.mkdir()
    src.write_text(json.dumps(doc))
    store = ha.open_store(tmp_path / "s")
    store.ingest(src, progress=False)
    out = ha.export_evallog(store, "r1", tmp_path / "out" / "log.json")
    got = json.loads(out.read_text())
    # a metric the log reports for some samples is an abstention where another omits it,
    # so the omitted "steps" of epoch 2 comes back as an explicit null
    doc["samples"][1]["scores"]["steps"] = None  # type: ignore[index]
    assert _normalised(got) == _normalised(doc)


def test_v02_layout(sample_store: ha.Store, tmp_path: Path) -> None:
    run = "run-octo-ft-1.0.0-0000"
    out = ha.export_evallog(sample_store, run, tmp_path / "v2.json", version="v0.2", traces=False)
    doc = json.loads(out.read_text())
    assert list(doc)[:5] == ["version", "status", "eval", "results", "stats"]
    assert doc["version"] == "hylo.evallog/v0.2" and doc["eval"]["run_id"] == run
    n = sample_store.sql("SELECT count(*) FROM stg_samples WHERE run_id = ?", [run]).item()
    assert sum(len(s["epochs"]) for s in doc["samples"]) == n == doc["stats"]["n_episodes"]
    mean = sample_store.sql(
        "SELECT avg(value) FROM stg_scores WHERE run_id = ? AND metric = 'success'", [run]
    ).item()
    assert doc["results"]["metrics"]["success"] == pytest.approx(mean)
    assert not (tmp_path / "episodes").exists()


def test_unknown_run_and_version(sample_store: ha.Store, tmp_path: Path) -> None:
    with pytest.raises(ha.RunSelectionError, match="no run matches 'nope'"):
        ha.export_evallog(sample_store, "nope", tmp_path / "x.json")
    with pytest.raises(ValueError, match=r"v0\.3"):
        ha.export_evallog(sample_store, "x", tmp_path / "x.json", version="v0.3")  # type: ignore[arg-type]


def test_cli_export(
    sample_store: ha.Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "e" / "log.json"
    code = main(
        [
            "export",
            "--store",
            str(sample_store.root),
            "--run",
            "run-octo-ft-1.1.0-0001",
            "-o",
            str(out),
            "--version",
            "v0.2",
        ]
    )
    assert code == 0 and "wrote" in capsys.readouterr().out
    assert json.loads(out.read_text())["eval"]["run_id"] == "run-octo-ft-1.1.0-0001"
    assert main(["export", "--store", str(sample_store.root), "--run", "nope", "-o", str(out)]) == 2


REAL_IR = Path("/work/shared/data/real/inspect-robots")

_RUN_COLS = (
    "run_id, benchmark_id, benchmark_version, benchmark_digest, split, requires_privileged,"
    " episodes_per_task, max_steps::JSON, benchmark_upstream::JSON,"
    " agent_name, agent_version, agent_components::JSON, results::JSON, n_samples, extra::JSON"
)
_TABLES = {
    "runs": f"SELECT {_RUN_COLS} FROM stg_runs WHERE run_id = ?",
    "samples": "SELECT key, task_id, seed, epoch, episode_id, status, extra::JSON"
    " FROM stg_samples WHERE run_id = ?",
    "scores": "SELECT key, task_id, seed, epoch, episode_id, metric, value, valid, explanation"
    " FROM stg_scores WHERE run_id = ?",
    # each event's line as written (from the trace file kept once: hylo_analytics._traces)
    "events": "SELECT key, episode_id, idx, raw FROM ("
    + with_raw_sql("SELECT * FROM stg_events")
    + ") WHERE run_id = ?",
}


def _assert_same_run(a: ha.Store, b: ha.Store, run: str, *, v02: bool) -> None:
    """Every run field, sample, score, status and trace line of ``run`` equal in both stores."""
    for name, q in _TABLES.items():
        got, want = b.sql(q + " ORDER BY ALL", [run]), a.sql(q + " ORDER BY ALL", [run])
        assert got.height == want.height and got.equals(want), (name, got, want)
    if v02:  # v0.2 also keeps the run's status and created
        q = "SELECT status, created FROM stg_runs WHERE run_id = ?"
        assert b.sql(q, [run]).rows() == a.sql(q, [run]).rows()


def _round_trip(store: ha.Store, tmp_path: Path, version: str) -> ha.Store:
    runs = store.sql("SELECT run_id FROM stg_runs ORDER BY 1")["run_id"].to_list()
    assert runs
    back = ha.open_store(tmp_path / f"back-{version}")
    for i, run in enumerate(runs):
        out = ha.export_evallog(
            store.parquet, run, tmp_path / version / str(i) / "log.json", version=version
        )  # type: ignore[arg-type]
        rep = back.ingest(out, progress=False)
        assert rep.quarantined == 0, back.sql("SELECT * FROM stg_quarantine").to_dicts()
    for run in runs:
        _assert_same_run(store, back, run, v02=version == "v0.2")
    return back


@pytest.mark.slow
@pytest.mark.parametrize("version", ["v0.1", "v0.2"])
def test_round_trip_of_the_sample_is_lossless(
    version: str, sample_store: ha.Store, tmp_path: Path
) -> None:
    back = _round_trip(sample_store, tmp_path, version)
    fmt = back.sql("SELECT DISTINCT source_format FROM stg_runs")["source_format"].to_list()
    assert fmt == [f"hylo.evallog/{version}"]


@pytest.mark.slow
def test_v02_round_trip_of_real_inspect_robots_logs(tmp_path: Path) -> None:
    assert REAL_IR.is_dir() and len(list(REAL_IR.glob("*.json"))) == 2
    store = ha.open_store(tmp_path / "ir")
    store.ingest(REAL_IR, progress=False)
    _round_trip(store, tmp_path, "v0.2")


@pytest.mark.slow
def test_v02_has_the_inspect_robots_shape(tmp_path: Path) -> None:
    """The inspect-robots reader reads a v0.2 export as its own log: same scenes and scores."""
    store = ha.open_store(tmp_path / "ir")
    store.ingest(REAL_IR, progress=False)
    runs = store.sql("SELECT run_id FROM stg_runs ORDER BY 1")["run_id"].to_list()
    for i, run in enumerate(runs):
        out = ha.export_evallog(store, run, tmp_path / f"v2-{i}.json", version="v0.2")
        doc = json.loads(out.read_text())
        src = next(
            p
            for p in REAL_IR.glob("*.json")
            if hashlib.sha256(p.read_bytes()).hexdigest()[:12] == run[-12:]
        )
        orig = json.loads(src.read_text())
        assert set(orig) - {"error"} <= set(doc)
        for s, o in zip(doc["samples"], orig["samples"], strict=True):
            assert s["status"] == o["status"] and s["scene_id"] == f"adhoc#{o['scene_id']}"
            if o["status"] != "error":  # an errored scene abstains on the metric it names
                assert s["epochs"] == o["epochs"] and s["reduced"] == o["reduced"]
        # as an inspect-robots log (its version, its eval): the same scores
        doc["version"], doc["eval"] = 1, {**doc["eval"]["extra"]["eval"]}
        ir = tmp_path / f"ir-{i}" / "log.json"
        ir.parent.mkdir()
        ir.write_text(json.dumps(doc))
        other = ha.open_store(tmp_path / f"ir-store-{i}")
        assert other.ingest(ir, progress=False).quarantined == 0
        q = "SELECT epoch, metric, value FROM stg_scores ORDER BY ALL"
        assert other.sql(q).equals(store.sql(q.replace("ORDER", f"WHERE run_id = '{run}' ORDER")))


def test_v01_reader_still_refuses_a_v02_key_rule_break(tmp_path: Path) -> None:
    doc = {
        "version": "hylo.evallog/v0.1",
        "run_id": "r",
        "benchmark": {"id": "b"},
        "agent": {"name": "a"},
        "samples": [{"key": "t#scene", "task_id": "t", "seed": 1, "status": "success"}],
    }
    src = tmp_path / "log.json"
    src.write_text(json.dumps(doc))
    store = ha.open_store(tmp_path / "s")
    assert store.ingest(src, progress=False).quarantined == 1


@pytest.mark.slow
@pytest.mark.parametrize("version", ["v0.1", "v0.2"])
def test_round_trip_keeps_the_benchmark_v02_members(version: str, tmp_path: Path) -> None:
    bench = {
        "id": "robocasa",
        "episodes_per_task": 2,
        "max_steps": {"t/a": 120, "t/b": 400},
        "upstream": {
            "repo": "https://github.com/robocasa/robocasa",
            "commit": "9f1c2e7a",
            "assets": {"objects.zip": "sha256:ab12", "kitchens/é.tar": "sha256:cd34"},
        },
    }
    doc = {
        "version": "hylo.evallog/v0.1",
        "run_id": "r1",
        "benchmark": bench,
        "agent": {"name": "a"},
        "samples": [
            {"key": "t/a#1", "task_id": "t/a", "seed": 1, "epoch": e, "status": "success"}
            for e in (1, 2)
        ],
    }
    src = tmp_path / "in" / "log.json"
    src.parent.mkdir()
    src.write_text(json.dumps(doc))
    store = ha.open_store(tmp_path / "s")
    assert store.ingest(src, progress=False).quarantined == 0
    out = ha.export_evallog(store, "r1", tmp_path / "out" / "log.json", version=version)  # type: ignore[arg-type]
    got = json.loads(out.read_text())
    assert (got["benchmark"] if version == "v0.1" else got["eval"]["benchmark"]) == bench
    back = ha.open_store(tmp_path / "back")
    assert back.ingest(out, progress=False).quarantined == 0
    q = "SELECT episodes_per_task, max_steps::JSON, benchmark_upstream::JSON FROM stg_runs"
    assert back.sql(q).rows() == store.sql(q).rows()
    assert back.sql(q).rows()[0][0] == 2


# -- the real files, every column ------------------------------------------------------------

# What legitimately differs between a run as first ingested and as read back from its export,
# and nothing else: provenance of the file read (its path, checksum, size, mtime and format:
# an export is a hylo EvalLog, not the vla-eval or inspect-robots file it came from), the
# time of ingest and the store's batch numbers.
_DIFFERS = {
    "runs": ("source_format", "source_path", "source_sha256", "ingested_at", "batch_seq"),
    "samples": ("batch_seq",),
    "scores": ("batch_seq",),
    "events": ("batch_seq",),
    "trace_files": ("path", "sha256", "batch_seq"),
    "ingested_files": ("path", "sha256", "size", "mtime_ns", "format", "ingested_at", "batch_seq"),
}


def _rows(store: ha.Store, table: str, runs: list[str]) -> pl.DataFrame:
    cols = ", ".join(_DIFFERS[table])
    return store.sql(
        f"SELECT * EXCLUDE ({cols}) FROM stg_{table} WHERE list_contains(?, run_id) ORDER BY ALL",
        [runs],
    )


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory, real_dir: Path) -> ha.Store:
    """The real files in ../shared/data/real, ingested once (read-only)."""
    store = ha.open_store(tmp_path_factory.mktemp("real") / "store")
    for folder in ("vla-eval-harness", "inspect-robots"):
        store.ingest(real_dir / folder, progress=False)
    return store


@pytest.mark.slow
@pytest.mark.parametrize("version", ["v0.1", "v0.2"])
def test_round_trip_of_the_real_files_keeps_every_column(
    version: str, real_store: ha.Store, tmp_path: Path
) -> None:
    """vla-eval results and inspect-robots logs, exported and read back: every column of
    every table equal but those named in ``_DIFFERS`` (skip reasons such as "harness error:
    timeout", errored episodes, run and sample metadata, run status), and the format version
    the same in every table."""
    runs = real_store.sql("SELECT run_id, source_format FROM stg_runs ORDER BY 1").rows()
    assert {f for _, f in runs} == {"vla-eval", "inspect-robots/v1"} and len(runs) == 14
    reasons = real_store.sql("SELECT DISTINCT skip_reason FROM stg_scores")["skip_reason"]
    assert "harness error: timeout" in reasons.to_list()  # what the round trip used to lose
    back = ha.open_store(tmp_path / "back")
    for i, (run, fmt) in enumerate(runs):
        out = tmp_path / "out" / str(i) / "log.json"
        if version == "v0.1" and fmt == "inspect-robots/v1":
            # an inspect-robots key is '<task>#<scene>': v0.1 cannot hold it, v0.2 does
            with pytest.raises(ValueError, match=r"not '<task_id>#<seed>'.*export it as v0\.2"):
                ha.export_evallog(real_store, run, out, version=version)  # type: ignore[arg-type]
            assert not out.exists()
            continue
        ha.export_evallog(real_store, run, out, version=version)  # type: ignore[arg-type]
        rep = back.ingest(out, progress=False)
        assert rep.quarantined == 0, rep.problems
        assert rep.formats == ((f"hylo.evallog/{version}", 1),)
    kept = [run for run, fmt in runs if version == "v0.2" or fmt == "vla-eval"]
    for table in _DIFFERS:
        got, want = _rows(back, table, kept), _rows(real_store, table, kept)
        assert got.height == want.height, table
        for col in want.columns:
            assert got[col].to_list() == want[col].to_list(), (table, col)
    # the format version, the same in every table that names it
    fmt = back.sql(
        "SELECT DISTINCT r.source_format, f.format FROM stg_runs AS r"
        " JOIN stg_ingested_files AS f ON f.run_id = r.run_id AND f.role = 'log'"
    ).rows()
    assert fmt == [(f"hylo.evallog/{version}", f"hylo.evallog/{version}")]


def test_a_refused_v02_log_is_recorded_as_v02(tmp_path: Path) -> None:
    """ingested_files.format names the version a quarantined hylo log says it is."""
    src = tmp_path / "in" / "log.json"
    src.parent.mkdir()
    src.write_text(json.dumps({"version": "hylo.evallog/v0.2", "eval": {"run_id": 5}}))
    store = ha.open_store(tmp_path / "s")
    rep = store.ingest(src, progress=False)
    assert rep.quarantined and rep.formats == (("hylo.evallog/v0.2", 1),)
    q = "SELECT format, outcome FROM stg_ingested_files"
    assert store.sql(q).rows() == [("hylo.evallog/v0.2", "quarantined")]


@pytest.mark.parametrize("version", ["v0.1", "v0.2"])
def test_a_sample_without_a_seed_is_not_exported(version: str, tmp_path: Path) -> None:
    """A MetricResult file has no seeds: no log the reader would refuse is written."""
    src = tmp_path / "m.jsonl"
    src.write_text(
        json.dumps({"sample_id": "scene-9", "metric_id": "fvd", "raw_value": 1.0}) + "\n"
    )
    store = ha.open_store(tmp_path / "s")
    assert store.ingest(src, progress=False).quarantined == 0
    run = store.sql("SELECT run_id FROM stg_runs").item()
    out = tmp_path / "out" / "log.json"
    with pytest.raises(ValueError, match="sample 'scene-9' has no seed"):
        ha.export_evallog(store, run, out, version=version)  # type: ignore[arg-type]
    assert not out.exists()
