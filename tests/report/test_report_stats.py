"""The report's sections of the issue-42 statistics: the cost-quality front, the shrunk rates."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from repeated_data import epochs_store

import hylo_analytics as ha
from hylo_analytics.report._stats import MAX_CHART, MAX_ROWS, MAX_SHRUNK, SMALL_N, stat_sections

PARENT = "run-octo-ft-1.0.0-0000"
CANDIDATE = "run-octo-ft-1.2.0-rc1-0002"


@pytest.fixture(scope="module")
def report(sample_store: ha.Store) -> ha.ComparisonReport:
    return sample_store.report(CANDIDATE, PARENT)


def test_the_front_is_store_paretos(sample_store: ha.Store, report: ha.ComparisonReport) -> None:
    runs = report.frames["runs"]["run"].to_list()
    front = sample_store.pareto(runs, cost="steps", policy="run_id")
    got = report.frames["pareto"]
    assert got["run"].to_list() == front.frame["policy"].to_list()
    assert got["p_front"].to_list() == front.frame["p_front"].to_list()
    assert got["on_front"].to_list() == front.frame["on_front"].to_list()
    assert got.filter(pl.col("on_front"))["run"].to_list()[0] == got["run"][0]  # front first


def test_the_page_shows_the_front_after_the_runs(report: ha.ComparisonReport) -> None:
    page = report.to_html()
    section = page[page.index("<h2>Cost-quality front</h2>") :]
    assert page.index("<h2>Runs, coverage and cost</h2>") < page.index("Cost-quality front")
    assert "P(on the front)" in section and "<svg" in section
    assert "bootstrap frequency, not a posterior probability" in section


def test_no_section_without_a_front() -> None:
    assert stat_sections({}) == ""
    one = pl.DataFrame({"policy": ["a"]})
    assert stat_sections({"pareto": one, "pareto_meta": pl.DataFrame({"level": [0.95]})}) == ""


@pytest.mark.slow
def test_the_front_of_2000_runs_is_bounded(many_runs_store: ha.Store) -> None:
    report = many_runs_store.report("version=1.2.0-rc1", "version=1.0.0")
    assert report.frames["pareto"].height == 2000
    page = report.to_html()
    section = page[page.index("<h2>Cost-quality front</h2>") :]
    table = section[: section.index("</table>")]
    assert table.count("<tr>") == MAX_ROWS + 1
    assert f"Showing {MAX_ROWS:,} of 2,000 runs" in section
    assert MAX_CHART < 2000


def test_the_shrunk_rates_are_store_shrinks(
    sample_store: ha.Store, report: ha.ComparisonReport
) -> None:
    want = sample_store.shrink([CANDIDATE, PARENT])
    got = report.frames["shrunk"]
    assert got.drop("label").equals(want)
    assert int(got["n"].min()) < SMALL_N  # type: ignore[arg-type]
    page = report.to_html()
    section = page[page.index("<h2>Per-task rates, pooled</h2>") :]
    table = section[: section.index("</table>")]
    assert table.count("<tr>") == min(got.height, MAX_SHRUNK) + 1
    assert "octo-ft 1.2.0-rc1" in table and "<svg" in section


def test_repeated_samples_where_keys_have_epochs(tmp_path: Path) -> None:
    store, _ = epochs_store(tmp_path, 3, 40, 4)
    report = store.report("run-0001", "run-0000")
    want = store.pass_at_k(["run-0001", "run-0000"])
    assert report.frames["pass_k"].drop("run").equals(want)
    page = report.to_html()
    section = page[page.index("<h2>Repeated samples</h2>") :]
    table = section[: section.index("</table>")]
    assert table.count("<tr>") == 2 * 2 + 1  # k = 1 and k = 4 of each run, and the header
    assert "epochs per key would halve its interval" in section and "<svg" in section


def test_no_repeated_samples_section_without_epochs(report: ha.ComparisonReport) -> None:
    assert "pass_k" not in report.frames
    assert "<h2>Repeated samples</h2>" not in report.to_html()
