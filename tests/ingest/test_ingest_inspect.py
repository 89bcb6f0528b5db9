"""Inspect AI logs, generated with ``inspect_ai`` itself, read without it and checked against
``inspect_ai.analysis.samples_df`` / ``evals_df`` on the same files."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import polars as pl
import pytest
from _inspect_logs import shared_logs

import hylo_analytics as ha
from hylo_analytics.ingest import detect, inspect

analysis = pytest.importorskip("inspect_ai.analysis")
metric = pytest.importorskip("inspect_ai.scorer._metric")


@pytest.fixture(scope="session")
def inspect_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real logs: a clean run and a crashed run, each as .eval and .json, plus a journal-only
    .eval (a process killed mid-run)."""
    return shared_logs(tmp_path_factory)


@pytest.fixture(scope="session")
def inspect_store(
    tmp_path_factory: pytest.TempPathFactory, inspect_logs: dict[str, Path]
) -> ha.Store:
    store = ha.open_store(tmp_path_factory.mktemp("istore") / "store")
    # the journal-only log shares its eval_id with ok_eval: it gets its own store
    report = store.ingest([p for k, p in inspect_logs.items() if k != "started"], progress=False)
    assert report.quarantined == 0, report
    return store


def _samples_df(path: Path) -> pl.DataFrame:
    with warnings.catch_warnings():  # pandas deprecations inside inspect_ai.analysis
        warnings.simplefilter("ignore")
        return pl.from_pandas(analysis.samples_df(str(path), quiet=True))


def _evals_df(path: Path) -> pl.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pl.from_pandas(analysis.evals_df(str(path), quiet=True))


def _to_float(v: object) -> float:
    return float(metric.value_to_float()(v))  # Inspect's own mapping


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ok_eval", "ok_json", "crash_eval", "crash_json"])
def test_counts_and_means_match_samples_df(
    name: str, inspect_logs: dict[str, Path], inspect_store: ha.Store
) -> None:
    path = inspect_logs[name]
    ref = _samples_df(path)
    ev = _evals_df(path)
    run_id = ev["eval_id"][0]
    ours = inspect_store.sql("SELECT * FROM stg_samples WHERE run_id = ?", [run_id])
    assert ours.height == ref.height > 0
    assert sorted(zip(ours["key"], ours["epoch"], strict=True)) == sorted(
        (f"arith#{i}", e) for i, e in zip(ref["id"], ref["epoch"], strict=True)
    )
    scores = inspect_store.sql(
        "SELECT metric, avg(value) AS m, count(value) AS n FROM stg_scores "
        "WHERE run_id = ? GROUP BY metric",
        [run_id],
    )
    got = dict(zip(scores["metric"], scores["m"], strict=True))
    for scorer in ("match", "grade_cip"):
        vals = [_to_float(v) for v in ref[f"score_{scorer}"].drop_nulls()]
        assert got[scorer] == pytest.approx(sum(vals) / len(vals))
    dicts = [json.loads(v) for v in ref["score_grade_dict"].drop_nulls()]
    for key in ("len", "parity"):
        assert got[f"grade_dict.{key}"] == pytest.approx(sum(d[key] for d in dicts) / len(dicts))
    usage = [json.loads(u) for u in ref["model_usage"].drop_nulls()]
    total_in = sum(m["input_tokens"] for u in usage for m in u.values())
    n_in = inspect_store.sql(
        "SELECT sum(value) FROM stg_scores WHERE run_id = ? AND metric = 'llm.tokens.input'",
        [run_id],
    ).item()
    assert n_in == total_in
    run = inspect_store.sql("SELECT * FROM stg_runs WHERE run_id = ?", [run_id])
    assert run["status"][0] == ev["status"][0]
    assert (
        run["agent_name"][0]
        == ev["model"][0]
        == "hylotest/" + ("det-1" if name.startswith("ok") else "crash")
    )
    assert json.loads(run["extra"][0])["llm.model.name"] == ev["model"][0]
    assert run["source_format"][0] == ("inspect.eval" if path.suffix == ".eval" else "inspect.json")


def test_run_summary_agrees_with_evals_df(
    inspect_logs: dict[str, Path], inspect_store: ha.Store
) -> None:
    ev = _evals_df(inspect_logs["ok_eval"])
    run_id = ev["eval_id"][0]
    # Inspect reduces epochs per sample (mean) before its accuracy metric
    got = inspect_store.sql(
        """SELECT avg(m) FROM (SELECT key, avg(value) AS m FROM stg_scores
           WHERE run_id = ? AND metric = 'match' GROUP BY key)""",
        [run_id],
    ).item()
    assert got == pytest.approx(ev["score_match_accuracy"][0])
    assert inspect_store.sql(
        "SELECT n_samples FROM stg_runs WHERE run_id = ?", [run_id]
    ).item() == int(ev["completed_samples"][0])


def test_crashed_run_keeps_status_and_errored_samples_abstain(
    inspect_logs: dict[str, Path], inspect_store: ha.Store
) -> None:
    ev = _evals_df(inspect_logs["crash_eval"])
    run_id = ev["eval_id"][0]
    assert inspect_store.sql("SELECT status FROM stg_runs WHERE run_id = ?", [run_id]).item() == (
        "error"
    )
    err = inspect_store.sql(
        "SELECT * FROM stg_samples WHERE run_id = ? AND status = 'error'", [run_id]
    )
    ref = _samples_df(inspect_logs["crash_eval"])
    errors = ref["error"].drop_nulls()
    assert err.height == errors.filter(errors != "").len() > 0
    for key in err["key"]:
        ab = inspect_store.sql(
            "SELECT * FROM stg_scores WHERE run_id = ? AND key = ? AND metric = 'match'",
            [run_id, key],
        )
        assert ab["value"].null_count() == ab.height
        assert ab["skip_reason"][0].startswith("sample error: ")


@pytest.mark.slow
def test_journal_only_log_is_a_started_run_with_its_samples(
    inspect_logs: dict[str, Path], inspect_store: ha.Store, tmp_path: Path
) -> None:
    ref = _samples_df(inspect_logs["ok_eval"])
    store = ha.open_store(tmp_path / "s")
    rep = store.ingest(inspect_logs["started"], progress=False)
    assert rep.quarantined == 0 and rep.formats == (("inspect.eval", 1),)
    row = store.sql("SELECT run_id, status, n_samples FROM stg_runs")
    assert row["status"][0] == "started"
    assert row["n_samples"][0] == ref.height
    # the journal holds the same summaries: same scores as the finished log
    q = "SELECT metric, avg(value) AS m FROM stg_scores WHERE run_id = ? GROUP BY metric ORDER BY metric"
    rid = row["run_id"][0]
    assert store.sql(q, [rid]).equals(inspect_store.sql(q, [rid]))
    # both in one ingest: one run_id claimed twice, the second file is quarantined
    both = ha.open_store(tmp_path / "both")
    rep = both.ingest([inspect_logs["ok_eval"], inspect_logs["started"]], progress=False)
    assert rep.runs_added == 1 and rep.quarantined == 1
    assert rep.problems[0].field == "run_id"


def test_score_value_table_matches_value_to_float() -> None:
    import duckdb

    con = duckdb.connect()
    con.execute(inspect._NUM_MACRO)
    cases = ["C", "I", "P", "N", "yes", "TRUE", "No", "false", "0.25", "-3", True, False, 2, 0.5]
    for v in cases:
        got = con.execute("SELECT _insp_num(CAST(? AS JSON))", [json.dumps(v)]).fetchone()
        assert got is not None and got[0] == pytest.approx(_to_float(v)), v
    for v in ["maybe", "nan", None, [1, 2]]:
        got = con.execute("SELECT _insp_num(CAST(? AS JSON))", [json.dumps(v)]).fetchone()
        assert got is not None and got[0] is None, v  # abstains where Inspect says 0 + warning


def test_detected_by_content_not_name(inspect_logs: dict[str, Path], tmp_path: Path) -> None:
    renamed = tmp_path / "renamed.json"
    renamed.write_bytes(inspect_logs["ok_eval"].read_bytes())
    reader = detect(renamed.read_bytes()[:4096], renamed)
    assert reader is not None and reader.format == "inspect.eval"
    store = ha.open_store(tmp_path / "s")
    rep = store.ingest(renamed, progress=False)
    assert rep.formats == (("inspect.eval", 1),)
    assert rep.file_formats == ((str(renamed.absolute()), "inspect.eval"),)
    assert store.sql("SELECT format FROM stg_ingested_files").item() == "inspect.eval"


def test_corrupt_zip_is_quarantined_not_a_crash(
    tmp_path: Path, inspect_logs: dict[str, Path]
) -> None:
    data = inspect_logs["ok_eval"].read_bytes()
    bad = tmp_path / "bad.eval"
    bad.write_bytes(data[:2000])  # local headers survive, the central directory does not
    store = ha.open_store(tmp_path / "s")
    rep = store.ingest(bad, progress=False)
    assert rep.runs_added == 0 and rep.quarantined == 1
    assert "cannot read the .eval zip" in rep.problems[0].error
    fresh = ha.open_store(tmp_path / "s2")  # (an unchanged quarantined file is skipped)
    with pytest.raises(ha.IngestError, match=r"bad\.eval"):
        fresh.ingest(bad, strict=True, progress=False)


def test_truncated_json_log_is_quarantined_with_position(
    tmp_path: Path, inspect_logs: dict[str, Path]
) -> None:
    good = inspect_logs["ok_json"]
    bad = tmp_path / "cut.json"
    bad.write_bytes(good.read_bytes()[:5000])
    store = ha.open_store(tmp_path / "s")
    rep = store.ingest([bad, good], progress=False)
    assert rep.formats == (("inspect.json", 2),)
    assert rep.runs_added == 1 and rep.quarantined == 1  # the good log still lands
    p = rep.problems[0]
    assert p.path == str(bad.absolute()) and p.error.startswith("malformed JSON")
    assert p.line is not None and p.line > 1
