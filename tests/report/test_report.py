"""The HTML report: its frames equal Store.compare's and aggregate's numbers, and the page."""

from __future__ import annotations

import html
import re
from pathlib import Path

import polars as pl
import pytest
from scipy import stats as scipy_stats

import hylo_analytics as ha
from hylo_analytics import report
from hylo_analytics.aggregate import aggregate_scores
from hylo_analytics.cli import main
from hylo_analytics.stats import mcnemar_p

PARENT = "run-octo-ft-1.0.0-0000"
CANDIDATE = "run-octo-ft-1.2.0-rc1-0002"


# -- frames ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def frames(sample_store: ha.Store) -> dict[str, pl.DataFrame]:
    return report.report_frames(sample_store, CANDIDATE, PARENT)


def test_report_frames_agree_with_the_scores(
    sample_store: ha.Store, frames: dict[str, pl.DataFrame]
) -> None:
    tasks = frames["tasks"]
    assert tasks.height == 10
    assert (
        tasks["candidate_wins"] + tasks["parent_wins"] + tasks["ties"] == tasks["n_pairs"]
    ).all()
    # recount one task's pairs in polars, independently of the SQL
    scores = sample_store.table("scores").filter(pl.col("metric") == "success").collect()
    task = "tabletop/pour_cup"

    def side(run: str) -> pl.DataFrame:
        return scores.filter((pl.col("run_id") == run) & (pl.col("task_id") == task)).select(
            "key", pl.col("value").alias(run)
        )

    both = side(CANDIDATE).join(side(PARENT), on="key").drop_nulls()
    row = tasks.filter(pl.col("task_id") == task).row(0, named=True)
    assert row["n_pairs"] == both.height
    assert row["candidate_wins"] == (both[CANDIDATE] > both[PARENT]).sum()
    assert row["parent_wins"] == (both[CANDIDATE] < both[PARENT]).sum()
    assert row["diff"] == pytest.approx((both[CANDIDATE] - both[PARENT]).mean())
    assert row["ci_low"] <= row["diff"] <= row["ci_high"]
    # the p that decided: the adjusted one-sided p in the direction of the verdict
    better = tasks.filter(pl.col("verdict") != "regressed")
    assert (better["p_adjusted"] >= better["p_value"]).all()
    worse = tasks.filter(pl.col("verdict") == "regressed")
    assert (worse["p_adjusted"] >= worse["p_worse"]).all()
    assert set(tasks["verdict"]) <= {"improved", "regressed", "unchanged", "inconclusive"}

    h = frames["headline"].row(0, named=True)
    assert h["n_pairs"] == tasks["n_pairs"].sum()
    assert h["candidate_wins"] == tasks["candidate_wins"].sum()
    # the verdict's test, Tango's score test at 0: (b - c) / sqrt(b + c) against the normal
    b, c = h["candidate_wins"], h["parent_wins"]
    assert h["p_value"] == pytest.approx(float(scipy_stats.norm.sf((b - c) / (b + c) ** 0.5)))
    expected_p = mcnemar_p([b], [c], alternative="greater")
    assert h["p_mcnemar"] == pytest.approx(expected_p[0])
    counts = tasks["verdict"].value_counts()
    for verdict, n in counts.iter_rows():
        assert h[f"tasks_{verdict}"] == n


def test_report_numbers_are_store_compare_numbers(
    sample_store: ha.Store, frames: dict[str, pl.DataFrame]
) -> None:
    # the same store, the same call the report documents: overall and per task
    cmp = sample_store.compare(CANDIDATE, PARENT, metrics=["success"], by=["task_id"])
    assert frames["comparison"].equals(cmp)
    per_task = cmp.filter(pl.col("level") == "task_id").sort("task_id")
    tasks = frames["tasks"].sort("task_id")
    pairs = {
        "task_id": "task_id",
        "n_pairs": "n_pairs",
        "candidate_wins": "candidate_wins",
        "parent_wins": "parent_wins",
        "ties": "ties",
        "n_dropped": "n_dropped",
        "mean_candidate": "candidate_rate",
        "mean_parent": "parent_rate",
        "mean_diff": "diff",
        "ci_low": "ci_low",
        "ci_high": "ci_high",
        "p_value": "p_value",
        "p_verdict": "p_adjusted",
        "verdict": "verdict",
    }
    for theirs, ours in pairs.items():
        assert tasks[ours].to_list() == per_task[theirs].to_list(), ours
    overall = cmp.filter(pl.col("level") == "overall").row(0, named=True)
    h = frames["headline"].row(0, named=True)
    for theirs, ours in pairs.items():
        if theirs != "task_id":
            assert h[ours] == overall[theirs], ours
    assert h["verdict_rule"] == "statistical"
    # the sample has a clear improvement overall and pour_cup regresses (synth's design)
    assert h["verdict"] == "improved"
    assert tasks.filter(pl.col("task_id") == "tabletop/pour_cup")["verdict"].item() == "regressed"


def test_report_rates_are_aggregate_rates(
    sample_store: ha.Store, frames: dict[str, pl.DataFrame]
) -> None:
    agg = aggregate_scores(sample_store, by=["run_id"], metrics=["success"]).sort("run_id")
    runs = frames["runs"].sort("run")
    assert runs["run"].to_list() == agg["run_id"].to_list()
    assert runs["success"].to_list() == agg["mean"].to_list()
    assert runs["ci_low"].to_list() == agg["ci_low"].to_list()
    assert runs["ci_high"].to_list() == agg["ci_high"].to_list()
    assert runs["n_scored"].to_list() == agg["n_valid"].to_list()
    assert set(runs["ci_method"]) == {"wilson"}
    per_task = (
        aggregate_scores(sample_store, by=["run_id", "task_id"], metrics=["success"])
        .filter(pl.col("run_id").is_in([CANDIDATE, PARENT]))
        .sort("run_id", "task_id")
    )
    ts = frames["task_success"].sort("run", "task_id")
    assert ts["success_rate"].to_list() == per_task["mean"].to_list()
    assert ts["ci_low"].to_list() == per_task["ci_low"].to_list()
    assert frames["task_success"]["run"][0] == PARENT  # parent first: the chart's colour order


@pytest.mark.slow
def test_report_uses_the_rule_it_is_given_and_says_so(sample_store: ha.Store) -> None:
    wide = ha.StatisticalRule(margin=0.85, alpha=0.01)
    rep = ha.build_report(sample_store, CANDIDATE, PARENT, rule=wide)
    cmp = sample_store.compare(CANDIDATE, PARENT, metrics=["success"], by=["task_id"], rule=wide)
    assert rep.tasks.sort("task_id")["verdict"].to_list() == (
        cmp.filter(pl.col("level") == "task_id").sort("task_id")["verdict"].to_list()
    )
    # no per-task difference is significant at 0.01 after Holm, and every 98% CI lies
    # within +-85 points: unchanged under this (very wide) margin, except the clear ones
    assert set(rep.tasks["verdict"]) <= {"unchanged", "improved", "regressed"}
    assert "unchanged" in set(rep.tasks["verdict"])
    page = rep.to_html()
    assert wide.describe() in html.unescape(page)
    noise = ha.RelativeNoiseRule(noise=0.25)
    rep = ha.build_report(sample_store, CANDIDATE, PARENT, rule=noise)
    assert rep.headline["verdict_rule"] == "relative_noise"
    t = rep.tasks.filter(pl.col("task_id") == "tabletop/push_button").row(0, named=True)
    assert t["verdict"] == "improved"  # +60 points, 12 wins to 0: above the noise and the test
    close = rep.tasks.filter(pl.col("task_id") == "tabletop/close_drawer").row(0, named=True)
    # far above +25 % but 6:0 is not significant after Holm over 10 tasks: not "improved"
    assert close["verdict"] == "inconclusive"
    assert "relative noise rule" in rep.to_html()


def test_describe_rule() -> None:
    rule = ha.StatisticalRule(threshold=0.05, alpha=0.1, margin=0.02)
    text = report.describe_rule(rule)
    assert text == rule.describe()
    assert "Holm-adjusted within its family) is < 0.1" in text and "+-0.02" in text
    assert "5% of the parent's mean" in report.describe_rule(ha.RelativeNoiseRule(noise=0.05))


def test_report_frames_runs_coverage_latency(frames: dict[str, pl.DataFrame]) -> None:
    runs = frames["runs"]
    assert runs.height == 3
    assert runs.filter(pl.col("role") == "candidate")["run"].to_list() == [CANDIDATE]
    assert (runs["ci_low"] <= runs["success"]).all() and (runs["success"] <= runs["ci_high"]).all()
    assert (runs["n_scored"] < runs["n_total"]).all()  # the sample has abstentions, kept apart
    coverage = frames["coverage"]
    assert set(coverage["reason"]) == {"scored", "episode errored"}
    assert coverage["n"].sum() == 2 * 3 * 200
    assert set(frames["latency"]["run"]) == {CANDIDATE, PARENT}


def test_report_frames_errors_name_the_problem(sample_store: ha.Store) -> None:
    with pytest.raises(ValueError, match=r"no run matches 'nope'"):
        report.report_frames(sample_store, "nope", PARENT)
    with pytest.raises(ValueError, match=r"metric 'steps' is not binary"):
        report.report_frames(sample_store, CANDIDATE, PARENT, metric="steps")
    with pytest.raises(ValueError, match=r"share no scored key for 'no_such_metric'"):
        report.report_frames(sample_store, CANDIDATE, PARENT, metric="no_such_metric")


# -- the page -------------------------------------------------------------------------------


def test_report_page_is_self_contained_and_has_the_numbers(
    frames: dict[str, pl.DataFrame],
) -> None:
    page = report.render_report(frames)
    assert page.startswith("<!doctype html>")
    # nothing fetched from the network: no remote script, stylesheet, image or font
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(http" not in page
    assert page.count("<svg") == 7  # every chart inlined
    h = frames["headline"].row(0, named=True)
    assert f"{h['candidate_rate'] * 100:.1f}%" in page
    assert f"{h['parent_rate'] * 100:.1f}%" in page
    assert f"{h['diff'] * 100:+.1f}" in page
    assert f"{h['candidate_wins']} / {h['parent_wins']} / {h['ties']}" in page
    assert report.summary_sentence(h) in page
    for task in frames["tasks"]["task_id"]:  # a task with flipped keys links to them
        assert f"<td>{task}</td>" in page or f'">{task}</a></td>' in page
    assert page.count('class="verdict ') == frames["tasks"].height


@pytest.mark.slow
def test_report_cli_writes_the_page(sample_store: ha.Store, tmp_path: Path) -> None:
    out = tmp_path / "sub" / "report.html"
    code = main(
        [
            "report",
            "--store",
            str(sample_store.root),
            "--candidate",
            CANDIDATE,
            "--parent",
            PARENT,
            "--margin",
            "0.05",
            "--alpha",
            "0.01",
            "-o",
            str(out),
        ]
    )
    assert code == 0
    page = out.read_text()
    assert CANDIDATE in page and "Per task" in page
    rule = ha.StatisticalRule(margin=0.05, alpha=0.01)
    assert rule.describe() in html.unescape(page)


def test_report_cli_unknown_run_exits_2(
    sample_store: ha.Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "report",
            "--store",
            str(sample_store.root),
            "--candidate",
            "nope",
            "--parent",
            PARENT,
            "-o",
            str(tmp_path / "r.html"),
        ]
    )
    assert code == 2
    assert "no run matches 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_comparison_report_displays(sample_store: ha.Store, tmp_path: Path) -> None:
    rep = ha.build_report(sample_store, CANDIDATE, PARENT)
    h = rep.headline
    text = repr(rep)
    assert text.startswith(f"ComparisonReport(candidate={CANDIDATE!r}, parent={PARENT!r}")
    assert f"n_pairs={h['n_pairs']}" in text and f"verdict={h['verdict']!r}" in text
    assert str(rep) == report.summary_sentence(h)
    fragment = rep._repr_html_()
    assert fragment.startswith('<div class="hylo-report">')
    assert "<svg" not in fragment  # the notebook view stays light: tables only
    assert "body {" not in fragment and "\n.hylo-report table" in fragment  # styles are scoped
    assert fragment.count('class="verdict ') == rep.tasks.height
    path = rep.save(tmp_path / "r.html")
    assert path.read_text().count("<svg") == 9  # with the front and the shrunk rates


def test_the_page_names_the_interval_and_the_sidedness_it_used(
    frames: dict[str, pl.DataFrame],
) -> None:
    """The words match the numbers (issue 27): the interval named is the ``ci_method`` the
    comparison used, and a p computed two-sided (unknown direction) is called two-sided."""
    h = frames["headline"].row(0, named=True)
    assert h["ci_method"] == "tango" and h["ci_text"].startswith("Tango's score")
    assert h["p_sides"] == "one-sided"
    # the test named is the one the interval inverts: Tango's score test beside Tango's CI
    assert h["test"] == "tango score"
    assert "one-sided Tango score test p" in report.summary_sentence(h)
    both = {
        **h,
        "p_sides": "two-sided",
        "ci_text": "a percentile bootstrap 95% interval",
        "test": "bootstrap percentile",
    }
    sentence = report.summary_sentence(both)
    assert "two-sided percentile-bootstrap test of the mean p" in sentence
    assert "one-sided" not in sentence
    page = report.render_report({**frames, "headline": pl.DataFrame([both])})
    assert "two-sided percentile-bootstrap test of the mean (the metric" in page
    assert "McNemar" not in page


def test_a_regression_names_the_p_that_decided_it(frames: dict[str, pl.DataFrame]) -> None:
    """A regressed verdict is decided by the test that the candidate is worse: the sentence
    and the card show that p, not the p that it is better (which is near 1 there)."""
    h = frames["headline"].row(0, named=True)
    worse = {**h, "verdict": "regressed", "p_value": 0.99, "p_worse": 0.012}
    sentence = report.summary_sentence(worse)
    assert "p = 0.012 that the candidate is worse" in sentence and "0.990" not in sentence
    page = report.render_report({**frames, "headline": pl.DataFrame([worse])})
    assert "p = 0.012 (worse)" in page


def test_the_flipped_episodes_per_task_are_the_wins_and_losses(
    frames: dict[str, pl.DataFrame],
) -> None:
    flips, tasks = frames["flips"], frames["tasks"]
    counted = flips.group_by("task_id").agg(
        fixes=pl.col("change").is_in(["fix", "better"]).sum(),
        regressions=pl.col("change").is_in(["regression", "worse"]).sum(),
    )
    joined = tasks.join(counted, on="task_id", how="left").fill_null(0)
    assert joined["candidate_wins"].to_list() == joined["fixes"].to_list()
    assert joined["parent_wins"].to_list() == joined["regressions"].to_list()
    assert flips.height > 0 and flips["candidate_episodes"].str.len_chars().min() > 0
    page = report.render_report(frames)
    assert "<h2>Episodes that flipped</h2>" in page
    for i, task in enumerate(flips["task_id"].unique(maintain_order=True)):
        # the per-task row links to the task's flips, which list each key
        assert f'<a href="#flips-{i}">{task}</a>' in page
        assert f'<h3 id="flips-{i}">{task} ' in page
    for key in flips["key"]:
        assert f"<td>{html.escape(key)}</td>" in page


def test_the_report_object_holds_the_flips(sample_store: ha.Store) -> None:
    flips = sample_store.report(CANDIDATE, PARENT).flips
    assert flips.height > 0 and set(flips["change"]) <= {"fix", "regression"}
