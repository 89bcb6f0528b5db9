"""Every HTML the package writes, rendered over runs whose names are attacks, then parsed.

Charts (saved HTML and the notebook output), the report (page and notebook fragment) and every
serve page must show the names as text: no element or attribute of the corpus may appear,
and no ``<script>`` beyond the writer's own (``tests/hostile_data.py``).
"""

from __future__ import annotations

import json
import re
import time
import tracemalloc
import warnings
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl
import pytest
from hostile_data import (
    AGENT,
    BIG,
    CANDIDATE,
    CORPUS,
    PARENT,
    Elements,
    assert_nothing_injected,
    big_key,
    task_names,
    write_hostile_runs,
)

import hylo_analytics as ha
from hylo_analytics import charts
from hylo_analytics._html import attr, csp_hash, script_json, shorten, text


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[ha.Store, Path]:
    """A scored store of the two hostile runs, and the folder of their logs."""
    root = tmp_path_factory.mktemp("hostile")
    write_hostile_runs(root / "logs")
    store = ha.open_store(root / "store")
    store.ingest(root / "logs", progress=False)
    store.score()
    return store, root / "logs"


@pytest.fixture(scope="module")
def report(hostile: tuple[ha.Store, Path]) -> ha.ComparisonReport:
    return hostile[0].report(CANDIDATE, PARENT)


# -- the helpers ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", CORPUS)
def test_script_json_cannot_close_its_script_and_round_trips(value: str) -> None:
    encoded = script_json({"name": value})
    assert not re.search("[<>&\u2028\u2029]", encoded)
    assert json.loads(encoded) == {"name": value}


def test_text_escapes_markup_and_shows_hidden_characters() -> None:
    assert text('<b a="1">&') == "&lt;b a=&quot;1&quot;&gt;&amp;"
    assert text("a\u202eb\x1b[2J") == "a\\u202eb\\u001b[2J"
    assert text(None) == "" and text("{0} %s") == "{0} %s"
    assert attr("a\u202e\"'") == "a\u202e&quot;&#x27;"  # exact: a form value round-trips
    assert shorten("x" * 10, 4) == "xxx\u2026" and shorten("abc", 4) == "abc"


def test_csp_hash_is_the_sha256_a_browser_computes() -> None:
    # the example of the CSP spec: <script>alert('Hello, world.');</script>
    assert csp_hash("alert('Hello, world.');") == (
        "'sha256-qznLcsROx4GACP2dm0UCKCzCG+HiZ1guq6ZZDob/Tng='"
    )


# -- charts ---------------------------------------------------------------------------------


def _critical_difference() -> Any:
    """The diagram of the corpus's names as policies over hostile task names."""
    from hostile_data import task_names

    from hylo_analytics.compare import critical_difference_scores

    tasks = task_names(6)
    rows = pl.DataFrame(
        {
            "policy": [name for name in CORPUS for _ in tasks],
            "task_id": tasks * len(CORPUS),
            "metric": CORPUS[5],
            "value": [float((i * 7) % 11) for i in range(len(CORPUS) * len(tasks))],
        }
    )
    return charts.critical_difference_diagram(
        critical_difference_scores(rows, policy="policy", metric=CORPUS[5])
    )


def _charts(report: ha.ComparisonReport) -> dict[str, Any]:
    frames = report.frames
    tasks = frames["tasks"]
    return {
        "critical_difference": _critical_difference(),
        "paired_forest": charts.paired_forest(tasks, title=f"{CANDIDATE} vs {PARENT}"),
        "win_loss_bars": charts.win_loss_bars(tasks),
        "success_rate_by_task": charts.success_rate_by_task(
            frames["task_success"].drop("run").rename({"label": "run"}), run_label="run"
        ),
        "coverage_breakdown": charts.coverage_breakdown(
            frames["coverage"].with_columns(run=pl.col("label"))
        ),
        "metric_trend": charts.metric_trend(
            pl.DataFrame(
                {
                    "agent_version": CORPUS,
                    "value": [0.5] * 9,
                    "ci_low": [0.4] * 9,
                    "ci_high": [0.6] * 9,
                    "n": [10] * 9,
                }
            )
        ),
        "pass_k_curves": charts.pass_k_curves(
            pl.DataFrame(
                {
                    "run_id": [name for name in (BIG, *CORPUS[:5]) for _ in (1, 2)],
                    "k": [1, 2] * 6,
                    **{c: [0.5, 0.7] * 6 for c in ("pass_at_k", "pass_at_k_low", "pass_at_k_high")},
                    **{
                        c: [0.5, 0.3] * 6
                        for c in ("pass_hat_k", "pass_hat_k_low", "pass_hat_k_high")
                    },
                    "n_items": [10] * 12,
                    "n_items_short": [0, 1] * 6,
                    "ci_method": [CORPUS[6]] * 12,
                    "ci_level": [0.95] * 12,
                }
            ),
            title=CORPUS[0],
        ),
        "cost_vs_success": charts.cost_vs_success(
            pl.DataFrame(
                {
                    "run": [BIG, AGENT],
                    "cost": [1.0, 2.0],
                    "success": [0.5, 0.6],
                    "ci_low": [0.4, 0.5],
                    "ci_high": [0.6, 0.7],
                }
            )
        ),
        "pareto_intervals": charts.pareto_intervals(
            pl.DataFrame(
                {
                    "policy": [BIG, AGENT, *CORPUS],
                    "quality": [0.5, 0.6, *[0.1 * i for i in range(9)]],
                    "quality_low": 0.0,
                    "quality_high": 1.0,
                    "cost": [1.0, 2.0, *[1.0 + i for i in range(9)]],
                    "cost_low": 0.5,
                    "cost_high": 12.0,
                    "on_front": [True, True, *[i % 2 == 0 for i in range(9)]],
                    "p_front": 0.5,
                }
            ),
            quality=CORPUS[0],
            cost=CORPUS[6],
            log_cost=True,
        ),
        "shrinkage": charts.shrinkage(_hostile_shrinkage()),
        "calibration_intervals": charts.calibration_intervals(
            pl.DataFrame(
                {
                    "policy": [BIG, AGENT, *CORPUS],
                    "split": [CORPUS[i % 9] for i in range(11)],
                    **{c: 0.5 for c in ("estimate", "classical", "judge_only")},
                    **{c: 0.3 for c in ("low", "classical_low", "judge_only_low")},
                    **{c: 0.7 for c in ("high", "classical_high", "judge_only_high")},
                    "n_labelled": 20,
                    "n_unlabelled": 1000,
                    "effective_n": 30.0,
                }
            ),
            metric=CORPUS[0],
        ),
    }


def _hostile_shrinkage() -> pl.DataFrame:
    """``shrunk_rates`` of two hostile runs on hostile tasks and suites (two panels)."""
    from hylo_analytics.aggregate import shrunk_rates

    rows = [
        {"run_id": run, "benchmark_id": AGENT, "split": CORPUS[7], "task_id": task,
         "key": f"{task}#{e}", "metric": "success", "value": float(e <= i % 6)}
        for run in (PARENT, CANDIDATE) for i, task in enumerate(task_names(9)) for e in range(6)
    ]  # fmt: skip
    return shrunk_rates(pl.DataFrame(rows))


@pytest.mark.slow
def test_chart_html_embeds_every_name_as_data(report: ha.ComparisonReport, tmp_path: Path) -> None:
    for name, chart in _charts(report).items():
        page = charts.save(chart, tmp_path / f"{name}.html").read_text()
        assert_nothing_injected(page, scripts=2)  # the vega bundle and the embed call
        assert "\\u003c/script\\u003e" in page or name in ("metric_trend", "cost_vs_success")
        assert len(page) < 3_000_000, f"{name}: {len(page):,} characters"  # BIG is cut


def test_notebook_output_of_charts_is_escaped(report: ha.ComparisonReport) -> None:
    assert alt.renderers.active == "hylo"
    plain = alt.Chart(alt.Data(values=[{"a": "x"}])).mark_point()._repr_mimebundle_()
    benign = Elements((plain[0] if isinstance(plain, tuple) else plain)["text/html"])
    for chart in _charts(report).values():
        bundle = chart._repr_mimebundle_()
        page = (bundle[0] if isinstance(bundle, tuple) else bundle)["text/html"]
        assert_nothing_injected(page, scripts=benign.count("script"))
        assert "\\u003c/script\\u003e" in page or "</script><script" not in page


# -- the report -----------------------------------------------------------------------------


@pytest.mark.slow
def test_report_page_and_fragment(report: ha.ComparisonReport) -> None:
    page = report.to_html()
    assert_nothing_injected(page, scripts=0)
    assert_nothing_injected(report._repr_html_(), scripts=0)
    assert text(CANDIDATE) in page  # shown, as text
    assert "<h2>Cost-quality front</h2>" in page  # the new sections are covered too
    assert "<h2>Per-task rates, pooled</h2>" in page


# -- serve ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(hostile: tuple[ha.Store, Path]) -> Iterator[Any]:
    pytest.importorskip("starlette")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `httpx`")
        from starlette.testclient import TestClient
    from hylo_analytics.serve import create_app

    with TestClient(create_app(hostile[0].root), base_url="http://localhost") as c:
        yield c


def test_every_serve_page(client: Any, hostile: tuple[ha.Store, Path]) -> None:
    key = big_key(hostile[1])
    task = key.rsplit("#", 1)[0]
    pair = {"parent": PARENT, "candidate": CANDIDATE}
    for path, params in [
        ("/", {}),
        ("/", {"q": CORPUS[0]}),
        ("/compare", pair),
        ("/compare/task", {**pair, "task": task}),
        ("/episode", {**pair, "key": key}),
        ("/compare", {"parent": CORPUS[1], "candidate": CORPUS[0]}),  # 404 page quotes them
        ("/compare/task", {**pair, "task": CORPUS[2]}),
        ("/episode", {**pair, "key": CORPUS[0]}),
    ]:
        r = client.get(path, params=params)
        assert r.status_code in (200, 404), (path, r.status_code)
        images = "/compare/forest.svg" if path == "/compare" else None
        assert_nothing_injected(r.text, scripts=1, images=images)
        assert "Content-Security-Policy" in r.headers


def test_the_ranking_and_pooled_pages_and_their_charts(client: Any) -> None:
    """The ranking of hostile run ids and versions, its charts, the refusal of the one
    hostile agent and the pooled pick of it: names as text, never as markup."""
    for params in ({"policy": "run_id"}, {"policy": "agent_version"}, {"run": CORPUS[0]}):
        r = client.get("/rank", params=params)
        for _ in range(600):  # the first request waits 1 s, then says "computing"
            if 'data-pending="1"' not in r.text:
                break
            time.sleep(0.1)
            r = client.get("/rank", params=params)
        assert r.status_code in (200, 400, 404), (params, r.status_code)
        assert_nothing_injected(r.text, scripts=1, images="/rank/")
    refused = client.get("/rank")  # one agent: its name is quoted in the message
    assert refused.status_code == 400 and text(AGENT)[:20] in refused.text
    assert_nothing_injected(refused.text, scripts=1)
    ranked = client.get("/rank", params={"policy": "run_id"}).text
    assert text(PARENT) in ranked and text(CANDIDATE[:200]) in ranked
    for kind in ("strengths", "heatmap"):
        svg = client.get(f"/rank/{kind}.svg", params={"policy": "run_id"})
        assert svg.status_code == 200
        found = Elements(svg.text)
        assert not any("data-pwned" in a or any(k.startswith("on") for k in a)
                       for _t, a in found.tags), kind  # fmt: skip
        assert found.count("script") == 0 and "foreignObject" not in svg.text
    for params in ({"cost": "steps", "policy": "run_id"}, {"cost": "steps"}, {}):
        page = client.get("/pareto", params=params)
        assert page.status_code in (200, 400), (params, page.status_code)
        assert_nothing_injected(page.text, scripts=1, images="/pareto/")
    front = client.get("/pareto", params={"cost": "steps", "policy": "run_id"}).text
    assert text(PARENT) in front and text(CANDIDATE[:200]) in front
    for params in ({"policy": "run_id"}, {"policy": "agent_version"}, {}):
        page = client.get("/critical-difference", params=params)
        assert page.status_code in (200, 400), (params, page.status_code)
        assert_nothing_injected(page.text, scripts=1, images="/critical-difference/")
    cd_svg = client.get("/critical-difference/chart.svg", params={"policy": "run_id"})
    assert cd_svg.status_code == 200 and "foreignObject" not in cd_svg.text
    assert Elements(cd_svg.text).count("script") == 0
    for run in (PARENT, CANDIDATE):
        page = client.get("/shrink", params={"run": run})
        assert page.status_code == 200, (run[:40], page.status_code)
        assert_nothing_injected(page.text, scripts=1, images="/shrink/")
        chart = client.get("/shrink/chart.svg", params={"run": run})
        assert chart.status_code == 200 and "foreignObject" not in chart.text
    for params in ({}, {"trusted_source": "scorer:success", "baseline": PARENT}):
        page = client.get("/calibrate", params=params)
        assert page.status_code in (200, 400), (params, page.status_code)
        assert_nothing_injected(page.text, scripts=1)
    svg = client.get("/pareto/chart.svg", params={"cost": "steps", "policy": "run_id"})
    assert svg.status_code == 200
    found = Elements(svg.text)
    assert not any("data-pwned" in a or any(k.startswith("on") for k in a)
                   for _t, a in found.tags)  # fmt: skip
    assert found.count("script") == 0 and "foreignObject" not in svg.text
    pick = client.get("/pooled/pick", params={"parent": PARENT, "candidate": CANDIDATE})
    assert pick.status_code == 400 and "selector can spell" in pick.text  # an "=" in it
    assert_nothing_injected(pick.text, scripts=1)


def test_a_50_mb_field_is_cut_on_the_page_and_linked_whole(
    client: Any, hostile: tuple[ha.Store, Path]
) -> None:
    key = big_key(hostile[1])
    tracemalloc.start()
    r = client.get("/episode", params={"parent": PARENT, "candidate": CANDIDATE, "key": key})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert r.status_code == 200
    assert len(r.content) < 1_000_000, f"{len(r.content):,} bytes"
    assert peak < 50_000_000, f"{peak:,} bytes traced for one page"  # the field is 10 MB
    links = re.findall(r'href="(/episode/field\?[^"]+)"', r.text)
    assert len(links) == 1 and "10,000,000 characters" in r.text
    whole = client.get(unescape(links[0]))
    assert whole.status_code == 200 and whole.text == BIG
    assert whole.headers["content-type"].startswith("text/plain")
    assert "sandbox" in whole.headers["Content-Security-Policy"]
    assert whole.headers["X-Content-Type-Options"] == "nosniff"


def test_the_episode_page_escapes_once() -> None:
    from hylo_analytics.serve import pages
    from hylo_analytics.serve._data import DataVersion, Page

    odd = "a<b & c"  # a skip reason and a metric name from a log
    scores = pl.DataFrame(
        {"run_id": ["c", "p"], "metric": [odd, "success"], "value": [None, 1.0],
         "skip_reason": [odd, None]}
    )  # fmt: skip
    none = Page(pl.DataFrame(), 0, 1, 500)
    page = pages.episode_page(
        parent="p",
        candidate="c",
        key=odd,
        task=None,
        events={"c": none, "p": none},
        scores=scores,
        labels={},
        version=DataVersion(1, None),
    )
    assert page.count("a&lt;b &amp; c") == 4  # title, heading, metric and its skip reason
    assert "&amp;lt;" not in page and "&amp;amp;" not in page
