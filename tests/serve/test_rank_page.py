"""The ranking page and the pooled page's way in from the runs page, over small stores:
the page's numbers are ``Store.rank``'s, its parameters are checked, it is computed once."""

from __future__ import annotations

import html
import json
import re
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

import hylo_analytics as ha

pytest.importorskip("starlette")
with warnings.catch_warnings():  # starlette's TestClient moves from httpx to httpx2: not ours
    warnings.filterwarnings("ignore", message="Using `httpx`")
    from starlette.testclient import TestClient

from hylo_analytics.compare import ranking as ranking_module
from hylo_analytics.serve import _rank_routes, _ranking, create_app
from hylo_analytics.serve._data import StoreReader
from hylo_analytics.serve._ranking import RANK_FIELDS, RankQuery, rank_job

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
PARENT, CAND = "run-octo-ft-1.0.0-0000", "run-octo-ft-1.2.0-rc1-0002"


@pytest.fixture(scope="module")
def client(served_store: Path) -> Iterator[TestClient]:
    with TestClient(create_app(served_store), base_url="http://localhost") as c:
        yield c


def _cells(page: str) -> list[list[str]]:
    """The text of each body row's cells."""
    rows = re.findall(r"<tr data-row[^>]*>(.*?)</tr>", page, flags=re.S)
    return [[html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", r, re.S)] for r in rows]


def test_the_fields_are_store_rank_s() -> None:
    assert set(RANK_FIELDS) == set(ranking_module._RUN_COLUMNS)


def _ready(client: TestClient, params: dict[str, str]) -> str:
    """The ranking page once computed: a loaded machine can take longer than the page's
    first wait, and the page then says "computing" (the page a browser reloads)."""
    for _ in range(600):
        r = client.get("/rank", params=params)
        assert r.status_code == 200, r.text[-500:]
        if 'id="rank-pending"' not in r.text:
            return r.text
        time.sleep(0.2)
    raise AssertionError("the ranking page still says computing after 600 requests")


def test_the_ranking_page_shows_store_rank_s_numbers(
    client: TestClient, served_store: Path
) -> None:
    page = _ready(client, {"policy": "run_id"})
    ranking = ha.open_store(served_store, create=False).rank(policy="run_id", progress=False)
    rows = _cells(page)
    ranks = ranking.ranks
    assert [row[1] for row in rows] == ranks["policy"].to_list()
    assert [row[0] for row in rows] == [str(x) for x in ranks["rank"]]
    assert [row[2] for row in rows] == ranks["rank_set"].to_list()
    assert [row[3] for row in rows] == [str(x) for x in ranks["tie_group"]]
    assert [row[4] for row in rows] == [
        f"{b} / {a}" for a, b in ranks.select("n_above", "n_below").rows()
    ]
    strengths = [f"{s:.3f} [{lo:.3f}, {hi:.3f}]" for s, lo, hi in
                 ranks.select("strength", "strength_low", "strength_high").rows()]  # fmt: skip
    assert [row[6] for row in rows] == strengths
    n = ranks.height
    assert f"{n:,} policies, {ranking.matrix.height:,} pairs" in page
    # both charts are their own requests, each an SVG of the page's policies
    for kind in ("strengths", "heatmap"):
        src = html.unescape(re.search(rf'id="rank-{kind}" src="([^"]+)"', page)[1])  # type: ignore[index]
        svg = client.get(src)
        assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg")
        assert "unsafe-inline" in svg.headers["Content-Security-Policy"]
        assert all(p in svg.text for p in ranks["policy"])


def test_one_agent_is_refused_with_the_way_to_rank_its_runs(client: TestClient) -> None:
    r = client.get("/rank")
    assert r.status_code == 400
    assert "needs at least two policies" in r.text
    assert 'href="/rank?policy=run_id" id="rank-runs"' in r.text
    assert 'id="rank-form"' in r.text  # the form stays, to change the query


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"policy": "task_id"}, "policy must be one of"),
        ({"strata": "benchmark_id,x"}, "strata must be distinct run fields"),
        ({"strata": "split,split"}, "strata must be distinct run fields"),
        ({"run": [f"agent=a{i}" for i in range(21)]}, "run takes at most 20"),
        ({"errors": "sometimes"}, "leave errors= out"),
        ({"metric": "m" * 300}, "metric must be a metric's name"),
        ({"policy": "run_id", "page": "9"}, "past the last page (1)"),
    ],
)
def test_bad_parameters_are_400s_that_say_why(
    client: TestClient, params: dict[str, object], said: str
) -> None:
    r = client.get("/rank", params=params)
    assert r.status_code == 400 and said in html.unescape(r.text), r.text[-400:]


def test_the_query_round_trips_through_its_url() -> None:
    query = RankQuery("run_id", ("split",), "steps", "failure", ("agent=a", "agent=b"))
    params = dict(parse_qs(urlsplit("/?" + "&".join(
        f"{k}={v}" for k, v in query.params() if v is not None)).query))  # fmt: skip
    again = RankQuery.parse(lambda k: params.get(k, [None])[0], lambda k: params.get(k, []))
    assert again == query
    none = RankQuery.parse({"strata": ""}.get, lambda k: [])
    assert none.strata == () and dict(none.params())["strata"] == ","
    assert RankQuery.parse({"strata": ","}.get, lambda k: []).strata == ()


def test_a_ranking_is_computed_once_per_store_state(served_store: Path) -> None:
    reader = StoreReader(served_store)
    query = RankQuery(policy="run_id")
    first = rank_job(reader, query)
    assert rank_job(reader, query) is first  # every request meanwhile finds the same job
    view = first.result(timeout=120)
    assert rank_job(reader, query).result() is view
    assert rank_job(reader, RankQuery(policy="agent_version")) is not first
    assert view.pairs["page"].unique().to_list() == [1]
    assert view.pairs.height == view.n_pairs  # three policies: one page holds every pair


def test_a_slow_ranking_says_computing_and_reloads_itself(
    served_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    view = _ranking._view

    def slow(store: ha.Store, query: RankQuery) -> _ranking.RankView:
        time.sleep(0.5)  # a ranking that outlasts the first request's wait
        return view(store, query)

    monkeypatch.setattr(_rank_routes, "FIRST_WAIT", 0.0)
    monkeypatch.setattr(_ranking, "_view", slow)
    with TestClient(create_app(served_store), base_url="http://localhost") as c:
        r = c.get("/rank", params={"policy": "agent_version"})
        assert r.status_code == 200
        assert 'id="rank-pending"' in r.text and 'data-live="reload"' in r.text
        assert re.search(r'data-version="[^"]+\.computing"', r.text)  # never the store's
        assert 'id="rank-summary"' not in r.text
        deadline = time.monotonic() + 60
        while 'data-pending="1"' in r.text and time.monotonic() < deadline:
            time.sleep(0.1)
            r = c.get("/rank", params={"policy": "agent_version"})
        assert 'id="rank-summary"' in r.text and "3 policies" in r.text


def test_the_runs_page_links_the_ranking_and_the_pooled_page(client: TestClient) -> None:
    page = client.get("/", params={"errors": "failure"}).text
    assert 'href="/rank?errors=failure"' in page
    assert 'href="/rank?policy=run_id&amp;errors=failure"' in page
    assert 'formaction="/pooled/pick"' in page
    assert '<a href="/rank">ranking</a>' in page  # every page's header


# -- the pooled page from the runs page -----------------------------------------------------


def _run(folder: Path, src: str, run_id: str, agent: str, split: str) -> None:
    log = json.loads((SAMPLE / src / "evallog.json").read_text())
    log["run_id"] = run_id
    log["agent"]["name"] = agent
    log["benchmark"]["split"] = split
    for sample in log["samples"]:
        sample.pop("trace", None)
    (folder / run_id).mkdir(parents=True)
    (folder / run_id / "evallog.json").write_text(json.dumps(log))


@pytest.fixture(scope="module")
def two_agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """Agents alpha and beta, one run each on splits s1 and s2 (the sample's runs)."""
    root = tmp_path_factory.mktemp("two-agents")
    for src, run, agent, split in [
        (PARENT, "a1", "alpha", "s1"),
        ("run-octo-ft-1.1.0-0001", "a2", "alpha", "s2"),
        (CAND, "b1", "beta", "s1"),
        (CAND, "b2", "beta", "s2"),
    ]:
        _run(root / "logs", src, run, agent, split)
    store = ha.open_store(root / "store")
    store.ingest(root / "logs", progress=False)
    with TestClient(create_app(root / "store"), base_url="http://localhost") as c:
        yield c


def test_the_picks_pool_their_agents(two_agents: TestClient) -> None:
    r = two_agents.get(
        "/pooled/pick", params={"parent": "a1", "candidate": "b2", "errors": "failure"},
        follow_redirects=False,
    )  # fmt: skip
    assert r.status_code == 303
    target = r.headers["location"]
    assert parse_qs(urlsplit(target).query) == {
        "candidate": ["agent=beta"], "parent": ["agent=alpha"], "errors": ["failure"]
    }  # fmt: skip
    page = two_agents.get(target)
    assert page.status_code == 200 and "pooled over suites" in page.text
    src = html.unescape(re.search(r'id="pooled-forest" src="([^"]+)"', page.text)[1])  # type: ignore[index]
    svg = two_agents.get(src)
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg")
    for row in ("s1", "s2", "pooled over the suites"):
        assert row in svg.text


@pytest.mark.parametrize(
    ("params", "status", "said"),
    [
        ({"parent": "a1", "candidate": "a2"}, 400, "both runs are of agent=alpha"),
        ({"parent": "a1", "candidate": ["b1", "b2"]}, 400, "pick one candidate"),
        ({"parent": "a1", "candidate": "nope"}, 404, "no run nope"),
        ({"parent": "a1"}, 200, "pick at least one candidate"),
    ],
)
def test_a_pick_that_cannot_pool_says_why(
    two_agents: TestClient, params: dict[str, object], status: int, said: str
) -> None:
    r = two_agents.get("/pooled/pick", params=params, follow_redirects=False)
    assert r.status_code == status and said in r.text, r.text[-400:]
