"""The Pareto page over a small store: its numbers are ``Store.pareto``'s, its refusals
say why, its chart is SVG."""

from __future__ import annotations

import html
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import hylo_analytics as ha

pytest.importorskip("starlette")
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx`")
    from starlette.testclient import TestClient

from hylo_analytics.serve import create_app


@pytest.fixture(scope="module")
def client(served_store: Path) -> Iterator[TestClient]:
    with TestClient(create_app(served_store), base_url="http://localhost") as c:
        yield c


def _cells(page: str) -> list[list[str]]:
    rows = re.findall(r"<tr data-row[^>]*>(.*?)</tr>", page, flags=re.S)
    return [[html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", r, re.S)] for r in rows]


def test_the_pareto_page_shows_store_pareto_s_rows(client: TestClient, served_store: Path) -> None:
    r = client.get("/pareto", params={"cost": "steps", "policy": "run_id"})
    assert r.status_code == 200, r.text[-500:]
    front = ha.open_store(served_store, create=False).pareto(cost="steps", policy="run_id")
    rows = _cells(r.text)
    assert [row[0] for row in rows] == front.frame["policy"].to_list()
    assert [row[3] == "yes" for row in rows] == front.frame["on_front"].to_list()
    on = front.frame["on_front"].to_list()
    assert on == sorted(on, reverse=True)  # the front's rows first
    assert 'id="pareto-summary"' in r.text and 'id="pareto-chart"' in r.text
    assert '<a href="/pareto">' in r.text  # the nav links to it


def test_the_chart_is_svg(client: TestClient) -> None:
    r = client.get("/pareto/chart.svg", params={"cost": "steps", "policy": "run_id"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("image/svg+xml")
    assert "<svg" in r.text


def test_no_cost_lists_the_metrics(client: TestClient) -> None:
    r = client.get("/pareto")
    assert r.status_code == 200
    assert 'id="pareto-pick"' in r.text and "steps" in r.text


def test_refusals_say_why(client: TestClient) -> None:
    r = client.get("/pareto", params={"cost": "no-such-metric", "policy": "run_id"})
    assert r.status_code == 400 and 'id="pareto-error"' in r.text
    assert "no-such-metric" in html.unescape(r.text)
    one = client.get("/pareto", params={"cost": "steps", "policy": "agent_name"})
    assert one.status_code == 400 and "two policies" in html.unescape(one.text)
    bad = client.get("/pareto/chart.svg", params={"cost": "no-such-metric"})
    assert bad.status_code == 400
    assert client.get("/pareto/chart.svg").status_code == 400


def test_a_store_without_a_cost_metric_says_so(tmp_path: Path) -> None:
    from hylo_analytics.serve._data import DataVersion
    from hylo_analytics.serve.pages import pareto_choose

    page = pareto_choose([], policy="run_id", version=DataVersion(0, None))
    assert 'id="pareto-no-cost"' in page


def test_the_critical_difference_page_shows_store_s_ranks(
    client: TestClient, served_store: Path
) -> None:
    r = client.get("/critical-difference", params={"policy": "run_id"})
    assert r.status_code == 200, r.text[-500:]
    result = ha.open_store(served_store, create=False).critical_difference(policy="run_id")
    rows = _cells(r.text)
    assert [row[1] for row in rows] == result.ranks["policy"].to_list()
    assert [row[0] for row in rows] == [str(x) for x in result.ranks["rank"]]
    summary = html.unescape(r.text.split('id="cd-summary">', 1)[1].split("</p>", 1)[0])
    assert "Friedman" in summary and f"CD = {result.cd:.3f}" in summary
    chart = client.get("/critical-difference/chart.svg", params={"policy": "run_id"})
    assert chart.status_code == 200 and "<svg" in chart.text
    ranked = client.get("/rank", params={"policy": "run_id"}).text
    assert 'id="rank-cd"' in ranked or 'id="rank-pending"' in ranked


def test_the_critical_difference_page_refuses_with_a_reason(client: TestClient) -> None:
    one = client.get("/critical-difference", params={"policy": "agent_name"})
    assert one.status_code == 400 and 'id="cd-error"' in one.text
    assert client.get("/critical-difference", params={"test": "t"}).status_code == 400
    bad = client.get("/critical-difference/chart.svg", params={"metric": "no-such"})
    assert bad.status_code == 400


def test_the_shrink_page_shows_store_shrink_s_rows(client: TestClient, served_store: Path) -> None:
    run = "run-octo-ft-1.0.0-0000"
    r = client.get("/shrink", params={"run": run})
    assert r.status_code == 200, r.text[-500:]
    frame = ha.open_store(served_store, create=False).shrink(run)
    rows = _cells(r.text)
    assert [row[1] for row in rows] == frame["task_id"].to_list()
    chart = client.get("/shrink/chart.svg", params={"run": run})
    assert chart.status_code == 200 and "<svg" in chart.text
    assert client.get("/shrink", params={"run": "no-such-run"}).status_code == 404
    assert client.get("/shrink").status_code == 404
    assert client.get("/shrink", params={"run": run, "metric": "nope"}).status_code == 400


def test_the_compare_page_links_each_run_s_shrinkage(client: TestClient) -> None:
    parent, cand = "run-octo-ft-1.0.0-0000", "run-octo-ft-1.2.0-rc1-0002"
    r = client.get("/compare", params={"parent": parent, "candidate": cand})
    assert r.status_code == 200
    assert f'href="/shrink?run={cand}"' in r.text and f'href="/shrink?run={parent}"' in r.text


def test_the_calibrate_page_says_when_there_is_no_trusted_source(client: TestClient) -> None:
    r = client.get("/calibrate")
    assert r.status_code == 200 and 'id="calibrate-error"' in r.text
    assert "No trusted source" in r.text and "scorer:success" in r.text
    both = {"trusted_source": "scorer:success", "judge_source": "scorer:success"}
    refused = client.get("/calibrate", params=both)
    assert refused.status_code == 400 and 'id="calibrate-error"' in refused.text
    assert client.get("/calibrate/chart.svg", params=both).status_code == 400


def test_one_epoch_keys_show_no_epochs_plan(client: TestClient) -> None:
    parent, cand = "run-octo-ft-1.0.0-0000", "run-octo-ft-1.2.0-rc1-0002"
    r = client.get("/compare", params={"parent": parent, "candidate": cand})
    assert r.status_code == 200 and "epochs-plan" not in r.text  # one epoch a key


def test_the_epochs_sentence_of_a_two_epoch_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    import polars as pl

    from hylo_analytics.serve import _stat_routes

    class Done:
        def result(self) -> pl.DataFrame:
            return pl.DataFrame(
                {"epochs": [3.0], "within_share": [0.5], "epochs_to_halve": [12],
                 "items_to_halve": [40], "note": ["<b>x</b>"]}
            )  # fmt: skip

    class Reader:
        def background(self, key: object, read: object) -> Done:
            return Done()

        def memo(self, key: object, make: Callable[[], str]) -> str:
            return make()

    said = _stat_routes.epochs_note(Reader(), "a", "b", "success")  # type: ignore[arg-type]
    assert "3.0 epochs per key" in said and "50%" in said and "12 epochs" in said
    assert "<b>" not in said
