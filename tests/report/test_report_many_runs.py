"""The report at N = 2,000 runs: the runs section shows the pair and the runs around it,
says how many of how many, and the page stays small (it failed in vl-convert before)."""

from __future__ import annotations

import re

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics import charts
from hylo_analytics.report._runs import BEST, FRONT, MAX_RUNS, NEAR, shown_runs

C, P = "version=1.2.0-rc1", "version=1.0.0"


def _runs(n: int, parent: int, candidate: int) -> pl.DataFrame:
    """``n`` runs in natural order: distinct success and cost (two permutations)."""
    return pl.DataFrame(
        {
            "run": [f"r{i:02d}" for i in range(n)],
            "success": [0.5 + 0.01 * ((i * 7) % n) for i in range(n)],
            "mean_inference_s": [1.0 + 0.01 * ((i * 11) % n) for i in range(n)],
            "role": [
                "parent" if i == parent else "candidate" if i == candidate else None
                for i in range(n)
            ],
        }
    )


def test_shown_runs_are_the_pair_its_neighbours_the_best_worst_and_front() -> None:
    runs = _runs(40, parent=0, candidate=20)
    rate = dict(zip(runs["run"], runs["success"], strict=True))
    by_rate = sorted(rate, key=rate.__getitem__)
    front = runs.filter(charts.pareto_front(runs, cost="mean_inference_s", value="success"))
    front_top = front.sort("success", descending=True)["run"].head(FRONT).to_list()
    near = {f"r{i:02d}" for p in (0, 20) for i in range(p - NEAR, p + NEAR + 1) if i >= 0}
    expected = near | set(by_rate[:BEST]) | set(by_rate[-BEST:]) | set(front_top)
    shown = shown_runs(runs)
    assert set(shown["run"]) == expected
    assert shown["run"].to_list() == sorted(expected)  # natural order kept
    why = dict(zip(shown["run"], shown["shown_for"], strict=True))
    # r00, the parent: the worst and the cheapest (cost and success both start at r00)
    assert why["r00"] == "next to the pair, 5 worst, Pareto front"
    assert why["r20"] is not None and why["r20"].startswith("next to the pair")
    assert f"{BEST} best" in why[by_rate[-1]] and f"{BEST} worst" in why[by_rate[0]]
    assert all("Pareto front" in why[r] for r in front_top)
    assert shown.filter(pl.col("run").is_in(front["run"].to_list()))["on_front"].all()


def test_few_runs_are_all_shown_without_a_note() -> None:
    runs = _runs(MAX_RUNS, parent=3, candidate=7)
    shown = shown_runs(runs)
    assert shown["run"].to_list() == runs["run"].to_list()
    assert shown["shown_for"].is_null().all()


@pytest.mark.slow
def test_the_report_of_2000_runs_is_bounded(many_runs_store: ha.Store) -> None:
    report = many_runs_store.report(C, P)
    runs = report.frames["runs"]
    assert runs.height == 2000
    # the frame keeps every run, in natural order (2.3.0 before 2.294.0)
    versions = runs["agent_version"].to_list()
    assert versions[:5] == ["1.0.0", "1.1.0", "1.2.0-rc1", "2.3.0", "2.4.0"]
    assert versions.index("2.294.0") > versions.index("2.30.0")
    page = report.to_html()
    assert len(page) < 300_000, f"{len(page):,} bytes"
    shown = shown_runs(runs)
    assert 2 + 2 * NEAR <= shown.height <= MAX_RUNS
    assert f"Showing {shown.height:,} of 2,000 runs of hylo-sim/tabletop" in page
    assert "hylo-analytics runs --all" in page
    section = page[page.index("<h2>Runs, coverage and cost</h2>") :]
    table = section[: section.index("</table>")]
    assert table.count("<tr>") == shown.height + 1  # and the header
    # both charts draw the shown runs only, and say so
    assert section.count(f"{shown.height:,} of 2,000 runs: see the table") == 2
    best = runs.sort("success", descending=True, maintain_order=True)["run"].head(BEST)
    worst = runs.sort("success", maintain_order=True)["run"].head(BEST)  # ties: the first
    for run in [*best, *worst, "run-octo-ft-2.3.0-0003", "run-octo-ft-2.4.0-0004"]:
        assert f"<td>{run}<br>" in table, run
    at = [table.index(f"<td>{run}<br>") for run in shown["run"]]
    assert at == sorted(at)  # in natural order


def test_the_sample_report_shows_every_run(sample_store: ha.Store) -> None:
    page = sample_store.report(C, P).to_html()
    assert 'id="runs-shown"' not in page
    section = page[page.index("<h2>Runs, coverage and cost</h2>") :]
    assert len(re.findall(r"<tr>", section[: section.index("</table>")])) == 3 + 1
