"""The scoring engine over hand-built traces ingested into a real store."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from scoring_data import RUN, write_run

import hylo_analytics as ha
from hylo_analytics.errors import SelectionError
from hylo_analytics.scoring import (
    DeclarativeScorer,
    EpisodeScorer,
    ScorerDeclaration,
    ScoringCall,
    VectorizedScorer,
    compute_scores,
    load_scorers,
)


@pytest.fixture()
def store(tmp_path: Path) -> ha.Store:
    write_run(tmp_path / "data")
    st = ha.open_store(tmp_path / "store")
    st.ingest(tmp_path / "data", progress=False)
    return st


def _rows(store: ha.Store, source: str) -> dict[str, dict[str, Any]]:
    df = store.sql(
        "select key, metric, value, valid, skip_reason, explanation from stg_scores "
        "where source = ? order by key",
        [source],
    )
    return {r["key"]: r for r in df.iter_rows(named=True)}


P95_T12 = 30.0 + 0.9 * 20.0  # numpy's linear p95 of [10, 30, 50]
NO_TRACE = {
    "t2#3": "no trace (trace_status=none)",
    "t2#4": "no trace (trace_status=missing)",
}
GATED = {"t1#3": "episode errored", "t2#1": "no end event", "t2#2": "no end event", **NO_TRACE}

# metric -> key -> value, or the skip reason when abstained (str)
EXPECTED: dict[str, dict[str, float | str]] = {
    "success": {"t1#1": 1.0, "t1#2": 0.0, "t3#1": 0.0, "t3#2": 0.0},
    "success_once": {
        "t1#1": 1.0,
        "t1#2": 1.0,
        "t3#1": "no info.success in any step",
        "t3#2": "no step events",
    },
    "success_at_end": {
        "t1#1": 1.0,
        "t1#2": 0.0,
        "t3#1": "last step has no info.success",
        "t3#2": "no step events",
    },
    "steps": {"t1#1": 2.0, "t1#2": 3.0, "t3#1": 2.0, "t3#2": 0.0},
    "safety_interventions": {"t1#1": 1.0, "t1#2": 0.0, "t3#1": 0.0, "t3#2": 0.0},
    "return": {"t1#1": 1.5, "t1#2": 0.75, "t3#1": "no step rewards", "t3#2": "no step rewards"},
    "latency_p95": {
        "t1#1": 10.0 + 0.95 * 10.0,
        "t1#2": P95_T12,
        "t3#1": "no step latencies",
        "t3#2": "no step latencies",
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("metric", sorted(EXPECTED))
def test_builtin_values_and_abstentions(store: ha.Store, metric: str) -> None:
    report = store.score([metric])
    assert report.ok
    rows = _rows(store, f"scorer:{metric}")
    assert len(rows) == 9  # one row per sample, abstentions included
    for key, want in {**GATED, **EXPECTED[metric]}.items():
        row = rows[key]
        if isinstance(want, str):
            assert row["value"] is None and row["valid"] is False
            assert row["skip_reason"] == want, key
        else:
            assert row["valid"] is True and row["skip_reason"] is None, key
            assert math.isclose(row["value"], want), (key, row["value"], want)


def test_success_once_differs_from_success_at_end(store: ha.Store) -> None:
    store.score(["success_once", "success_at_end"])
    once, end = _rows(store, "scorer:success_once"), _rows(store, "scorer:success_at_end")
    assert (once["t1#2"]["value"], end["t1#2"]["value"]) == (1.0, 0.0)


def test_errored_episode_explains_why(store: ha.Store) -> None:
    store.score(["success"])
    row = _rows(store, "scorer:success")["t1#3"]
    assert row["explanation"] == "simulator crashed"
    assert _rows(store, "scorer:success")["t1#2"]["explanation"] == "end.status=failure (max_steps)"


@pytest.mark.slow
def test_grades_become_observations(store: ha.Store) -> None:
    store.score(["grades"])
    df = store.sql(
        "select key, source, source_kind, metric, value, skip_reason from stg_scores "
        "where source like 'grade:%' order by key, source"
    )
    assert df.rows() == [
        ("t1#1", "grade:vlm_judge", "observation", "success", 1.0, None),
        ("t1#2", "grade:operator", "observation", "success", 1.0, None),
        # the judge graded twice: its last grade (an abstention) counts
        ("t1#2", "grade:vlm_judge", "observation", "success", None, "grader abstained"),
    ]


@pytest.mark.slow
def test_rescoring_replaces_rows(store: ha.Store) -> None:
    first = store.score()
    n = store.sql("select count(*) as n from stg_scores").item()
    second = store.score()
    assert store.sql("select count(*) as n from stg_scores").item() == n
    assert first.rows_written == second.rows_written == 7 * 9 + 3
    dup = store.sql(
        "select run_id, key, metric, source, count(*) as n from stg_scores "
        "group by all having count(*) > 1"
    )
    assert dup.height == 0
    # re-scoring one scorer leaves the others alone
    store.score(["steps"])
    assert store.sql("select count(*) as n from stg_scores").item() == n


@pytest.mark.slow
def test_runs_filter_and_unknown_run(store: ha.Store, tmp_path: Path) -> None:
    write_run(tmp_path / "data2", "run-other-0002")
    store.ingest(tmp_path / "data2", progress=False)
    report = store.score(["steps"], runs=["run-other-0002"])
    assert report.runs == ("run-other-0002",)
    assert store.sql(
        "select distinct run_id from stg_scores where source = 'scorer:steps'"
    ).rows() == [("run-other-0002",)]
    with pytest.raises(ha.RunSelectionError, match="no run matches 'nope'"):
        store.score(["steps"], runs=["nope"])
    # a unique prefix or a selector names the same run
    assert store.score(["steps"], runs=["run-other"]).runs == ("run-other-0002",)


def test_unknown_builtin_is_an_error(store: ha.Store) -> None:
    with pytest.raises(ValueError, match="unknown built-in scorer 'sucess'"):
        store.score(["success", "sucess"])
    # a name that names no scorer: a SelectionError (still the ValueError it was)
    with pytest.raises(SelectionError, match="unknown built-in scorer 'sucess'"):
        store.score(["sucess"])


# -- declarative -----------------------------------------------------------------------------

DECLS = {
    "score": {
        "coverage": {"value": "output.coverage", "semantic": "coverage.ratio", "goal": "maximize"},
        "ok": {"pass": "output.ok", "semantic": "result.success", "role": "constraint"},
        "queue_right": {
            "exact": {"actual": "output.queue", "expected": "case.expected.queue"},
            "optional": True,
        },
        "obj_right": {"exact": {"actual": "output.obj", "expected": "case.expected.obj"}},
        "imported_steps": {"value": "sample.scores.steps", "optional": True},
        "trace_steps": {"value": "trace.steps", "direction": "minimize", "unit": "steps"},
        "first_item": {"value": "output.queue.0", "optional": True},
        "shape": {
            "schema": {
                "path": "output",
                "schema": {
                    "type": "object",
                    "required": ["coverage", "queue"],
                    "properties": {"queue": {"type": "array"}},
                },
            },
            "optional": True,
        },
    }
}

# metric -> key -> value or skip reason (keys not listed: missing path)
DECL_EXPECTED: dict[str, dict[str, float | str]] = {
    "coverage": {
        "t1#1": 0.8,
        "t1#2": "null at path: output.coverage",
        "t1#3": 'not a number at output.coverage: "high"',
    },
    "ok": {"t1#1": 1.0, "t1#2": 0.0, "t1#3": "not boolean-like at output.ok: 7"},
    "queue_right": {"t1#1": 1.0, "t1#2": 0.0, "t1#3": 1.0},
    "obj_right": {"t1#1": 1.0, "t1#2": 0.0, "t1#3": "missing path: output.obj"},
    "imported_steps": {"t1#1": 2.0, "t1#2": 3.0},
    "trace_steps": {
        "t1#1": 2.0,
        "t1#2": 3.0,
        "t1#3": 1.0,
        "t2#1": 2.0,
        "t2#2": 0.0,
        "t3#1": 2.0,
        "t3#2": 0.0,
        **NO_TRACE,  # an untraced episode abstains, as the built-ins do: not an error
    },
    "first_item": {"t1#1": 1.0, "t1#2": 2.0, "t1#3": "missing path: output.queue.0"},
    "shape": {"t1#1": 1.0, "t1#2": 1.0, "t1#3": 0.0},
}


# Samples that omit "steps", which other samples of their log report: ingest records an
# abstention for them, so the path resolves to null rather than missing.
DECL_DEFAULT = {"imported_steps": "null at path: sample.scores.steps"}


def _missing(metric: str) -> str:
    decl = DECLS["score"][metric]
    kind = next(k for k in ("value", "pass", "exact", "schema") if k in decl)
    spec = decl[kind]
    path = spec["actual"] if kind == "exact" else spec["path"] if kind == "schema" else spec
    return f"missing path: {path}"


@pytest.mark.slow
def test_declarative_kinds(store: ha.Store) -> None:
    report = store.score(DECLS)
    keys = [k for (k,) in store.sql("select key from stg_samples order by key").rows()]
    for metric, want in DECL_EXPECTED.items():
        rows = _rows(store, f"scorer:{metric}")
        assert sorted(rows) == keys
        for key in keys:
            w = want.get(key, DECL_DEFAULT.get(metric, _missing(metric)))
            row = rows[key]
            if isinstance(w, str):
                assert (row["value"], row["skip_reason"]) == (None, w), (metric, key)
            else:
                assert row["skip_reason"] is None and math.isclose(row["value"], w), (metric, key)
    # required scorers with missing paths / wrong types fail the run; optional ones do not
    assert not report.ok
    assert report.failed_runs[RUN] == (
        "scorer:coverage",
        "scorer:obj_right",
        "scorer:ok",
    )
    assert summary_of(report, "scorer:trace_steps") == (2, 0)  # abstained, errors
    summary = {s.source: s for s in report.scorers}
    assert summary["scorer:coverage"].abstained == 1  # the JSON null
    assert summary["scorer:coverage"].errors == 7
    assert summary["scorer:queue_right"].optional


def summary_of(report: Any, source: str) -> tuple[int, int]:
    (s,) = [s for s in report.scorers if s.source == source]
    return s.abstained, s.errors


def test_declarative_schema_explains_failure(store: ha.Store) -> None:
    store.score({"shape": DECLS["score"]["shape"]})
    row = _rows(store, "scorer:shape")["t1#3"]
    assert row["value"] == 0.0
    assert row["explanation"] == "$.queue: 3 is not of type 'array'"


def test_declaration_metadata_is_stored(store: ha.Store) -> None:
    store.score({"trace_steps": DECLS["score"]["trace_steps"]})
    meta = store.sql(
        "select distinct metadata from stg_scores where source = 'scorer:trace_steps'"
    ).item()
    assert '"direction": "minimize"' in meta and '"unit": "steps"' in meta


def test_load_scorers_from_yaml(tmp_path: Path) -> None:
    path = tmp_path / "scorers.yaml"
    path.write_text(
        "score:\n  coverage:\n    value: output.coverage\n    semantic: coverage.ratio\n"
        "    goal: minimize\n    role: diagnostic\n    optional: true\n"
    )
    (s,) = load_scorers(path)
    assert s == DeclarativeScorer(
        "coverage",
        "value",
        "output.coverage",
        declaration=ScorerDeclaration("coverage.ratio", None, "minimize", "diagnostic", True),
    )


@pytest.mark.parametrize(
    ("decl", "match"),
    [
        ({"x": {"value": "a", "pass": "b"}}, r"^score\.x: expected exactly one of"),
        ({"x": {"value": "a..b"}}, r"^score\.x\.value: path 'a\.\.b': bad segment ''"),
        ({"x": {"exact": {"actual": "a"}}}, r"^score\.x\.exact\.expected: expected a non-empty"),
        ({"x": {"value": "a", "goal": "up"}}, r"^score\.x\.goal: expected one of"),
        ({"x": {"schema": {"schema": {"type": 3}}}}, r"^score\.x\.schema\.schema: invalid JSON"),
        ({"x": {"value": "a", "uint": "s"}}, r"^score\.x\.uint: unknown key"),
        ({"x": {"value": "a", "optional": "no"}}, r"^score\.x\.optional: expected true or false"),
        ({"score": ["x"]}, r"^score: expected a mapping"),
    ],
)
def test_bad_declarations(decl: Any, match: str) -> None:
    # ConfigError is a ValueError: callers that caught ValueError still do
    with pytest.raises(ha.ConfigError, match=match):
        load_scorers(decl)


def test_bad_declaration_in_a_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "scorers.yaml"
    path.write_text("score:\n  x: {value: 3}\n")
    with pytest.raises(
        ha.ConfigError, match=r"scorers\.yaml: score\.x\.value: expected a non-empty"
    ):
        load_scorers(path)


# -- Python scorers --------------------------------------------------------------------------


def test_vectorized_python_scorer(store: ha.Store) -> None:
    per_step = VectorizedScorer(
        "reward_per_step",
        lambda ep: pl.when(pl.col("n_steps") > 0).then(pl.col("total_reward") / pl.col("n_steps")),
    )
    broken = VectorizedScorer("broken", lambda ep: pl.Series(["a"] * ep.height))
    short = VectorizedScorer(
        "short", lambda ep: pl.Series([1.0]), declaration=ScorerDeclaration(optional=True)
    )
    report = store.score([per_step, broken, short])
    rows = _rows(store, "scorer:reward_per_step")
    assert rows["t1#1"]["value"] == 0.75
    assert (rows["t3#2"]["value"], rows["t3#2"]["skip_reason"]) == (None, "abstained")
    assert rows["t2#3"]["skip_reason"] == "no trace (trace_status=none)"
    assert {r["skip_reason"] for r in _rows(store, "scorer:broken").values()} == {
        "error: returned dtype String, expected floats or nulls"
    }
    assert {r["skip_reason"] for r in _rows(store, "scorer:short").values()} == {
        "error: returned 1 values for 9 episodes"
    }
    assert report.failed_runs[RUN] == ("scorer:broken",)  # short is optional


def test_episode_python_scorer(store: ha.Store) -> None:
    seen: list[ScoringCall] = []

    def fn(call: ScoringCall) -> Any:
        seen.append(call)
        key = call.sample["key"]
        if key == "t1#1":
            return ha.Score(float(len(call.events)), explanation="n events")
        if key == "t1#2":
            return "oops"
        if key == "t1#3":
            raise RuntimeError("boom")
        if key == "t3#2":
            return None
        return call.output["coverage"] if call.output else 2

    report = store.score([EpisodeScorer("custom", fn)])
    rows = _rows(store, "scorer:custom")
    assert (rows["t1#1"]["value"], rows["t1#1"]["explanation"]) == (6.0, "n events")
    assert rows["t1#2"]["skip_reason"] == "error: returned str, expected float or None"
    assert rows["t1#3"]["skip_reason"] == "error: RuntimeError: boom"
    assert rows["t3#2"]["skip_reason"] == "abstained"
    assert rows["t3#1"]["value"] == 2.0
    assert rows["t2#4"]["skip_reason"] == "no trace (trace_status=missing)"
    assert len(seen) == 7  # not called for the two samples without a trace
    call = next(c for c in seen if c.sample["key"] == "t1#1")
    assert call.case == {"expected": {"queue": [1, 2], "obj": {"b": 2, "a": 1}, "n": 0.8}}
    assert [e["type"] for e in call.events][:2] == ["start", "step"]
    assert call.trace["n_steps"] == 2
    with pytest.raises(TypeError):
        call.sample["key"] = "x"  # type: ignore[index]
    assert report.failed_runs[RUN] == ("scorer:custom",)


def test_compute_scores_writes_nothing(store: ha.Store) -> None:
    rows, runs, _, _ = compute_scores(store, ["success"])
    assert rows.num_rows == 9 and runs == [RUN]
    assert store.sql("select count(*) from stg_scores where source like 'scorer:%'").item() == 0


def test_report_renders(store: ha.Store) -> None:
    report = store.score(["steps", {"coverage": {"value": "output.coverage"}}])
    text = str(report)
    assert "scorer:steps" in text and f"run {RUN} failed" in text
    assert "<table>" in report._repr_html_()


def test_sample_store_scores_match_evallog(sample_copy: Path, tmp_path: Path) -> None:
    """On the bundled sample, re-scored success/steps agree with what the EvalLogs wrote."""
    st = ha.open_store(tmp_path / "s")
    st.ingest(sample_copy, progress=False)
    st.score(["success", "steps", "safety_interventions"])
    diff = st.sql(
        """select s.metric, count(*) as n from stg_scores as s
           join stg_scores as e using (run_id, key, epoch, metric)
           where s.source like 'scorer:%' and e.source = 'evallog'
             and s.value is distinct from e.value
           group by s.metric"""
    )
    assert diff.height == 0


def test_mart_task_success_counts_each_sample_once(sample_store_scored: ha.Store) -> None:
    """After scoring, success comes from several sources; the mart still counts samples once."""
    df = sample_store_scored.sql("select n_total, n_valid, n_skipped from mart_task_success")
    assert df.height == 30
    assert set(df["n_total"].to_list()) == {20}
    assert (df["n_valid"] + df["n_skipped"] == 20).all()


@pytest.fixture()
def sample_store_scored(sample_copy: Path, tmp_path: Path) -> ha.Store:
    st = ha.open_store(tmp_path / "scored")
    st.ingest(sample_copy, progress=False)
    st.score()
    return st


def test_paths_reach_unmodelled_sample_fields(store: ha.Store) -> None:
    store.score({"cov": {"value": "sample.output.coverage"}, "key": {"pass": "sample.key"}})
    assert _rows(store, "scorer:cov")["t1#1"]["value"] == 0.8
    # a modelled column resolves too, and is not boolean-like
    assert (
        _rows(store, "scorer:key")["t1#1"]["skip_reason"]
        == 'not boolean-like at sample.key: "t1#1"'
    )


@pytest.mark.parametrize(
    ("path", "want"),
    [
        ("output.coverage", """'$."output"."coverage"'"""),
        ("output.items.0.name", """'$."output"."items"[0]."name"'"""),
        ("case.it's", """'$."case"."it''s"'"""),
    ],
)
def test_path_sql(path: str, want: str) -> None:
    from hylo_analytics.scoring._declarative import path_sql

    assert path_sql(path) == want


@pytest.mark.parametrize("seed", [1, 2])
def test_builtins_agree_with_the_plain_python_reference(tmp_path: Path, seed: int) -> None:
    """The benchmark's plain-Python reference and the SQL agree on synthetic data."""
    import importlib.util

    from hylo_analytics.testing import SynthConfig, write_dataset

    bench = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_scoring.py"
    spec = importlib.util.spec_from_file_location("bench_scoring", bench)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    cfg = SynthConfig(runs=2, tasks=3, seeds=6, mean_steps=6, error_rate=0.2, seed=seed)
    write_dataset(tmp_path / "d", cfg)
    st = ha.open_store(tmp_path / "s")
    st.ingest(tmp_path / "d", progress=False)
    rows, *_ = compute_scores(st, mod.BUILTINS)
    got = dict(
        zip(
            zip(*(rows.column(c).to_pylist() for c in ("run_id", "key", "metric")), strict=True),
            rows.column("value").to_pylist(),
            strict=True,
        )
    )
    samples = st.parquet.con.execute(
        "select run_id, key, episode_id, status, trace_status from stg_samples"
    ).fetchall()
    events = st.parquet.con.execute(
        "select run_id, episode_id, idx, type, reward, success, latency_ms, status from stg_events"
    ).fetchall()
    ref = mod.python_scores(samples, events)
    assert got.keys() == ref.keys()
    for k, v in ref.items():
        assert (v is None) == (got[k] is None), k
        if v is not None:
            assert math.isclose(v, got[k], abs_tol=1e-9), k
    assert any(v is None for v in ref.values()) and any(v == 1.0 for v in ref.values())


@pytest.mark.parametrize(
    ("path", "expected", "reads"),
    [
        ("trace.steps", None, True),
        ("sample.status", "trace.end_status", True),
        ("sample.trace_status", None, False),  # a sample field, not the trace
        ("output.trace", None, False),
    ],
)
def test_reads_trace(path: str, expected: str | None, reads: bool) -> None:
    kind = "exact" if expected else "value"
    assert DeclarativeScorer("x", kind, path, expected).reads_trace is reads


@pytest.mark.parametrize("per_query", [1, 450, 10**9])  # 3 runs of 200: 3, 2, 1 queries
def test_episode_stats_in_chunks_equal_one_query(
    sample_store_scored: ha.Store, per_query: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every run's episode reductions, a few runs per query (down to one run each, a run
    never split), are the rows of the view read in one query: none lost, none twice."""
    import hylo_analytics.scoring as scoring

    con = sample_store_scored.parquet.con
    runs = [r[0] for r in con.execute("select run_id from stg_runs order by run_id").fetchall()]
    monkeypatch.setattr(scoring, "_EPISODES_PER_QUERY", per_query)
    con.execute("drop table if exists _chunked")
    scoring._episode_stats_in_chunks(con, "_chunked", runs)
    got = con.sql("select * from _chunked order by run_id, key, epoch").pl()
    want = con.sql("select * from int_episode_stats order by run_id, key, epoch").pl()
    con.execute("drop table _chunked")
    assert got.height == want.height == 600
    assert_frame_equal(got, want, check_exact=False, rel_tol=1e-12)  # sums: thread order
