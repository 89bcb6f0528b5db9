"""The pages at N = 2,000 runs: the runs page a page at a time in natural version order, the
ranking of 2,000 policies a page of 50 (its numbers ``Store.rank``'s), every page bounded."""

from __future__ import annotations

import html
import re
import time
import warnings
from collections.abc import Iterator

import polars as pl
import pytest

import hylo_analytics as ha

pytest.importorskip("starlette")
with warnings.catch_warnings():  # starlette's TestClient moves from httpx to httpx2: not ours
    warnings.filterwarnings("ignore", message="Using `httpx`")
    from starlette.testclient import TestClient

from hylo_analytics.compare import Ranking
from hylo_analytics.serve import create_app


@pytest.fixture(scope="module")
def client(many_runs_store: ha.Store) -> Iterator[TestClient]:
    with TestClient(create_app(many_runs_store.root), base_url="http://localhost") as c:
        yield c


@pytest.fixture(scope="module")
def ranking(many_runs_store: ha.Store) -> Ranking:
    return many_runs_store.rank(policy="run_id", progress=False)


def _rows(page: str) -> list[list[str]]:
    rows = re.findall(r"<tr data-row[^>]*>(.*?)</tr>", page, flags=re.S)
    return [[html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", r, re.S)] for r in rows]


def _ranked(client: TestClient, params: dict[str, str]) -> str:
    """The ranking page once its background job is done."""
    deadline = time.monotonic() + 300
    r = client.get("/rank", params=params)
    while 'data-pending="1"' in r.text:
        assert time.monotonic() < deadline, "the ranking never ended"
        time.sleep(0.25)
        r = client.get("/rank", params=params)
    assert r.status_code == 200, r.text[-500:]
    return str(r.text)


@pytest.mark.slow  # the 2,000-run store takes 3 s to write and ingest
def test_the_runs_page_is_a_page_of_50_in_natural_version_order(
    client: TestClient, many_runs_store: ha.Store
) -> None:
    natural = many_runs_store.runs()["run_id"].to_list()
    shown = []
    for n in (1, 2):
        r = client.get("/", params={"sort": "version", "page": str(n)})
        assert r.status_code == 200 and len(r.content) < 80_000, len(r.content)
        assert r.text.count('name="parent"') == 50
        assert f"page {n} of 40 (2000 rows)" in r.text
        shown += re.findall(r'name="parent" value="([^"]+)"', r.text)
    assert shown == natural[:100]  # 2.3.0 ... 2.99.0, then 2.100.0: not text order
    last = client.get("/", params={"sort": "agent", "page": "40"}).text
    assert re.findall(r'name="parent" value="([^"]+)"', last) == natural[-50:]


@pytest.mark.slow
def test_the_ranking_of_2000_runs_is_store_rank_s_a_page_at_a_time(
    client: TestClient, ranking: Ranking
) -> None:
    ranks = ranking.ranks
    for n in (1, 40):
        page = _ranked(client, {"policy": "run_id", "page": str(n)})
        assert len(page) < 60_000, len(page)
        rows = _rows(page)
        expect = ranks.slice((n - 1) * 50, 50)
        assert [r[1] for r in rows] == expect["policy"].to_list()
        assert [r[0] for r in rows] == [str(x) for x in expect["rank"]]
        assert [r[2] for r in rows] == expect["rank_set"].to_list()
        assert [r[3] for r in rows] == [str(x) for x in expect["tie_group"]]
        assert f"Showing ranks {(n - 1) * 50 + 1:,} to {n * 50:,} of 2,000." in page
    assert "2,000 policies, 1,999,000 pairs" in page
    groups = ranks["tie_group"]
    assert f"{groups.n_unique():,} tie group(s), the first holding {(groups == 1).sum():,}" in page
    past = client.get("/rank", params={"policy": "run_id", "page": "41"})
    assert past.status_code == 400 and "past the last page (40)" in past.text


@pytest.mark.slow
def test_the_ranking_charts_draw_one_page_of_policies(client: TestClient, ranking: Ranking) -> None:
    _ranked(client, {"policy": "run_id"})
    heat = client.get("/rank/heatmap.svg", params={"policy": "run_id", "page": "2"})
    assert heat.status_code == 200 and len(heat.content) < 400_000, len(heat.content)
    cells = re.search(r'class="mark-rect role-mark layer_0_marks"[^>]*>(.*?)</g>', heat.text, re.S)
    assert cells is not None and cells[1].count("<path") == 50 * 49  # both cells of a pair
    top = ranking.ranks["policy"].slice(50, 50).to_list()
    labels = set(re.findall(r"<text[^>]*>([^<]+)</text>", heat.text))
    assert set(top) <= labels and not (set(ranking.ranks["policy"].head(50)) & labels)
    # the heatmap's verdicts are the matrix's: count them
    pairs = ranking.submatrix(top)
    fills = re.findall(r'fill="(#[0-9A-F]{6})"', cells[1])
    from hylo_analytics.charts._style import VERDICT_COLORS

    verdicts = (
        pairs["verdict"].cast(pl.String).replace({"improved": "regressed", "regressed": "improved"})
    )  # the mirrored cell's verdict
    expected = sorted(VERDICT_COLORS[v] for v in [*pairs["verdict"].cast(pl.String), *verdicts])
    assert sorted(fills) == expected
    strengths = client.get("/rank/strengths.svg", params={"policy": "run_id", "page": "2"})
    assert strengths.status_code == 200 and len(strengths.content) < 200_000
    assert "ranks 51 to 100 of 2,000 policies" in strengths.text
