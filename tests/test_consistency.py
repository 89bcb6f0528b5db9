"""One question, one answer: one small literal store read by every reader.

The store holds what makes readers disagree: imported (log) scores, re-scored values, a
re-scored abstention over a logged value, abstentions with several skip reasons, a grader's
values and abstentions, two epochs of one key, a harness error. Every figure that appears in
more than one place (n_total, n_valid, n_errors, successes, the rate, the rate with errors as
failures, means, intervals, wins, losses, ties, p-values, the value of one episode) must be the
same wherever it appears: ``aggregate_scores``, ``Store.compare``, ``paired_compare``,
policies, the token-cost and paired-baseline derivers, the export, the report, the charts'
frames, and the ``mart_*`` / ``int_*`` views from SQL.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from scipy import stats as scipy_stats

import hylo_analytics as ha
from hylo_analytics import charts
from hylo_analytics.derive import parse_policies
from hylo_analytics.derive.post_derive import parse_post_derive, run_paired_baseline
from hylo_analytics.derive.token_cost import usage_from_store
from hylo_analytics.report import report_frames
from hylo_analytics.stats import wilson

P, C = "run-parent", "run-cand"
NT = "no trace (trace_status=none)"
HE = "harness error: timeout"
# key, epoch, status, imported success, re-scored success, grade, steps (None = abstain)
EPISODES: dict[str, list[tuple[Any, ...]]] = {
    P: [
        ("t1#1", 1, "success", 1.0, 1.0, None, 20.0),
        ("t1#2", 1, "failure", 0.0, 0.0, None, 50.0),
        ("t1#3", 1, "success", 1.0, NT, None, 31.0),  # a re-scored abstention, a logged value
        ("t1#4", 1, "failure", 0.0, 0.0, 1.0, 50.0),  # re-scored beats a grade
        ("t2#1", 1, "error", HE, "episode errored", None, None),  # a harness error
        ("t2#2", 1, "success", "abstained", NT, "grader abstained", 12.0),  # all abstain
        ("t2#3", 1, "failure", 0.0, NT, 1.0, 50.0),  # a grade beats the log
        ("t2#4", 1, "success", 1.0, 1.0, None, 18.0),  # two epochs
        ("t2#4", 2, "success", 1.0, 1.0, None, 22.0),
    ],
    C: [
        ("t1#1", 1, "success", 1.0, 1.0, None, 15.0),
        ("t1#2", 1, "success", 1.0, 1.0, None, 17.0),
        ("t1#3", 1, "success", 1.0, NT, None, 19.0),
        ("t1#4", 1, "success", 1.0, 1.0, 0.0, 21.0),
        ("t2#1", 1, "success", 1.0, 1.0, None, 10.0),
        ("t2#2", 1, "failure", 0.0, 0.0, None, 50.0),
        ("t2#3", 1, "error", HE, "episode errored", None, None),
        ("t2#4", 1, "failure", 0.0, 0.0, None, 50.0),
        ("t2#4", 2, "error", HE, "episode errored", None, None),  # an abstained epoch
    ],
}
# the resolved success of every episode, by the documented rule (docs/architecture.md)
RESOLVED = {
    P: [1.0, 0.0, 1.0, 0.0, None, None, 1.0, 1.0, 1.0],
    C: [1.0, 1.0, 1.0, 1.0, 1.0, 0.0, None, 0.0, None],
}
REASONS = {(P, "t2#1"): HE, (P, "t2#2"): "abstained", (C, "t2#3"): HE}


def _score(run: str, row: tuple[Any, ...], metric: str, value: Any, source: str, kind: str):
    key, epoch, *_ = row
    number = value if isinstance(value, float) else None
    return {
        "run_id": run,
        "key": key,
        "task_id": key.split("#")[0],
        "seed": int(key.split("#")[1]),
        "epoch": epoch,
        "episode_id": f"{run}-{key}-{epoch}",
        "metric": metric,
        "value": number,
        "valid": number is not None,
        "skip_reason": None if number is not None else value,
        "source": source,
        "source_kind": kind,
        "scorer_version": {"score": "builtin/1", "observation": "vlm/1"}.get(kind, ""),
    }


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    root = tmp_path_factory.mktemp("consistency")
    runs, samples, scores = [], [], []
    for version, run in enumerate((P, C)):
        runs.append(
            {
                "run_id": run,
                "source_format": "hylo.evallog/v0.1",
                "source_path": str(root / run / "evallog.json"),
                "benchmark_id": "bench",
                "benchmark_digest": "sha256:d",
                "split": "test",
                "agent_name": "agent",
                "agent_version": f"1.{version}",
                "parent_run_id": P if run == C else None,  # the pair mart_compare holds
                "status": "success",
            }
        )
        for row in EPISODES[run]:
            key, epoch, status, imported, rescored, grade, steps = row
            samples.append(
                {
                    "run_id": run,
                    "key": key,
                    "task_id": key.split("#")[0],
                    "seed": int(key.split("#")[1]),
                    "epoch": epoch,
                    "episode_id": f"{run}-{key}-{epoch}",
                    "status": status,
                    "trace_status": "none",
                }
            )
            scores.append(_score(run, row, "success", imported, "evallog", "imported"))
            scores.append(_score(run, row, "success", rescored, "scorer:success", "score"))
            if grade is not None:
                scores.append(_score(run, row, "success", grade, "grade:vlm_judge", "observation"))
            steps_value = steps if steps is not None else ("episode errored")
            scores.append(_score(run, row, "steps", steps_value, "evallog", "imported"))
        # token usage: the log's count, and a derived count that the resolution prefers
        first = EPISODES[run][0]
        scores.append(_score(run, first, "llm.tokens.input", 100.0, "evallog", "imported"))
        scores.append(_score(run, first, "llm.tokens.input", 120.0, "derive:fix", "derived"))
        scores.append(_score(run, first, "llm.tokens.output", 10.0, "evallog", "imported"))
    s = ha.open_store(root / "store")
    with s.parquet.lock():
        s.parquet.commit(
            {
                "runs": pa.Table.from_pylist(runs),
                "samples": pa.Table.from_pylist(samples),
                "scores": pa.Table.from_pylist(scores),
            }
        )
    return s


def _key_values(run: str) -> dict[str, float | None]:
    """The resolved success per key: the mean of its valid epochs (None: none valid)."""
    per: dict[str, list[float]] = {}
    for row, v in zip(EPISODES[run], RESOLVED[run], strict=True):
        per.setdefault(row[0], [])
        if v is not None:
            per[row[0]].append(v)
    return {k: (sum(v) / len(v) if v else None) for k, v in per.items()}


@pytest.mark.slow
def test_the_resolution_is_the_documented_rule(store: ha.Store) -> None:
    got = store.sql(
        "select run_id, key, epoch, value, skip_reason, errored from int_scores_preferred "
        "where metric = 'success' order by run_id, key, epoch"
    )
    for run in (P, C):
        rows = got.filter(pl.col("run_id") == run)
        want = sorted(zip([(r[0], r[1]) for r in EPISODES[run]], RESOLVED[run], strict=True))
        assert rows["value"].to_list() == [v for _, v in want]
        for r in rows.filter(pl.col("value").is_null()).iter_rows(named=True):
            assert r["skip_reason"] == REASONS.get((run, r["key"]), HE)
            assert r["errored"] == (r["skip_reason"] == HE)


def _aggregate_rows(store: ha.Store, by: list[str]) -> pl.DataFrame:
    return store.aggregate(by=by, metrics=["success", "steps"], ci="auto", n_resamples=500)


@pytest.mark.slow
def test_run_figures_agree_everywhere(store: ha.Store) -> None:
    py = _aggregate_rows(store, ["run_id"])
    sql = store.sql("select * from mart_aggregate_run where metric in ('success', 'steps')")
    rates = store.sql("select * from mart_success_rates")
    report = report_frames(store, C, P, n_resamples=500)["runs"]
    failures = store.aggregate(by=["run_id"], metrics=["success"], errors="failure")
    failures_report = report_frames(store, C, P, n_resamples=500, errors="failure")["runs"]
    for run in (P, C):
        keys = _key_values(run)
        valid = [v for v in keys.values() if v is not None]
        # keys with no valid epoch whose episode errored (C's t2#4 has a valid epoch 1)
        n_errors = sum(1 for (r, _), why in REASONS.items() if r == run and why == HE)
        a = py.filter(pl.col("run_id") == run, pl.col("metric") == "success").row(0, named=True)
        m = sql.filter(pl.col("run_id") == run, pl.col("metric") == "success").row(0, named=True)
        r = rates.filter(pl.col("run_id") == run).row(0, named=True)
        h = report.filter(pl.col("run") == run).row(0, named=True)
        # hand-computed from the literal rows
        assert a["n_total"] == m["n_total"] == r["n_total"] == h["n_total"] == len(keys)
        assert a["n_valid"] == m["n_valid"] == r["n_valid"] == h["n_scored"] == len(valid)
        assert a["n_errors"] == m["n_errors"] == r["n_errors"] == n_errors
        # a hylo EvalLog's convention: errors are left out (one policy, named everywhere)
        assert a["errors"] == m["errors"] == r["errors"] == h["errors"] == "exclude"
        mean = sum(valid) / len(valid)
        for got in (a["mean"], m["mean"], r["success_rate"], r["success_rate_errors_excluded"],
                    h["success"]):  # fmt: skip
            assert got == pytest.approx(mean, rel=1e-12)
        # errors as failures: one rate, with its interval on its own denominator, everywhere
        rate = sum(valid) / (len(valid) + n_errors)
        fa = failures.filter(pl.col("run_id") == run, pl.col("metric") == "success")
        fh = failures_report.filter(pl.col("run") == run).row(0, named=True)
        assert fa["errors"].item() == fh["errors"] == "failure"
        assert fa["n_valid"].item() == fh["n_scored"] == len(valid) + n_errors
        for got in (fa["mean"].item(), r["success_rate_errors_as_failures"], fh["success"]):
            assert got == pytest.approx(rate, rel=1e-12)
        flo, fhi = wilson([sum(valid)], [len(valid) + n_errors])
        for low, high in ((fa["ci_low"].item(), fa["ci_high"].item()),
                          (r["errors_as_failures_ci_low"], r["errors_as_failures_ci_high"]),
                          (fh["ci_low"], fh["ci_high"])):  # fmt: skip
            assert (low, high) == pytest.approx((flo[0], fhi[0]), rel=1e-12)
        assert r["successes"] == h["successes"] == sum(valid)
        lo, hi = wilson([sum(valid)], [len(valid)])
        for low, high in ((a["ci_low"], a["ci_high"]), (m["wilson_low"], m["wilson_high"]),
                          (h["ci_low"], h["ci_high"])):  # fmt: skip
            assert (low, high) == pytest.approx((lo[0], hi[0]), rel=1e-12)
        assert a["stderr"] == pytest.approx(m["stderr"], rel=1e-12)
        steps = py.filter(pl.col("run_id") == run, pl.col("metric") == "steps")
        steps_sql = sql.filter(pl.col("run_id") == run, pl.col("metric") == "steps")
        assert steps["mean"].item() == pytest.approx(steps_sql["mean"].item(), rel=1e-12)
        assert h["mean_steps"] == pytest.approx(steps["mean"].item(), rel=1e-12)
        assert steps["n_total"].item() == steps_sql["n_total"].item() == len(keys)


@pytest.mark.slow
def test_task_figures_agree_everywhere(store: ha.Store) -> None:
    py = _aggregate_rows(store, ["run_id", "task_id"])
    sql = store.sql("select * from mart_aggregate_task")
    tasks = store.sql("select * from mart_task_success")
    report = report_frames(store, C, P, n_resamples=500)["task_success"]
    chart = charts.success_rate_by_task(tasks, run_label="run_id").to_dict()
    plotted = pl.DataFrame(chart["data"]["values"])
    for row in py.filter(pl.col("metric") == "success").iter_rows(named=True):
        where = (pl.col("run_id") == row["run_id"]) & (pl.col("task_id") == row["task_id"])
        m = sql.filter(where, pl.col("metric") == "success").row(0, named=True)
        t = tasks.filter(where).row(0, named=True)
        rep = report.filter(
            (pl.col("run") == row["run_id"]) & (pl.col("task_id") == row["task_id"])
        ).row(0, named=True)
        for other in (m, t, rep):
            assert other["n_valid"] == row["n_valid"]
        assert row["n_total"] == m["n_total"] == t["n_total"]
        for got in (m["mean"], t["success_rate"], rep["success_rate"]):
            assert got == pytest.approx(row["mean"], rel=1e-12)
        for low, high in ((m["wilson_low"], m["wilson_high"]), (t["ci_low"], t["ci_high"]),
                          (rep["ci_low"], rep["ci_high"])):  # fmt: skip
            assert (low, high) == pytest.approx((row["ci_low"], row["ci_high"]), rel=1e-12)
        drawn = plotted.filter(
            (pl.col("run_id") == row["run_id"]) & (pl.col("task_id") == row["task_id"])
        )
        assert drawn["success_rate"].item() == pytest.approx(row["mean"], rel=1e-12)


@pytest.mark.slow
def test_paired_figures_agree_everywhere(store: ha.Store) -> None:
    options = {"n_resamples": 500, "seed": 7}
    py = store.compare(C, P, metrics=["success", "steps"], by=["task_id"], **options)
    sql = store.sql(
        "select * from mart_compare where candidate = $c and parent = $p "
        "and metric in ('success', 'steps')",
        {"c": C, "p": P},
    )
    frames = report_frames(store, C, P, n_resamples=500, seed=7)
    counts = ["n_pairs", "candidate_wins", "parent_wins", "ties", "n_dropped"]
    keys = ["metric", "level", "task_id"]
    a = py.select(*keys, *counts, "mean_diff").sort(keys, nulls_last=True)
    b = sql.select(*keys, *counts, "mean_diff").sort(keys, nulls_last=True)
    assert a.select(*keys, *counts).equals(b.select(*keys, *counts))
    assert (a["mean_diff"] - b["mean_diff"]).abs().max() < 1e-12  # type: ignore[operator]
    # the literal rows, by hand: key-level values, pairs where both sides have one
    cand, par = _key_values(C), _key_values(P)
    both = [k for k in cand if cand[k] is not None and par[k] is not None]
    wins = sum(cand[k] > par[k] for k in both)  # type: ignore[operator]
    losses = sum(cand[k] < par[k] for k in both)  # type: ignore[operator]
    overall = py.filter(pl.col("metric") == "success", pl.col("level") == "overall")
    row = overall.row(0, named=True)
    assert (row["n_pairs"], row["candidate_wins"], row["parent_wins"]) == (len(both), wins, losses)
    assert row["n_dropped"] == len(cand) - len(both)
    pc = ha.paired_compare(cand, par, metric="success", **options)  # type: ignore[arg-type]
    for field in ("n_pairs", "candidate_wins", "parent_wins", "ties", "n_dropped"):
        assert row[field] == getattr(pc, field)
    for field in ("wilcoxon_p", "mean_diff", "ci_low", "ci_high"):
        assert row[field] == pytest.approx(getattr(pc, field), rel=1e-12), field
    # the verdict's test (Tango's score test) and the spec's exact McNemar, each in one place
    assert row["p_value"] == pytest.approx(pc.p_test, rel=1e-12)
    assert row["p_mcnemar"] == pytest.approx(pc.p_value, rel=1e-12)
    head = frames["headline"].row(0, named=True)
    assert (head["n_pairs"], head["candidate_wins"], head["parent_wins"]) == (
        row["n_pairs"], row["candidate_wins"], row["parent_wins"],
    )  # fmt: skip
    assert head["p_value"] == pytest.approx(row["p_value"], rel=1e-12)
    assert head["diff"] == pytest.approx(row["mean_diff"], rel=1e-12)
    assert (head["ci_low"], head["ci_high"]) == pytest.approx((row["ci_low"], row["ci_high"]))


def _task_means(run: str) -> dict[str, float]:
    """The resolved success per task: the mean of its keys' values (keys with none left out)."""
    per: dict[str, list[float]] = {}
    for key, value in _key_values(run).items():
        if value is not None:
            per.setdefault(key.split("#")[0], []).append(value)
    return {t: sum(v) / len(v) for t, v in per.items()}


def test_the_issue_42_readers_agree(store: ha.Store) -> None:
    """pass@k, Pareto, shrinkage, critical differences, the epochs plan and the judge
    calibration read the same resolved values as aggregate and compare."""
    runs = [P, C]
    agg = store.aggregate(by=["run_id"], metrics=["success"])
    tasks = store.aggregate(by=["run_id", "task_id"], metrics=["success"])
    curves = store.pass_at_k(runs, k=1).filter(pl.col("k") == 1)
    front = store.pareto(runs, cost="steps", policy="run_id", n_resamples=200).frame
    shrunk = store.shrink(runs)
    cd = store.critical_difference(runs, policy="run_id").ranks
    steps = store.aggregate(by=["run_id"], metrics=["steps"])
    for run in runs:
        keys = _key_values(run)
        valid = [v for v in keys.values() if v is not None]
        mean = sum(valid) / len(valid)
        a = agg.filter(pl.col("run_id") == run).row(0, named=True)
        c = curves.filter(pl.col("run_id") == run).row(0, named=True)
        f = front.filter(pl.col("policy") == run).row(0, named=True)
        assert a["mean"] == c["pass_at_k"] == c["pass_hat_k"] == f["quality"]
        assert a["mean"] == pytest.approx(mean, rel=1e-12)
        assert a["n_valid"] == c["n_items"] == f["n_keys"] == len(valid)
        st = steps.filter(pl.col("run_id") == run)
        assert f["cost"] == pytest.approx(st["mean"].item(), rel=1e-12)
        by_task = _task_means(run)
        for t, want in by_task.items():
            row = tasks.filter(pl.col("run_id") == run, pl.col("task_id") == t).row(0, named=True)
            s = shrunk.filter(pl.col("run_id") == run, pl.col("task_id") == t).row(0, named=True)
            assert s["raw_rate"] == pytest.approx(row["mean"], rel=1e-12)
            assert s["raw_rate"] == pytest.approx(want, rel=1e-12)
            assert s["n"] == row["n_valid"]
            assert (s["raw_lo"], s["raw_hi"]) == pytest.approx((row["ci_low"], row["ci_high"]))
        r = cd.filter(pl.col("policy") == run).row(0, named=True)
        assert r["mean"] == pytest.approx(sum(by_task.values()) / len(by_task), rel=1e-12)
    # the epochs plan's estimate is the paired mean difference the comparison reports
    plan = store.epochs_plan(C, P).row(0, named=True)
    overall = store.compare(C, P, metrics=["success"]).filter(pl.col("level") == "overall")
    assert plan["estimate"] == pytest.approx(overall["mean_diff"].item(), rel=1e-12)
    assert plan["n_items"] == overall["n_pairs"].item()
    # the calibration's classical column is the trusted source's own aggregate
    cal = store.calibrate(
        runs, trusted_source="evallog", judge_source="grade:vlm_judge", policy="run_id"
    ).rates
    logged = store.aggregate(by=["run_id"], metrics=["success"], source="evallog")
    for run in runs:
        row = logged.filter(pl.col("run_id") == run).row(0, named=True)
        got = cal.filter(pl.col("policy") == run).row(0, named=True)
        assert got["classical"] == pytest.approx(row["mean"], rel=1e-12)
        assert got["n_labelled"] == row["n_valid"]


def test_policies_read_the_resolved_value(store: ha.Store) -> None:
    ev = ha.evaluate_policies(
        store.parquet, parse_policies([{"name": "solved", "metric": "success", "must_equal": 1}])
    )
    got = {(r["run_id"], r["key"]): r["passed"] for r in ev.results.iter_rows(named=True)}
    for run in (P, C):
        for key, value in _key_values(run).items():
            want = None if value is None else value == 1.0
            assert got[(run, key)] == want, (run, key)
    # the logged success the re-scorer could not recompute is checked, not "not checked"
    assert got[(P, "t1#3")] is True


def test_export_writes_the_resolved_value(store: ha.Store, tmp_path: Path) -> None:
    path = ha.export_evallog(store, P, tmp_path / "p.json", traces=False)
    samples = json.loads(path.read_text())["samples"]
    # a score is its value, or {value, skip_reason} for an abstention whose reason the reader
    # would not give it (a harness error)
    written = {(s["key"], s.get("epoch", 1)): s["scores"]["success"] for s in samples}
    exported = {k: v["value"] if isinstance(v, dict) else v for k, v in written.items()}
    for row, value in zip(EPISODES[P], RESOLVED[P], strict=True):
        assert exported[(row[0], row[1])] == value, row
    assert exported[("t1#3", 1)] == 1.0
    assert written[("t2#1", 1)] == {"value": None, "skip_reason": REASONS[(P, "t2#1")]}
    assert written[("t2#2", 1)] is None  # 'abstained': the reader's own reason
    v02 = json.loads(ha.export_evallog(store, P, tmp_path / "v2.json", version="v0.2",
                                       traces=False).read_text())  # fmt: skip
    mean = store.sql(
        "select mean from mart_aggregate_run where run_id = $r and metric = 'success'", {"r": P}
    ).item()
    assert v02["results"]["metrics"]["success"] == pytest.approx(mean, rel=1e-12)


def test_derivers_read_the_resolved_value(store: ha.Store) -> None:
    usage = usage_from_store(store.parquet)
    preferred = store.sql(
        "select run_id, value from int_scores_preferred where metric = 'llm.tokens.input'"
    )
    for run, value in preferred.iter_rows():
        got = usage.filter(pl.col("run_id") == run, pl.col("llm.tokens.input").is_not_null())
        assert got["llm.tokens.input"].to_list() == [value] == [120.0]
    step = parse_post_derive(
        {
            "kind": "paired_baseline",
            "baseline_variant": P,
            "metric": "success",
            "formula": "candidate_minus_baseline",
            "include_baseline": False,
            "output": {"name": "success_gain"},
        },
        "post_derive[0]",
    )
    derived = run_paired_baseline(store.parquet, step).values
    for row in derived.iter_rows(named=True):
        i = [(r[0], r[1]) for r in EPISODES[C]].index((row["key"], row["epoch"]))
        j = [(r[0], r[1]) for r in EPISODES[P]].index((row["key"], row["epoch"]))
        assert row["candidate_value"] == RESOLVED[C][i]
        assert row["baseline_value"] == RESOLVED[P][j]
        assert not math.isnan(row["value"])


@pytest.mark.slow
def test_the_sample_store_numbers_of_the_issue(tmp_path: Path, sample_copy: Path) -> None:
    """Issue 11 measured these on data/sample after score(); each now has one answer."""
    s = ha.open_store(tmp_path / "store")
    s.ingest(sample_copy, progress=False)
    s.score()
    rates = s.sql("select * from mart_success_rates order by run_id")
    agg = s.aggregate(metrics=["success"], ci="none").sort("run_id")
    mart = s.sql("select * from mart_aggregate_run where metric = 'success' order by run_id")
    # n_total was 418 / 424 / 424 for runs of 200 episodes (every source counted)
    assert rates["n_total"].to_list() == agg["n_total"].to_list() == [200, 200, 200]
    # the success rate was 0.5111 in mart_success_rates and 0.5077 elsewhere
    assert rates["success_rate_errors_excluded"][0] == pytest.approx(0.5077, abs=1e-4)
    for col in (agg["mean"], mart["mean"]):
        assert (col - rates["success_rate_errors_excluded"]).abs().max() < 1e-12
    # errors as failures was 0.786 (harness errors only) vs 0.770 (every abstention)
    failures = s.aggregate(metrics=["success"], ci="none", errors="failure").sort("run_id")
    for col in (rates["success_rate_errors_as_failures"], failures["mean"]):
        assert col[2] == pytest.approx(0.77, abs=1e-12)
    # the report's mean steps is the steps metric's mean
    frames = report_frames(s, "run-octo-ft-1.2.0-rc1-0002", "run-octo-ft-1.0.0-0000",
                           n_resamples=200)  # fmt: skip
    steps = s.aggregate(metrics=["steps"], ci="none").sort("run_id")
    assert frames["runs"].sort("run")["mean_steps"].to_list() == pytest.approx(
        steps["mean"].to_list(), rel=1e-12
    )


# --- an inspect-robots pair: its success is success_at_end, and every reader says so ---


def _robots_log(good: dict[str, Any], policy: str, outcomes: list[float]) -> dict[str, Any]:
    """The real successful trial's log, as ``policy`` with one scene per outcome."""
    log = json.loads(json.dumps(good))
    log["eval"]["policy"] = policy
    sample = log["samples"][0]
    log["samples"] = []
    for i, v in enumerate(outcomes):
        s = json.loads(json.dumps(sample))
        s.update(scene_id=f"scene-{i}", status="success" if v else "failure")
        s["epochs"] = [{"success_at_end": v}]
        s["reduced"] = {"success_at_end": v}
        log["samples"].append(s)
    log["results"]["metrics"] = {"success_at_end": sum(outcomes) / len(outcomes)}
    log["results"]["total_scenes"] = log["results"]["total_trials"] = len(outcomes)
    return log


@pytest.fixture(scope="module")
def robots(tmp_path_factory: pytest.TempPathFactory, real_dir: Path) -> tuple[ha.Store, str, str]:
    """Two inspect-robots runs made from the real successful log, and the real faulted one."""
    src = real_dir / "inspect-robots"
    root = tmp_path_factory.mktemp("robots")
    good = json.loads((src / "adhoc_2cc4c3a8.success.json").read_text())
    parent = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    cand = [1.0, 1.0, 1.0, 1.0, 0.0, 1.0]
    (root / "logs").mkdir()
    (root / "logs" / "parent.json").write_text(json.dumps(_robots_log(good, "pol-a", parent)))
    (root / "logs" / "cand.json").write_text(json.dumps(_robots_log(good, "pol-b", cand)))
    (root / "logs" / "faulted.json").write_bytes((src / "adhoc_084f91f0.error.json").read_bytes())
    s = ha.open_store(root / "store")
    s.ingest(root / "logs", progress=False)
    runs = s.sql("select run_id, agent_name from runs").rows()
    by = {a: r for r, a in runs}
    s.declare_parent(by["pol-b"], by["pol-a"])  # an inspect-robots log names no parent
    return s, by["pol-b"], by["pol-a"]


@pytest.mark.slow
def test_an_inspect_robots_pair_has_one_success(robots: tuple[ha.Store, str, str]) -> None:
    store, cand, parent = robots
    agg = store.aggregate(metrics=["success_at_end"], ci="auto")
    rates = store.sql("select * from mart_success_rates")
    mart = store.sql("select * from mart_aggregate_run where metric = 'success_at_end'")
    assert rates.height == agg.height == mart.height == 3  # the faulted trial too
    for row in agg.iter_rows(named=True):
        r = rates.filter(pl.col("run_id") == row["run_id"]).row(0, named=True)
        m = mart.filter(pl.col("run_id") == row["run_id"]).row(0, named=True)
        assert r["n_total"] == m["n_total"] == row["n_total"]
        assert r["n_valid"] == m["n_valid"] == row["n_valid"]
        assert r["n_errors"] == m["n_errors"] == row["n_errors"]
        # an Inspect log: errored samples are left out, as inspect_ai's metrics do
        assert row["errors"] == r["errors"] == m["errors"] == "exclude"
        failed = store.aggregate(metrics=["success_at_end"], errors="failure", runs=[row["run_id"]])
        rate = failed["mean"].item()
        assert r["success_rate_errors_as_failures"] == pytest.approx(rate, rel=1e-12)
        if row["n_valid"]:
            assert r["success_rate_errors_excluded"] == pytest.approx(row["mean"], rel=1e-12)
            assert m["mean"] == pytest.approx(row["mean"], rel=1e-12)
    want = {cand: 5 / 6, parent: 2 / 6}
    for run, mean in want.items():
        assert agg.filter(pl.col("run_id") == run)["mean"].item() == pytest.approx(mean)
    tasks = store.sql("select * from mart_task_success where run_id in ($c, $p)",
                      {"c": cand, "p": parent})  # fmt: skip
    for run, mean in want.items():
        assert tasks.filter(pl.col("run_id") == run)["success_rate"].item() == pytest.approx(mean)

    # compare's default metric is the pair's success: success_at_end, not an error
    py = store.compare(cand, parent, n_resamples=500, seed=7)
    overall = py.filter(pl.col("level") == "overall").row(0, named=True)
    assert overall["metric"] == "success_at_end"
    # by hand: scenes 1, 2, 5 go 0 -> 1; none go 1 -> 0
    assert (overall["n_pairs"], overall["candidate_wins"], overall["parent_wins"]) == (6, 3, 0)
    pc = ha.paired_compare(
        {f"adhoc#scene-{i}": v for i, v in enumerate([1.0, 1.0, 1.0, 1.0, 0.0, 1.0])},
        {f"adhoc#scene-{i}": v for i, v in enumerate([1.0, 0.0, 0.0, 1.0, 0.0, 0.0])},
        metric="success_at_end",
        n_resamples=500,
        seed=7,
    )
    assert overall["p_mcnemar"] == pytest.approx(pc.p_value, rel=1e-12) == pytest.approx(1 / 8)
    # the verdict's test: Tango's score statistic at 0 is (b - c) / sqrt(b + c) = sqrt(3)
    assert overall["test"] == pc.test == "tango score"
    assert overall["p_value"] == pytest.approx(pc.p_test, rel=1e-12)
    assert overall["p_value"] == pytest.approx(float(scipy_stats.norm.sf(3**0.5)), rel=1e-12)
    sql = store.sql(
        "select * from mart_compare where candidate = $c and parent = $p "
        "and metric = 'success_at_end' and level = 'overall'",
        {"c": cand, "p": parent},
    ).row(0, named=True)
    for f in ("n_pairs", "candidate_wins", "parent_wins", "ties", "n_dropped"):
        assert sql[f] == overall[f], f
    frames = report_frames(store, cand, parent, n_resamples=500, seed=7)
    head = frames["headline"].row(0, named=True)
    assert (head["n_pairs"], head["candidate_wins"], head["parent_wins"]) == (6, 3, 0)
    assert head["p_value"] == pytest.approx(overall["p_value"], rel=1e-12)
    runs = frames["runs"]
    for run, mean in want.items():
        assert runs.filter(pl.col("run") == run)["success"].item() == pytest.approx(mean)
