"""compare_scores / Store.compare: many candidates against one parent as one join."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

import hylo_analytics as ha
from hylo_analytics.compare import ComparabilityError, compare_scores, paired_compare

PARENT = "P"


def _frame() -> pl.DataFrame:
    """Two tasks x 6 seeds; candidate A is better on task t1, B abstains twice."""
    rng = np.random.default_rng(7)
    rows = []
    for run in ("P", "A", "B"):
        for task in ("t1", "t2"):
            for seed in range(6):
                v = float(rng.integers(0, 2))
                if run == "A" and task == "t1":
                    v = 1.0
                if run == "B" and seed < 2 and task == "t2":
                    v = None  # type: ignore[assignment]
                rows.append((run, f"{task}#{seed}", task, 1, "success", v))
                rows.append((run, f"{task}#{seed}", task, 1, "steps", float(rng.integers(5, 40))))
    cols = ["run_id", "key", "task_id", "epoch", "metric", "value"]
    return pl.DataFrame(rows, schema=cols, orient="row")


def _one(frame: pl.DataFrame, run: str, metric: str, task: str | None) -> dict[str, float | None]:
    f = frame.filter(pl.col("run_id") == run, pl.col("metric") == metric)
    if task is not None:
        f = f.filter(pl.col("task_id") == task)
    return dict(zip(f["key"], f["value"], strict=True))


@pytest.mark.slow
def test_every_row_equals_paired_compare() -> None:
    scores = _frame()
    out = compare_scores(
        scores,
        candidates=["A", "B"],
        parent=PARENT,
        metrics=["success", "steps"],
        by=["task_id"],
        n_resamples=200,
    )
    assert out.height == 2 * 2 * 3  # candidates x metrics x (overall + 2 tasks)
    for row in out.iter_rows(named=True):
        pc = paired_compare(
            _one(scores, row["candidate"], row["metric"], row["task_id"]),
            _one(scores, PARENT, row["metric"], row["task_id"]),
            metric=row["metric"],
            n_resamples=200,
        )
        # a row's figures depend on its own pairs only, never on the other rows of the call
        for field in ("n_pairs", "candidate_wins", "parent_wins", "ties", "n_dropped"):
            assert row[field] == getattr(pc, field), field
        for field in ("wilcoxon_p", "ci_low", "ci_high"):
            assert row[field] == pytest.approx(getattr(pc, field), rel=1e-12), field
        assert row["p_value"] == pytest.approx(pc.p_test, rel=1e-12)
        assert row["p_mcnemar"] == pytest.approx(pc.p_value, rel=1e-12)
        assert row["mean_diff"] == pytest.approx(pc.mean_diff)
        assert row["ci_low"] <= row["mean_diff"] <= row["ci_high"]
    b = out.filter(pl.col("candidate") == "B", pl.col("metric") == "success")
    assert b.filter(pl.col("level") == "overall")["n_dropped"].item() == 2


@pytest.mark.slow
def test_p_values_are_adjusted_within_each_family() -> None:
    """The overall row is its own family; the per-task rows of a candidate and metric another."""
    kw = {"candidates": ["A", "B"], "parent": PARENT, "metrics": ["success", "steps"]}
    out = compare_scores(_frame(), by=["task_id"], ci="none", **kw)  # type: ignore[arg-type]
    for (_, _, level), fam in out.group_by("candidate", "metric", "level"):
        p, w = fam["p_value"].to_numpy(), fam["p_worse"].to_numpy()
        np.testing.assert_allclose(fam["p_holm"].to_numpy(), multipletests(p, method="holm")[1])
        np.testing.assert_allclose(
            fam["p_worse_holm"].to_numpy(), multipletests(w, method="holm")[1]
        )
        np.testing.assert_allclose(fam["p_bh"].to_numpy(), multipletests(p, method="fdr_bh")[1])
        assert (fam["family_size"] == (1 if level == "overall" else 2)).all()
    # adding by= never changes an overall row's adjusted p or verdict
    alone = compare_scores(_frame(), ci="none", **kw)  # type: ignore[arg-type]
    cols = ["candidate", "metric", "p_holm", "p_worse_holm", "verdict"]
    assert alone.select(cols).equals(
        out.filter(pl.col("level") == "overall").select(cols).sort("candidate", "metric")
    )
    # family="level" pools every candidate and metric of a level
    pooled = compare_scores(_frame(), by=["task_id"], ci="none", family="level", **kw)  # type: ignore[arg-type]
    over = pooled.filter(pl.col("level") == "overall")
    np.testing.assert_allclose(
        over["p_holm"].to_numpy(), multipletests(over["p_value"].to_numpy(), method="holm")[1]
    )
    assert (over["family_size"] == 4).all()


@pytest.mark.parametrize("alternative", ["greater", "two-sided"])
def test_vectorized_wilcoxon_equals_scipy(alternative: str) -> None:
    rng = np.random.default_rng(11)
    n = 40
    par = np.round(rng.normal(10, 2, n), 1)
    cand = par + np.round(rng.normal(0.4, 1.0, n), 0)  # rounding makes ties and zeros
    keys = [f"k#{i}" for i in range(n)]
    frame = pl.DataFrame(
        {
            "run_id": ["P"] * n + ["C"] * n,
            "key": keys * 2,
            "metric": "return",
            "value": np.concatenate([par, cand]),
        }
    )
    out = compare_scores(frame, candidates="C", parent="P", ci="none", alternative=alternative)  # type: ignore[arg-type]
    d = cand - par
    want = stats.wilcoxon(
        d, method="approx", zero_method="wilcox", correction=False, alternative=alternative
    ).pvalue
    assert out["wilcoxon_p"].item() == pytest.approx(want, rel=1e-9)


def test_vectorized_wilcoxon_per_group_and_pooled() -> None:
    rng = np.random.default_rng(5)
    n = 60
    par = np.round(rng.normal(10, 2, n), 0)
    cand = par + np.round(rng.normal(0.3, 1.5, n), 0)
    group = np.where(np.arange(n) < 25, "g1", "g2")
    frame = pl.DataFrame(
        {
            "run_id": ["P"] * n + ["C"] * n,
            "key": [f"k#{i}" for i in range(n)] * 2,
            "grp": np.concatenate([group, group]),
            "metric": "steps",  # minimize: improvement is parent - candidate
            "value": np.concatenate([par, cand]),
        }
    )
    out = compare_scores(frame, candidates="C", parent="P", by=["grp"], ci="none")
    better = par - cand
    for level, mask in (
        ("overall", np.ones(n, bool)),
        ("g1", group == "g1"),
        ("g2", group == "g2"),
    ):
        row = out.filter(pl.col("grp").is_null() if level == "overall" else pl.col("grp") == level)
        want = stats.wilcoxon(
            better[mask],
            method="approx",
            zero_method="wilcox",
            correction=False,
            alternative="greater",
        ).pvalue
        assert row["wilcoxon_p"].item() == pytest.approx(want, rel=1e-9)
        assert row["mean_diff"].item() == pytest.approx((cand - par)[mask].mean())


def test_holm_and_bh_equal_statsmodels() -> None:
    from hylo_analytics.stats import benjamini_hochberg, holm

    p = np.array([0.01, 0.04, 0.03, 0.2, 0.04, 0.5, 1.0, 0.001, 0.0])
    np.testing.assert_allclose(holm(p), multipletests(p, method="holm")[1])
    np.testing.assert_allclose(benjamini_hochberg(p), multipletests(p, method="fdr_bh")[1])


def test_epochs_are_refused_or_reduced_never_last_wins() -> None:
    frame = pl.DataFrame(
        {
            "run_id": ["P", "P", "C", "C", "C", "C"],
            "key": ["a", "b", "a", "a", "b", "b"],
            "epoch": [1, 1, 1, 2, 1, 2],
            "metric": "success",
            "value": [0.0, 1.0, 1.0, 0.0, None, None],
        }
    )
    with pytest.raises(ValueError, match=r"several rows \(epochs\).*run 'C'"):
        compare_scores(frame, candidates="C", parent="P", reducer=None)
    # the default is the key-level rule of int_key_scores: the mean of the valid epochs
    default = compare_scores(frame, candidates="C", parent="P", ci="none")
    assert default["mean_candidate"].item() == 0.5
    with pytest.raises(ValueError, match="never first/last"):
        compare_scores(frame, candidates="C", parent="P", reducer="first")  # type: ignore[arg-type]
    mean = compare_scores(frame, candidates="C", parent="P", reducer="mean", ci="none")
    assert mean["mean_candidate"].item() == 0.5  # key b: all epochs abstained -> dropped
    assert (mean["n_pairs"].item(), mean["n_dropped"].item()) == (1, 1)
    mx = compare_scores(frame, candidates="C", parent="P", reducer="max", ci="none")
    mn = compare_scores(frame, candidates="C", parent="P", reducer="min", ci="none")
    assert (mx["candidate_wins"].item(), mn["ties"].item()) == (1, 1)
    by_epoch = compare_scores(frame, candidates="C", parent="P", pair_on_epoch=True, ci="none")
    assert by_epoch["n_pairs"].item() == 1 and by_epoch["n_unmatched"].item() == 2


def test_normal_ci_and_bad_arguments() -> None:
    out = compare_scores(_frame(), candidates="A", parent=PARENT, metrics=["steps"], ci="normal")
    row = out.row(0, named=True)
    assert row["ci_low"] < row["mean_diff"] < row["ci_high"]
    with pytest.raises(ValueError, match="also listed"):
        compare_scores(_frame(), candidates=["A", "P"], parent=PARENT)
    with pytest.raises(ValueError, match="no scores"):
        compare_scores(_frame(), candidates=["Z"], parent=PARENT)
    with pytest.raises(ValueError, match="lacks column"):
        compare_scores(_frame(), candidates="A", parent=PARENT, by=["robot"])


def _store_with_other_digest(sample_copy: Path, tmp_path: Path) -> ha.Store:
    log = sample_copy / "run-octo-ft-1.2.0-rc1-0002" / "evallog.json"
    log.write_text(log.read_text().replace("sha256:d2517fe5", "sha256:00000000", 1))
    store = ha.open_store(tmp_path / "store")
    store.ingest(sample_copy, progress=False)
    return store


def test_gate_refuses_a_different_digest_and_force_records_it(
    sample_copy: Path, tmp_path: Path
) -> None:
    store = _store_with_other_digest(sample_copy, tmp_path)
    good, bad, parent = (
        "run-octo-ft-1.1.0-0001",
        "run-octo-ft-1.2.0-rc1-0002",
        "run-octo-ft-1.0.0-0000",
    )
    with pytest.raises(ComparabilityError, match=f"{bad}: benchmark_digest 'sha256:0000"):
        store.compare([good, bad], parent)
    out = store.compare([good, bad], parent, force=True, ci="none")
    forced = dict(zip(out["candidate"], out["forced"], strict=True))
    assert forced == {good: False, bad: True}
    note = out.filter(pl.col("candidate") == bad)["gate_note"].item()
    assert "benchmark_digest" in note
    with pytest.raises(ValueError, match="no run"):
        store.compare(["nope"], parent)


@pytest.mark.slow
def test_gate_refuses_different_scorer_versions(sample_copy: Path, tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "store")
    store.ingest(sample_copy, progress=False)
    runs = {"run-octo-ft-1.0.0-0000": "1.0", "run-octo-ft-1.1.0-0001": "2.0"}
    scores = store.sql("SELECT * FROM stg_scores WHERE metric = 'success'").filter(
        pl.col("run_id").is_in(list(runs))
    )
    scores = scores.with_columns(
        source=pl.lit("scorer:success"),
        scorer_version=pl.col("run_id").replace_strict(runs),
    ).drop("batch_seq")
    with store.parquet.lock():
        store.parquet.commit({"scores": scores.to_arrow()})
    with pytest.raises(
        ComparabilityError, match=r"scorer_version of 'success' \(scorer:success\) '2\.0'"
    ):
        store.compare("run-octo-ft-1.1.0-0001", "run-octo-ft-1.0.0-0000", source="scorer:success")
    plain = store.compare("run-octo-ft-1.1.0-0001", "run-octo-ft-1.0.0-0000", ci="none")
    assert not plain["forced"].any()


def test_store_compare_on_sample(sample_store: ha.Store) -> None:
    out = sample_store.compare(
        ["run-octo-ft-1.1.0-0001", "run-octo-ft-1.2.0-rc1-0002"],
        "run-octo-ft-1.0.0-0000",
        metrics=["success", "steps"],
        by=["task_id"],
        n_resamples=200,
    )
    assert out.height == 2 * 2 * 11
    assert set(out["verdict"]) <= {"improved", "regressed", "unchanged", "inconclusive"}
    assert out.filter(pl.col("metric") == "steps")["direction"].unique().to_list() == ["minimize"]
    overall = out.filter(pl.col("level") == "overall", pl.col("metric") == "success")
    assert (overall["n_pairs"] + overall["n_dropped"] + overall["n_unmatched"] == 200).all()
    # ids come back as plain strings (categoricals are internal), so they join with run tables
    assert out.schema["candidate"] == pl.String and out.schema["task_id"] == pl.String


def test_binary_wilcoxon_fast_path_equals_scipy() -> None:
    rng = np.random.default_rng(2)
    n = 50
    par, cand = rng.integers(0, 2, n).astype(float), rng.integers(0, 2, n).astype(float)
    frame = pl.DataFrame(
        {
            "run_id": ["P"] * n + ["C"] * n,
            "key": [f"k#{i}" for i in range(n)] * 2,
            "metric": "success",
            "value": np.concatenate([par, cand]),
        }
    )
    out = compare_scores(frame, candidates="C", parent="P", ci="none", alternative="two-sided")
    want = stats.wilcoxon(
        cand - par, method="approx", zero_method="wilcox", correction=False
    ).pvalue
    assert out["wilcoxon_p"].item() == pytest.approx(want, rel=1e-9)


def test_directions_come_from_one_place() -> None:
    """argument > the scores' declared direction (metadata) > registry > unknown."""
    base = _frame().filter(pl.col("metric") == "steps")
    lat = base.with_columns(metric=pl.lit("latency"))
    declared = lat.with_columns(metadata=pl.lit('{"direction": "minimize", "unit": "ms"}'))
    kw = {"candidates": "A", "parent": PARENT, "ci": "none"}
    unknown = compare_scores(lat, **kw).row(0, named=True)  # type: ignore[arg-type]
    assert (unknown["direction"], unknown["direction_source"]) == ("unknown", None)
    assert unknown["verdict"] in ("inconclusive", "unchanged")
    assert unknown["p_value"] == unknown["p_worse"] == unknown["p_two_sided"]
    assert unknown["verdict_note"].startswith("no direction known for 'latency'")
    scored = compare_scores(declared, **kw).row(0, named=True)  # type: ignore[arg-type]
    assert (scored["direction"], scored["direction_source"]) == ("minimize", "scores")
    given = compare_scores(declared, directions={"latency": "maximize"}, **kw).row(0, named=True)  # type: ignore[arg-type]
    assert (given["direction"], given["direction_source"]) == ("maximize", "argument")
    assert given["candidate_wins"] == scored["parent_wins"]
    registry = compare_scores(base, **kw).row(0, named=True)  # type: ignore[arg-type]
    assert (registry["direction"], registry["direction_source"]) == ("minimize", "registry")


def test_errors_as_failures_needs_the_errored_column() -> None:
    with pytest.raises(ValueError, match="errors='failure' needs an 'errored' column"):
        compare_scores(_frame(), candidates="A", parent=PARENT, errors="failure")
    with (
        pytest.warns(DeprecationWarning, match="errors_as_failures= is deprecated"),
        pytest.raises(ValueError, match="errors='failure' needs an 'errored' column"),
    ):
        compare_scores(_frame(), candidates="A", parent=PARENT, errors_as_failures=True)
    with pytest.raises(ValueError, match="did you mean 'exclude'"):
        compare_scores(_frame(), candidates="A", parent=PARENT, errors="excluded")  # type: ignore[arg-type]


def test_a_metric_typo_gets_a_did_you_mean(sample_store: ha.Store) -> None:
    runs = sorted(sample_store.runs()["run_id"])
    with pytest.raises(ValueError, match=r"did you mean 'success' for 'sucess'\?.*has scores of"):
        sample_store.compare(runs[1:], runs[0], metrics=["sucess"])


def _skewed(n: int, seed: int) -> pl.DataFrame:
    """Most pairs a little better for the candidate, a few much worse: the sign test and the
    mean difference disagree (the issue's case: steps 'improved' on a worse mean)."""
    rng = np.random.default_rng(seed)
    par = rng.integers(50, 60, n).astype(float)
    gain = np.where(rng.random(n) < 0.8, -1.0, 8.0)  # steps: lower is better
    keys = [f"t{i % 4}#{i}" for i in range(n)]
    return pl.DataFrame(
        {
            "run_id": ["P"] * n + ["C"] * n,
            "key": keys * 2,
            "task_id": [k.split("#")[0] for k in keys] * 2,
            "metric": "steps",
            "value": np.concatenate([par, par + gain]),
        }
    )


@pytest.mark.parametrize("seed", range(4))
def test_a_verdict_and_the_interval_beside_it_agree(seed: int) -> None:
    """The verdict's interval is the one-sided test's (1 - 2 alpha), Bonferroni-adjusted over
    the row's family; improved / regressed never sit beside an interval holding 0."""
    out = compare_scores(_skewed(200, seed), candidates="C", parent="P", by=["task_id"],
                         n_resamples=500)  # fmt: skip
    for row in out.iter_rows(named=True):
        assert row["ci_adj_level"] == pytest.approx(1 - 0.1 / row["family_size"])
        assert row["ci_adj_low"] <= row["mean_diff"] <= row["ci_adj_high"]
        lo, hi = -row["ci_adj_high"], -row["ci_adj_low"]  # oriented: steps are minimized
        if row["verdict"] == "improved":
            assert lo > 0
        if row["verdict"] == "regressed":
            assert hi < 0
        if row["p_holm"] < 0.05 and lo <= 0:
            assert row["verdict"] == "inconclusive"
            assert "the test and the interval disagree" in row["verdict_note"]
    overall = out.filter(pl.col("level") == "overall").row(0, named=True)
    assert overall["p_mcnemar"] < 1e-6  # most pairs improved: the sign test rejects
    # the verdict tests the mean, which got worse: its test does not reject
    assert overall["test"] == "bootstrap percentile" and overall["p_value"] > 0.5
    assert overall["mean_diff"] > 0  # steps are minimized: worse
    assert overall["verdict"] == ("regressed" if overall["p_worse"] < 0.05 else "inconclusive")
    # a family of 4 tasks: the per-task interval is wider than the unadjusted one
    task = out.filter(pl.col("level") == "task_id").row(0, named=True)
    assert task["ci_adj_low"] <= task["ci_low"] and task["ci_adj_high"] >= task["ci_high"]


def test_the_old_interval_name_warns_and_gives_the_same_rows() -> None:
    """``ci="bootstrap"`` is the deprecated name of ``percentile`` (issue 30): same rows."""
    frame = _frame()
    new = compare_scores(frame, candidates=["A", "B"], parent=PARENT, ci="percentile")
    with pytest.warns(DeprecationWarning, match="ci='bootstrap' is deprecated"):
        old = compare_scores(frame, candidates=["A", "B"], parent=PARENT, ci="bootstrap")  # type: ignore[arg-type]
    assert old.equals(new)


def test_a_dropped_pair_of_a_zero_one_metric_spans_zero_to_one() -> None:
    """Issue 40: the candidate 1.0, the parent's only key errored (left out): had it counted,
    the parent's value was 0 or 1, so the difference lies in [0, 1], not [0, 0]; the test is
    still named as a 0/1 metric's."""
    scores = pl.DataFrame(
        {
            "run_id": ["c", "p"],
            "key": ["k", "k"],
            "metric": ["outcome", "outcome"],
            "value": [1.0, None],
            "skip_reason": [None, "errored"],
        }
    )
    row = compare_scores(scores, candidates="c", parent="p").row(0, named=True)
    assert (row["n_pairs"], row["n_dropped"]) == (0, 1)
    assert (row["diff_if_drops_min"], row["diff_if_drops_max"]) == (0.0, 1.0)
    assert "between 0.0 (worst for the candidate) and 1.0 (best)" in row["drop_note"]
    assert row["test"] == "exact mcnemar"
    # a numeric metric keeps the range it was seen in
    steps = scores.with_columns(metric=pl.lit("latency"), value=pl.Series([3.0, None]))
    more = pl.DataFrame({"run_id": ["c", "p"], "key": ["j", "j"], "metric": "latency",
                         "value": [5.0, 9.0], "skip_reason": [None, None]})  # fmt: skip
    row = compare_scores(pl.concat([steps, more]), candidates="c", parent="p").row(0, named=True)
    assert row["test"] != "exact mcnemar" and row["diff_if_drops_max"] is not None


@pytest.mark.parametrize("metric", ["match", "includes", "choice", "f1", "model_graded_qa",
                                    "accuracy"])  # fmt: skip
def test_inspect_scorers_are_higher_is_better_by_inspects_convention(metric: str) -> None:
    """Issue 40: Inspect's built-in scorers get a direction (and so a verdict), named as the
    harness's convention; an explicit direction still wins."""
    from hylo_analytics.metrics import resolve_directions

    assert resolve_directions([metric]) == {metric: ("maximize", "convention")}
    assert resolve_directions([metric], explicit={metric: "minimize"})[metric][0] == "minimize"
    keys = [f"k{i}" for i in range(40)]
    scores = pl.DataFrame(
        {
            "run_id": ["c"] * 40 + ["p"] * 40,
            "key": keys * 2,
            "metric": metric,
            "value": [1.0] * 40 + [1.0] * 20 + [0.0] * 20,
        }
    )
    row = compare_scores(scores, candidates="c", parent="p").row(0, named=True)
    assert (row["direction"], row["direction_source"], row["verdict"]) == (
        "maximize", "convention", "improved")  # fmt: skip


def _errored_pair(epochs: int = 1) -> pl.DataFrame:
    """A candidate solving 40 of 60 keys; the parent solving 30, and erroring on 15 more
    (with ``epochs`` 2, one of a key's two epochs errors on 5 keys and the other does not)."""
    rows = []
    for k in range(60):
        for e in range(epochs):
            err = 30 <= k < 45 if e == 0 else (30 <= k < 35)
            rows.append({"run_id": "c", "key": f"k{k}", "epoch": e, "metric": "success",
                         "value": float(k < 40), "errored": False})  # fmt: skip
            rows.append({"run_id": "p", "key": f"k{k}", "epoch": e, "metric": "success",
                         "value": None if err else float(k < 30), "errored": err})  # fmt: skip
    return pl.DataFrame(rows)


@pytest.mark.parametrize("epochs", [1, 2])
@pytest.mark.parametrize("errors", ["failure", "exclude"])
def test_the_verdict_under_the_other_errors_policy_is_computed(epochs: int, errors: str) -> None:
    """Issue 40: each row carries its sides' errored keys and the verdict, difference and p
    under the other policy, equal to comparing under it (the patterns relabelled; a key with
    only some epochs errored is paired a second time)."""
    scores = _errored_pair(epochs)
    other = "exclude" if errors == "failure" else "failure"
    got = compare_scores(scores, candidates="c", parent="p", errors=errors).row(0, named=True)
    want = compare_scores(scores, candidates="c", parent="p", errors=other).row(0, named=True)
    # keys with an errored epoch: 30-44 (with two epochs, 35-44 have a valid one too)
    assert got["n_errored_parent"] == 15 and got["n_errored_candidate"] == 0
    assert got["errors_other"] == other
    assert got["verdict_other"] == want["verdict"]
    assert got["mean_diff_other"] == pytest.approx(want["mean_diff"], abs=1e-12)
    assert got["p_verdict_other"] == pytest.approx(want["p_verdict"], rel=1e-9)
    assert want["verdict_other"] == got["verdict"]  # and back
    if got["verdict"] != got["verdict_other"]:
        assert got["errors_note"].startswith("the verdict rests on harness errors")
    else:
        assert "the verdict is the same under" in got["errors_note"]


def test_no_errored_key_no_note() -> None:
    scores = _errored_pair().with_columns(errored=pl.lit(False), value=pl.col("value").fill_null(0))
    row = compare_scores(scores, candidates="c", parent="p").row(0, named=True)
    assert (row["n_errored_parent"], row["errors_note"], row["verdict_other"]) == (0, None, None)
