"""``cluster=`` in compare, pooled_compare, rank and aggregate: every figure is
:func:`hylo_analytics.stats.cluster_robust`'s on the paired differences the store holds, read
here independently (SQL over the resolved scores, paired in polars)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import hylo_analytics as ha
from hylo_analytics.compare import StatisticalRule, compare_scores
from hylo_analytics.compare.pooled import pooled_compare
from hylo_analytics.compare.ranking import rank_policies
from hylo_analytics.errors import InputError
from hylo_analytics.stats import ClusterRobust, cluster_robust, cluster_totals, pool_strata
from hylo_analytics.testing import SynthConfig, write_dataset

PARENT, CANDS = "run-octo-ft-1.0.0-0000", ["run-octo-ft-1.1.0-0001", "run-octo-ft-1.2.0-rc1-0002"]


def _scores(store: ha.Store, metric: str, failures: bool = False) -> pl.DataFrame:
    value = "case when value is null and errored then 0.0 else value end" if failures else "value"
    return store.sql(
        f"select run_id, key, task_id, {value} as value from int_scores_preferred "
        "where metric = $m",
        {"m": metric},
    ).drop_nulls("value")


def _reference(frame: pl.DataFrame, cand: str, parent: str) -> ClusterRobust:
    """The CR2 fit of ``cand - parent`` over the keys both have, clustered by task."""
    pairs = frame.filter(run_id=cand).join(frame.filter(run_id=parent), on="key", suffix="_p")
    d = (pairs["value"] - pairs["value_p"]).to_numpy()
    counts, sizes, sums = cluster_totals(d, pairs["task_id"].to_numpy())
    return cluster_robust(sizes, sums, counts)


@pytest.mark.parametrize("metric", ["success", "steps"])
def test_store_compare_is_cr2_of_the_paired_differences(sample_store: ha.Store, metric):
    out = sample_store.compare(CANDS, PARENT, metrics=[metric], cluster="task_id")
    frame = _scores(sample_store, metric)
    for row in out.iter_rows(named=True):
        fit = _reference(frame, row["candidate"], PARENT)
        assert row["mean_diff"] == pytest.approx(fit.mean[0], rel=1e-12)
        lo, hi = fit.bounds(0.95)
        if metric == "success":  # a difference of rates is clipped to [-1, 1]
            lo, hi = np.clip(lo, -1, 1), np.clip(hi, -1, 1)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo[0], hi[0]), rel=1e-10)
        assert (row["eq_low"], row["eq_high"]) == pytest.approx(
            tuple(np.clip(b, -1, 1)[0] if metric == "success" else b[0] for b in fit.bounds(0.9))
        )
        # the verdict's test: in the metric's direction (fewer steps are better)
        side = "greater" if metric == "success" else "less"
        assert row["p_value"] == pytest.approx(fit.p(side)[0], rel=1e-9)
        assert (row["ci_method"], row["test"], row["cluster"]) == ("cr2", "cr2 t", "task_id")
        assert (row["n_clusters"], row["ci_df"]) == (10, pytest.approx(fit.df[0]))
        assert row["ci_se"] == pytest.approx(fit.se[0])


def test_the_frame_path_and_the_sql_path_agree(sample_store: ha.Store):
    scores = sample_store.sql(
        "select run_id, key, task_id, metric, value, skip_reason, errored "
        "from int_scores_preferred where metric = 'success'"
    )
    framed = compare_scores(scores, candidates=CANDS, parent=PARENT, cluster="task_id")
    stored = sample_store.compare(CANDS, PARENT, cluster="task_id")
    cols = ["candidate", "mean_diff", "ci_low", "ci_high", "p_value", "ci_df", "verdict"]
    assert framed.sort("candidate").select(cols).equals(stored.sort("candidate").select(cols))


def test_errors_as_failures_and_the_other_policy_are_clustered(sample_store: ha.Store):
    failing = sample_store.compare(CANDS, PARENT, errors="failure", cluster="task_id")
    frame = _scores(sample_store, "success", failures=True)
    for row in failing.iter_rows(named=True):
        fit = _reference(frame, row["candidate"], PARENT)
        assert row["p_value"] == pytest.approx(fit.p("greater")[0], rel=1e-9)
        assert row["ci_method"] == "cr2"
    # the verdict under the other policy (issue 40) is the clustered one of that policy
    excluded = sample_store.compare(CANDS, PARENT, cluster="task_id").sort("candidate")
    assert excluded["n_errored_candidate"].sum() > 0
    assert excluded["verdict_other"].to_list() == failing.sort("candidate")["verdict"].to_list()
    assert excluded["mean_diff_other"].to_list() == pytest.approx(
        failing.sort("candidate")["mean_diff"].to_list()
    )


def test_a_row_of_one_cluster_has_no_interval_and_no_verdict(sample_store: ha.Store):
    out = sample_store.compare(CANDS[1], PARENT, by=["task_id"], cluster="task_id")
    tasks = out.filter(pl.col("level") == "task_id")
    assert tasks.height == 10 and (tasks["n_clusters"] == 1).all()
    assert tasks["ci_low"].is_null().all() and (tasks["p_value"] == 1.0).all()
    assert (tasks["verdict"] == "inconclusive").all()
    assert tasks["verdict_note"].str.contains("1 cluster of 'task_id'").all()
    overall = out.filter(pl.col("level") == "overall").row(0, named=True)
    assert overall["n_clusters"] == 10 and overall["ci_low"] is not None


def test_clustered_intervals_are_wider_than_the_keys_alone(sample_store: ha.Store):
    plain = sample_store.compare(CANDS, PARENT, metrics=["steps"], n_resamples=500)
    clustered = sample_store.compare(CANDS, PARENT, metrics=["steps"], cluster="task_id")
    width = (pl.col("ci_high") - pl.col("ci_low")).alias("w")
    # the synthetic tasks differ (the last one regresses): keys of a task move together
    assert (clustered.select(width)["w"] > plain.select(width)["w"]).all()


def test_what_cluster_refuses(sample_store: ha.Store):
    with pytest.raises(InputError, match="ci='score' treats the keys as independent"):
        sample_store.compare(CANDS, PARENT, ci="score", cluster="task_id")
    with pytest.raises(InputError, match="ci='cr2' needs cluster="):
        sample_store.compare(CANDS, PARENT, ci="cr2")
    with pytest.raises(InputError, match=r"no column 'tsk_id'.*did you mean 'task_id'"):
        sample_store.compare(CANDS, PARENT, cluster="tsk_id")
    with pytest.raises(InputError, match="no column 'tsk_id'"):
        sample_store.rank(cluster="tsk_id")
    with pytest.raises(InputError, match="ci='cr2' needs cluster="):
        sample_store.aggregate(ci="cr2")
    with pytest.raises(InputError, match="strength_ci='bootstrap'"):
        sample_store.rank(policy="run_id", strength_ci="bootstrap", cluster="task_id")


def test_store_aggregate_takes_cr2_and_keeps_its_columns(sample_store: ha.Store):
    out = sample_store.aggregate(metrics=["success", "steps"], cluster="task_id")
    assert set(out["ci_method"]) == {"cr2"}
    for metric in ("success", "steps"):
        frame = _scores(sample_store, metric)
        for row in out.filter(metric=metric).iter_rows(named=True):
            sub = frame.filter(run_id=row["run_id"])
            counts, sizes, sums = cluster_totals(sub["value"].to_numpy(), sub["task_id"])
            fit = cluster_robust(sizes, sums, counts)
            lo, hi = fit.bounds(0.95)
            if metric == "success":
                lo, hi = np.clip(lo, 0, 1), np.clip(hi, 0, 1)
            assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo[0], hi[0]), rel=1e-10)
            assert row["stderr_clustered_corrected"] == pytest.approx(fit.se_cr1[0])
            assert row["n_clusters"] == 10
    kept = sample_store.aggregate(metrics=["success"], cluster="task_id", ci="wilson")
    assert set(kept["ci_method"]) == {"wilson"} and "stderr_clustered" in kept.columns


@pytest.fixture(scope="module")
def suites_store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    """Two suites (splits s1, s2) of two runs each (versions 1.0.0 and 1.1.0), 6 and 9
    tasks of 8 seeds."""
    root = tmp_path_factory.mktemp("suites")
    for split, tasks, seed in (("s1", 6, 1), ("s2", 9, 2)):
        cfg = SynthConfig(runs=2, tasks=tasks, seeds=8, traces_per_run=0, seed=seed, split=split)
        for path in write_dataset(root / split, cfg):  # one run id per suite and version
            path.write_text(path.read_text().replace('"run-octo-ft-', f'"{split}-run-octo-ft-'))
    store = ha.open_store(root / "store")
    store.ingest(root, progress=False)
    return store


def test_store_pooled_compare_pools_the_suites_cr2(suites_store: ha.Store):
    out = suites_store.pooled_compare("version=1.1.0", "version=1.0.0", cluster="task_id")
    frame = _scores(suites_store, "success")
    fits = [
        _reference(frame, f"{s}-run-octo-ft-1.1.0-0001", f"{s}-run-octo-ft-1.0.0-0000")
        for s in ("s1", "s2")
    ]
    both = ClusterRobust(*(np.concatenate([getattr(f, k) for f in fits]) for k in
                           ("mean", "se", "df", "n_clusters", "n", "se_cr1")))  # fmt: skip
    pooled = pool_strata(both, [0.5, 0.5])
    row = out.filter(pl.col("level") == "pooled").row(0, named=True)
    assert row["mean_diff"] == pytest.approx(pooled.mean[0])
    lo, hi = pooled.bounds(0.95)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo[0], hi[0]), rel=1e-10)
    assert row["p_value"] == pytest.approx(pooled.p("greater")[0], rel=1e-9)
    assert row["ci_df"] == pytest.approx(pooled.df[0]) and row["n_clusters"] == 15
    assert row["ci_method"] == "cr2 (pooled over suites)" and row["test"] == "cr2 t (pooled)"
    suites = out.filter(pl.col("level") == "suite").sort("suite")
    assert suites["ci_method"].to_list() == ["cr2", "cr2"]
    assert suites["ci_se"].to_list() == pytest.approx([f.se[0] for f in fits])
    # the suites' verdict intervals are at the family's level, from the same fits
    adj = row["ci_adj_level"]
    assert suites["ci_adj_low"].to_list() == pytest.approx(
        [np.clip(f.bounds(adj)[0][0], -1, 1) for f in fits]
    )
    # a numeric metric is pooled the same way (no bootstrap)
    steps = suites_store.pooled_compare(
        "version=1.1.0", "version=1.0.0", metrics=["steps"], cluster="task_id"
    )
    assert steps.filter(pl.col("level") == "pooled")["ci_method"][0] == "cr2 (pooled over suites)"


def test_frame_pooled_compare_equals_the_store_one(suites_store: ha.Store):
    scores = suites_store.sql(
        "select run_id, key, task_id, metric, value, skip_reason, errored "
        "from int_scores_preferred where metric = 'success'"
    )
    pairs = {
        s: (f"{s}-run-octo-ft-1.1.0-0001", f"{s}-run-octo-ft-1.0.0-0000") for s in ("s1", "s2")
    }
    framed = pooled_compare(scores, pairs=pairs, cluster="task_id")
    stored = suites_store.pooled_compare("version=1.1.0", "version=1.0.0", cluster="task_id")
    cols = ["level", "suite", "mean_diff", "ci_low", "ci_high", "p_value", "ci_df"]
    assert framed.select(cols).equals(stored.select(cols))


def test_store_rank_pairs_are_store_compare_rows(suites_store: ha.Store):
    rule = StatisticalRule(margin=0.3)  # wide: p_tost is a number to compare
    ranking = suites_store.rank(policy="agent_version", cluster="task_id", rule=rule)
    row = ranking.matrix.row(0, named=True)
    assert {row["policy"], row["opponent"]} == {"1.0.0", "1.1.0"}
    assert row["ci_method"] == "cr2" and row["n_clusters"] == 15
    assert ranking.strengths["strength_method"][0] == "sandwich (clusters of task_id)"
    assert any("clustered by 'task_id'" in n for n in ranking.notes)
    # the pair pools both suites' keys, clusters nested in suites: a frame's compare of the
    # (suite, key) pairs clustered by (suite, task) is the same statistic
    frame = suites_store.sql(
        "select s.run_id, r.agent_version, r.split, s.key, s.task_id, s.metric, s.value "
        "from int_scores_preferred s join stg_runs r using (run_id) where s.metric = 'success'"
    ).with_columns(
        run_id="agent_version",
        key=pl.format("{}/{}", "split", "key"),
        task_id=pl.format("{}/{}", "split", "task_id"),
    )
    one = compare_scores(
        frame, candidates=row["policy"], parent=row["opponent"], cluster="task_id", rule=rule
    ).row(0, named=True)
    assert one["p_tost"] is not None
    for col in ("mean_diff", "ci_low", "ci_high", "p_value", "ci_df", "p_tost", "eq_low"):
        assert row[col] == pytest.approx(one[col], rel=1e-9), col
    assert row["verdict"] == one["verdict"]


def _many(n_policies: int, n_tasks: int, seeds: int, seed: int = 0) -> pl.DataFrame:
    """0/1 outcomes of ``n_policies`` on one suite: task effects shared within a task, 5 %
    of the (policy, key) values missing."""
    rng = np.random.default_rng(seed)
    task = np.repeat(np.arange(n_tasks), seeds)
    skill = rng.uniform(0.2, 0.8, n_policies)[:, None]
    effect = rng.normal(0, 0.25, (n_policies, n_tasks))[:, task]
    value = (rng.uniform(size=(n_policies, len(task))) < np.clip(skill + effect, 0, 1)).astype(
        float
    )
    value[rng.uniform(size=value.shape) < 0.05] = np.nan
    return pl.DataFrame(
        {
            "run_id": np.repeat([f"p{i:04d}" for i in range(n_policies)], len(task)),
            "key": np.tile(
                [
                    f"t{t}#{k}"
                    for t, k in zip(task, np.tile(np.arange(seeds), n_tasks), strict=True)
                ],
                n_policies,
            ),
            "task_id": np.tile([f"t{t}" for t in task], n_policies),
            "metric": "success",
            "value": value.ravel(),
        }
    ).with_columns(pl.col("value").fill_nan(None))


def test_rank_at_scale_is_the_pairs_cr2_vectorized():
    """400 policies x 20 tasks x 10 seeds: 79,800 pairs from per-cluster products; a sample
    of them equals the CR2 fit of the pair's differences computed alone."""
    frame = _many(400, 20, 10)
    ranking = rank_policies(frame, cluster="task_id", progress=False)
    m = ranking.matrix
    assert m.height == 400 * 399 // 2 and set(m["ci_method"].cast(pl.String)) == {"cr2"}
    wide = frame.pivot(on="run_id", index=["key", "task_id"], values="value")
    task = wide["task_id"].to_numpy()
    picked = m.sample(40, seed=1)
    for row in picked.iter_rows(named=True):
        d = (wide[str(row["policy"])] - wide[str(row["opponent"])]).to_numpy()
        ok = ~np.isnan(d)
        counts, sizes, sums = cluster_totals(d[ok], task[ok])
        fit = cluster_robust(sizes, sums, counts)
        assert row["mean_diff"] == pytest.approx(fit.mean[0], rel=1e-9)
        assert row["ci_se"] == pytest.approx(fit.se[0], rel=1e-9)
        assert row["ci_df"] == pytest.approx(fit.df[0], rel=1e-9)
        assert row["p_value"] == pytest.approx(fit.p("greater")[0], rel=1e-8, abs=1e-300)


def test_cli_compare_rank_and_aggregate_take_cluster(
    sample_store: ha.Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
):
    from hylo_analytics.cli import main

    base = ["--store", str(sample_store.root)]
    argv = ["compare", *base, "--candidate", CANDS[0], "--parent", PARENT, "--cluster", "task_id"]
    assert main([*argv, "--format", "json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert (row["ci_method"], row["test"], row["n_clusters"]) == ("cr2", "cr2 t", 10)
    assert main(argv) == 0
    assert "n_clusters" in capsys.readouterr().out
    assert main([*argv, "--ci", "score"]) == 2
    assert "treats the keys as independent" in capsys.readouterr().err
    out = tmp_path / "matrix.csv"
    rank = ["rank", *base, "--policy", "run_id", "--cluster", "task_id", "--show", "matrix"]
    assert main([*rank, "--format", "csv", "-o", str(out), "--quiet"]) == 0
    matrix = pl.read_csv(out)
    assert matrix.height == 3 and set(matrix["ci_method"]) == {"cr2"}
    assert "clustered by 'task_id'" in capsys.readouterr().err
    agg = ["aggregate", *base, "--metric", "success", "--cluster", "task_id", "--format", "json"]
    assert main(agg) == 0
    assert {r["ci_method"] for r in json.loads(capsys.readouterr().out)} == {"cr2"}


def test_hostile_cluster_names_and_values_are_only_labels():
    """A cluster column named like SQL and task ids from the hostile corpus cluster exactly
    as plain labels do, in compare, rank and aggregate."""
    from hostile_data import task_names

    frame = _many(4, 9, 6, seed=3)
    plain = sorted(frame["task_id"].unique().to_list())
    hostile = dict(zip(plain, task_names(len(plain)), strict=True))
    column = 'task"; drop table _scores; --'
    evil = frame.with_columns(pl.col("task_id").replace_strict(hostile).alias(column))
    kw = {"candidates": ["p0001", "p0002"], "parent": "p0000"}
    cols = ["candidate", "mean_diff", "ci_low", "ci_high", "p_value", "ci_df", "n_clusters"]
    a = compare_scores(frame, cluster="task_id", **kw).select(cols)
    b = compare_scores(evil, cluster=column, **kw).select(cols)
    # equal up to the order the cluster sums are added in (their labels sort differently)
    assert_frame_equal(a, b, rel_tol=1e-12)
    assert (a["n_clusters"] == 9).all()
    ra = rank_policies(frame, cluster="task_id", progress=False).matrix
    rb = rank_policies(evil, cluster=column, progress=False).matrix
    assert_frame_equal(ra.select("ci_low", "ci_df"), rb.select("ci_low", "ci_df"), rel_tol=1e-12)
    from hylo_analytics.aggregate import aggregate_scores

    ga = aggregate_scores(frame, cluster="task_id").select("ci_low", "ci_high")
    gb = aggregate_scores(evil, cluster=column).select("ci_low", "ci_high")
    assert_frame_equal(ga, gb, rel_tol=1e-12)
