"""The report's trend section: the trend's own figures, its flips capped and counted, the
chart inlined, hostile names inert, and ``report --trend`` adding it."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest
from hostile_data import CANDIDATE, PARENT, assert_nothing_injected, write_hostile_runs

import hylo_analytics as ha
from hylo_analytics.cli import main
from hylo_analytics.report import build_report
from hylo_analytics.report.trend import agent_trend, trend_frames, trend_section


def _plain(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<svg.*?</svg>", "", html, flags=re.S)))


@pytest.mark.slow
def test_the_section_shows_the_trends_figures(sample_store: ha.Store) -> None:
    trend = agent_trend(sample_store.parquet, "version=1.2.0-rc1")
    assert trend.versions == ("1.0.0", "1.1.0", "1.2.0-rc1")
    html = trend_section(trend_frames(trend))
    assert html.count("<svg") == 1 and "<h2>Trend over versions</h2>" in html
    text = _plain(html)
    assert trend.describe() in text
    reg = trend.regressions.filter("regressed").row(0, named=True)
    assert f"{reg['p_worse']:.2g}, {reg['p_adjusted']:.2g}" in text
    assert f"({reg['ci_adj_level']:.1%})" in text  # the interval the verdict used, labelled
    assert "(all)" in text and text.count("regression") >= trend.flips.height
    capped = _plain(trend_section(trend_frames(trend, max_flips=3)))
    assert f"the first 3 of {trend.flips.height}" in capped
    page = build_report(
        sample_store.parquet, "version=1.2.0-rc1", "version=1.0.0", trend=trend
    ).to_html()
    assert "Trend over versions" in page and trend_section({}) == ""


@pytest.mark.slow
def test_report_trend_from_the_cli_with_hostile_names(tmp_path: Path) -> None:
    write_hostile_runs(tmp_path / "logs")
    store = ha.open_store(tmp_path / "s")
    store.ingest(tmp_path / "logs", progress=False)
    out = tmp_path / "r.html"
    argv = ["report", "--store", str(store.root), "--candidate", CANDIDATE, "--parent",
            PARENT, "--trend", "-o", str(out)]  # fmt: skip
    assert main(argv) == 0
    page = out.read_text()
    assert "Trend over versions" in page
    assert_nothing_injected(page, scripts=0)
