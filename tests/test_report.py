"""The HTML report: its statistics against golden values, its frames, and the page itself."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics import report
from hylo_analytics.cli import main
from hylo_analytics.compare import mcnemar_exact

PARENT = "run-octo-ft-1.0.0-0000"
CANDIDATE = "run-octo-ft-1.2.0-rc1-0002"


# -- statistics: golden values from statsmodels, pinned once --------------------------------


def test_wilson_ci_matches_statsmodels() -> None:
    frame = pl.DataFrame({"k": [7.0, 0.0, 12.0, 0.0], "n": [20.0, 12.0, 12.0, 0.0]})
    low, high = report.wilson_ci(pl.col("k"), pl.col("n"))
    out = frame.select(low.alias("lo"), high.alias("hi"))
    # statsmodels proportion_confint(k, n, method="wilson")
    assert out["lo"].to_list()[:3] == pytest.approx([0.18119182410108203, 0.0, 0.7575059933447589])
    assert out["hi"].to_list()[:3] == pytest.approx([0.5671457233147638, 0.24249400665524096, 1.0])
    assert out.row(3) == (None, None)  # nothing scored: no interval, not [0, 0]


def test_paired_diff_ci_bonett_price() -> None:
    frame = pl.DataFrame({"b": [7, 0, 0, 20], "c": [2, 0, 20, 0], "n": [20, 20, 20, 20]})
    low, high = report.paired_diff_ci(pl.col("b"), pl.col("c"), pl.col("n"))
    out = frame.select(low.alias("lo"), high.alias("hi"))
    # (b+1)/(n+2) - (c+1)/(n+2) ± z sqrt((p12 + p21 - d^2) / (n+2)), computed by hand
    assert out.row(0) == pytest.approx((-0.0525248416458543, 0.507070296191309))
    # no discordant pairs: still an interval around 0, not a point
    assert out.row(1) == pytest.approx((-0.12599125675906162, 0.12599125675906162))
    lo, hi = out["lo"].to_list(), out["hi"].to_list()
    assert all(-1.0 <= a <= b <= 1.0 for a, b in zip(lo, hi, strict=True))
    assert hi[2] < 0 < lo[3]


def test_mcnemar_two_sided_matches_statsmodels() -> None:
    b = np.array([7, 0, 12, 3, 0, 1])
    c = np.array([2, 10, 0, 3, 0, 0])
    # statsmodels.stats.contingency_tables.mcnemar(table, exact=True).pvalue
    expected = [0.1796875, 0.001953125, 0.00048828125, 1.0, 1.0, 1.0]
    assert report.mcnemar_two_sided(b, c).tolist() == pytest.approx(expected)
    # twice the smaller one-sided tail of the package's one-sided test
    assert report.mcnemar_two_sided(np.array([9]), np.array([3]))[0] == pytest.approx(
        2 * mcnemar_exact(9, 3)
    )


def test_interim_verdicts() -> None:
    frame = pl.DataFrame(
        {
            "diff": [0.3, -0.3, 0.01, 0.2, 0.3],
            "ci_low": [0.1, -0.5, -0.05, -0.1, 0.1],
            "ci_high": [0.5, -0.1, 0.08, 0.5, 0.5],
            "p_adjusted": [0.01, 0.01, 0.9, 0.3, 0.06],
        }
    )
    assert report.interim_verdicts(frame).to_list() == [
        "improved",
        "regressed",
        "unchanged",
        "inconclusive",
        "inconclusive",
    ]


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
    assert (tasks["p_adjusted"] >= tasks["p_value"]).all()
    assert set(tasks["verdict"]) <= {"improved", "regressed", "unchanged", "inconclusive"}

    h = frames["headline"].row(0, named=True)
    assert h["n_pairs"] == tasks["n_pairs"].sum()
    assert h["candidate_wins"] == tasks["candidate_wins"].sum()
    expected_p = report.mcnemar_two_sided(
        np.array([h["candidate_wins"]]), np.array([h["parent_wins"]])
    )[0]
    assert h["p_value"] == pytest.approx(expected_p)
    counts = tasks["verdict"].value_counts()
    for verdict, n in counts.iter_rows():
        assert h[f"tasks_{verdict}"] == n


def test_report_frames_runs_coverage_latency(frames: dict[str, pl.DataFrame]) -> None:
    runs = frames["runs"]
    assert runs.height == 3
    assert runs.filter(pl.col("role") == "candidate")["run"].to_list() == [CANDIDATE]
    assert (runs["ci_low"] <= runs["success"]).all() and (runs["success"] <= runs["ci_high"]).all()
    assert (runs["n_scored"] < runs["n_total"]).all()  # the sample has abstentions, kept apart
    coverage = frames["coverage"]
    assert set(coverage["reason"]) == {"scored", "abstained"}
    assert coverage["n"].sum() == 2 * 3 * 200
    assert set(frames["latency"]["run"]) == {CANDIDATE, PARENT}


def test_report_frames_errors_name_the_problem(sample_store: ha.Store) -> None:
    with pytest.raises(ValueError, match=r"candidate run 'nope' is not in the store"):
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
    for task in frames["tasks"]["task_id"]:
        assert f"<td>{task}</td>" in page
    assert page.count('class="verdict ') == frames["tasks"].height


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
            "-o",
            str(out),
        ]
    )
    assert code == 0
    page = out.read_text()
    assert CANDIDATE in page and "Per task" in page


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
    assert "candidate run 'nope' is not in the store" in capsys.readouterr().err


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
    assert path.read_text().count("<svg") == 7


def test_paired_stats_accept_unsigned_counts() -> None:
    frame = pl.DataFrame(
        {"candidate_wins": [0], "parent_wins": [10], "ties": [10], "n_pairs": [20]},
        schema=dict.fromkeys(("candidate_wins", "parent_wins", "ties", "n_pairs"), pl.UInt32),
    )
    out = report._with_paired_stats(frame).row(0, named=True)
    assert out["diff"] == pytest.approx(-0.5)
    assert out["ci_high"] < 0
    assert out["p_value"] == pytest.approx(0.001953125)  # statsmodels mcnemar exact, b=0 c=10
