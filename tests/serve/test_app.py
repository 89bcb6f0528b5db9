"""Every route of the app through Starlette's TestClient, over the scored sample store."""

from __future__ import annotations

import hashlib
import html
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import hylo_analytics as ha

pytest.importorskip("starlette")
with warnings.catch_warnings():  # starlette's TestClient moves from httpx to httpx2: not ours
    warnings.filterwarnings("ignore", message="Using `httpx`")
    from starlette.testclient import TestClient

from hylo_analytics.serve import create_app
from hylo_analytics.serve._data import StoreReader

PARENT, CAND = "run-octo-ft-1.0.0-0000", "run-octo-ft-1.2.0-rc1-0002"
TASK = "tabletop/pick_cube"


def _tree(root: Path) -> dict[str, str]:
    """Every file under the store's batches with its content hash."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def client(served_store: Path) -> Iterator[TestClient]:
    with TestClient(create_app(served_store), base_url="http://localhost") as c:
        yield c


def _links(text: str, path: str) -> list[str]:
    return [html.unescape(h) for h in re.findall(rf'href="({re.escape(path)}\?[^"]+)"', text)]


def test_runs_page_lists_every_run_with_success_and_interval(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200
    assert r.text.count('name="parent"') == 3
    assert "data as of" in r.text and 'data-live="reload"' in r.text
    assert re.search(r"0\.\d{3} \[0\.\d{3}, 0\.\d{3}\]", r.text)


def test_runs_page_filters_sorts_and_pages(client: TestClient) -> None:
    only = client.get("/", params={"q": "rc1"}).text
    assert only.count('name="parent"') == 1 and CAND in only
    by_run = client.get("/", params={"sort": "run"}).text
    ids = re.findall(r'name="parent" value="([^"]+)"', by_run)
    assert ids == sorted(ids)
    assert "page 1 of 1 (3 rows)" in by_run
    bogus = client.get("/", params={"sort": "run_id; DROP TABLE x"})
    assert bogus.status_code == 400 and "sort must be one of" in bogus.text


def test_runs_page_is_paged_in_sql(served_store: Path) -> None:
    page = StoreReader(served_store).runs_page(q=None, sort="run", page=2, size=2)
    assert (page.total, page.pages, page.rows.height) == (3, 2, 1)


def test_comparison_shows_the_verdict_rule_forest_tasks_and_drops(client: TestClient) -> None:
    r = client.get("/compare", params={"parent": PARENT, "candidate": CAND})
    assert r.status_code == 200
    assert "statistical rule" in r.text
    assert "Dropped pairs" in r.text and "pair(s) dropped" in r.text
    tasks = _links(r.text, "/compare/task")
    assert len(set(tasks)) == 10
    (chart,) = [
        html.unescape(u) for u in re.findall(r'src="(/compare/forest\.svg\?[^"]+)"', r.text)
    ]
    svg = client.get(chart)
    assert svg.headers["content-type"].startswith("image/svg+xml")
    assert svg.text.startswith("<svg") and "tabletop/pick_cube" in svg.text


def test_comparison_matches_store_compare(client: TestClient, served_store: Path) -> None:
    frame = ha.open_store(served_store, create=False).compare([CAND], PARENT, by=["task_id"])
    overall = frame.filter(level="overall").row(0, named=True)
    text = client.get("/compare", params={"parent": PARENT, "candidate": CAND}).text
    assert f"{overall['candidate_wins']} wins / {overall['parent_wins']} losses" in text
    assert html.escape(overall["verdict_note"]) in text


def test_comparison_of_many_candidates(client: TestClient) -> None:
    params = [("parent", PARENT), ("candidate", CAND), ("candidate", "run-octo-ft-1.1.0-0001")]
    r = client.get("/compare", params=params)
    assert r.status_code == 200 and r.text.count("/compare/forest.svg") == 2


def test_task_page_puts_discordant_pairs_first(client: TestClient) -> None:
    r = client.get("/compare/task", params={"parent": PARENT, "candidate": CAND, "task": TASK})
    assert r.status_code == 200
    outcomes = re.findall(r"<td>(candidate won|parent won|tie|dropped)</td>", r.text)
    assert len(outcomes) == 20
    rank = {"candidate won": 0, "parent won": 1, "dropped": 2, "tie": 3}
    assert [rank[o] for o in outcomes] == sorted(rank[o] for o in outcomes)
    assert "candidate won" in outcomes


def test_task_page_paginates(served_store: Path) -> None:
    page = StoreReader(served_store).task_page(CAND, PARENT, TASK, page=2, size=15)
    assert (page.total, page.rows.height) == (20, 5)


def test_episode_page_shows_both_traces(client: TestClient) -> None:
    task = client.get("/compare/task", params={"parent": PARENT, "candidate": CAND, "task": TASK})
    episode = _links(task.text, "/episode")[0]
    r = client.get(episode)
    assert r.status_code == 200
    assert r.text.count('class="timeline"') == 2
    assert r.text.count("<section>") == 2 and "<td>step</td>" in r.text


def test_wide_tables_scroll_in_their_box(client: TestClient) -> None:
    """Every table sits in a horizontally scrollable box (the page never grows wider than the
    window; tests/serve/test_browser.py measures it at 1,400 px)."""
    from hylo_analytics.serve._assets import CSS

    assert ".scroll{overflow-x:auto;max-width:100%}" in CSS
    assert ".cols>section{min-width:0}" in CSS
    for r in (
        client.get("/"),
        client.get("/compare", params={"parent": PARENT, "candidate": CAND}),
        client.get("/compare/task", params={"parent": PARENT, "candidate": CAND, "task": TASK}),
    ):
        assert r.text.count("<table>") == r.text.count('<div class="scroll"><table>') > 0


@pytest.mark.parametrize(
    "params",
    [
        {"parent": "no-such-run", "candidate": CAND},
        {"parent": PARENT, "candidate": "no-such-run"},
    ],
)
def test_unknown_runs_are_404_with_a_message(client: TestClient, params: dict[str, str]) -> None:
    r = client.get("/compare", params=params)
    assert r.status_code == 404
    assert "no run" in r.text


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({}, "pick a parent"),
        ({"parent": PARENT}, "pick at least one candidate"),
        ({"candidate": CAND}, "pick a parent too"),
    ],
)
def test_an_incomplete_pick_is_the_picker_again(
    client: TestClient, params: dict[str, str], says: str
) -> None:
    """The compare button with a missing parent or candidate is no 404: the runs page comes
    back with the picks checked and what is still due."""
    r = client.get("/compare", params=params)
    assert r.status_code == 200 and says in r.text and 'id="pick"' in r.text
    for name in ("parent", "candidate"):
        if name in params:
            assert f'name="{name}" value="{params[name]}" checked>' in r.text


def test_unknown_task_and_key_are_404(client: TestClient) -> None:
    base = {"parent": PARENT, "candidate": CAND}
    assert client.get("/compare/task", params={**base, "task": "nope"}).status_code == 404
    assert client.get("/episode", params={**base, "key": "nope"}).status_code == 404
    assert client.get("/episode", params={**base, "key": "../../etc/passwd"}).status_code == 404


@pytest.mark.parametrize(
    "path",
    [
        "/episode/../../etc/passwd",
        "/../batches",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/batches",
        "/views.sql",
    ],
)
def test_paths_outside_the_views_are_refused(client: TestClient, path: str) -> None:
    r = client.get(path)
    assert r.status_code == 404
    assert "root:" not in r.text and "CREATE" not in r.text


def test_writes_are_refused(client: TestClient) -> None:
    assert client.post("/", data={"x": "1"}).status_code == 405
    assert client.delete("/compare").status_code == 405


def test_version_api(client: TestClient) -> None:
    v = client.get("/api/version").json()
    assert v["batch"] >= 1 and v["committed_at"] and v["version"] == str(v["batch"])


def test_requests_leave_the_store_unchanged(served_store: Path) -> None:
    before = _tree(served_store)
    with TestClient(create_app(served_store), base_url="http://localhost") as c:
        for path, params in [
            ("/", {}),
            ("/compare", {"parent": PARENT, "candidate": CAND}),
            ("/compare/task", {"parent": PARENT, "candidate": CAND, "task": TASK}),
            ("/compare/forest.svg", {"parent": PARENT, "candidate": CAND}),
            ("/episode", {"parent": PARENT, "candidate": CAND, "key": f"{TASK}#1000"}),
            ("/api/version", {}),
        ]:
            assert c.get(path, params=params).status_code == 200
        assert _tree(served_store) == before


def test_new_batches_are_read_without_reopening(
    served_store: Path, tmp_path: Path, new_run: Callable[[Path, str], Path]
) -> None:
    store = shutil.copytree(served_store, tmp_path / "store")  # the shared store stays as it is
    reader = StoreReader(store)
    before = reader.version().seq
    new = new_run(tmp_path / "new", "run-live-0001")
    ha.open_store(store, create=False).ingest(new, progress=False)
    assert reader.version().seq > before
    assert reader.runs_page(q="run-live", sort="run", page=1).total == 1


def test_serve_without_the_extra_exits_2_with_the_install_hint(
    served_store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hylo_analytics.cli import main

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn now raises ImportError
    assert main(["serve", "--store", str(served_store)]) == 2
    assert "pip install 'hylo_analytics[serve]'" in capsys.readouterr().err


def test_serve_refuses_a_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hylo_analytics.cli import main

    assert main(["serve", "--store", str(tmp_path / "nothing")]) == 2
    assert not (tmp_path / "nothing").exists()


def test_cli_import_does_not_load_starlette_or_uvicorn() -> None:
    code = (
        "import sys, hylo_analytics.cli; hylo_analytics.cli.build_parser(); "
        "print(any(m in sys.modules for m in ('starlette', 'uvicorn')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
