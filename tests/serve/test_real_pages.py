"""serve over the real results in ../shared/data/real (vla-eval LIBERO, inspect-robots): every
link and every picker option of the runs page answers 200, and an episode with no trace shows
what the log stored of it (its status, elapsed_sec, failure_reason)."""

from __future__ import annotations

import html
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import hylo_analytics as ha

pytest.importorskip("starlette")
with warnings.catch_warnings():  # starlette's TestClient moves from httpx to httpx2: not ours
    warnings.filterwarnings("ignore", message="Using `httpx`")
    from starlette.testclient import TestClient

from hylo_analytics.serve import create_app


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory, real_dir: Path) -> ha.Store:
    store = ha.open_store(tmp_path_factory.mktemp("real-serve") / "store")
    store.ingest(real_dir / "vla-eval-harness", progress=False)
    store.ingest(real_dir / "inspect-robots", progress=False)
    return store


@pytest.fixture(scope="module")
def client(real_store: ha.Store) -> Iterator[TestClient]:
    with TestClient(create_app(real_store.root), base_url="http://localhost") as c:
        yield c


def _targets(text: str) -> list[str]:
    """Every link and image address of a page (the live banner's reload link is the page)."""
    found = re.findall(r'(?:href|src)="([^"]*)"', text)
    return sorted({html.unescape(u) for u in found if u})


def _ok(client: TestClient, url: str) -> str:
    r = client.get(url)
    assert r.status_code == 200, (url, r.text[-600:])
    return r.text


def test_every_link_and_pick_on_the_runs_page_answers(
    client: TestClient, real_store: ha.Store
) -> None:
    index = _ok(client, "/")
    for url in _targets(index):
        _ok(client, url)
    parents = re.findall(r'name="parent" value="([^"]+)"', index)
    candidates = re.findall(r'name="candidate" value="([^"]+)"', index)
    assert len(parents) == len(candidates) == 14
    # the button with nothing, a parent alone or a candidate alone: the picker again, not a 404
    assert "pick a parent" in _ok(client, "/compare")
    assert "pick at least one candidate" in _ok(client, f"/compare?parent={parents[0]}")
    assert "pick a parent too" in _ok(client, f"/compare?candidate={candidates[0]}")
    # every run as parent with every comparable run (same benchmark and split) as candidates
    runs = real_store.sql("SELECT run_id, benchmark_id, split FROM stg_runs").rows()
    suite = {rid: (bench, split) for rid, bench, split in runs}
    for parent in parents:
        peers = [c for c in candidates if c != parent and suite[c] == suite[parent]]
        assert peers, parent
        query = [("parent", parent), *(("candidate", c) for c in peers)]
        r = client.get("/compare", params=query)
        assert r.status_code == 200, (parent, r.text[-600:])
        assert "statistical rule" in r.text


def test_every_link_of_a_comparison_task_and_episode_answers(client: TestClient) -> None:
    index = _ok(client, "/")
    ids = re.findall(r'name="parent" value="([^"]+)"', index)
    parent = next(i for i in ids if i.startswith("vla-eval:pi05:") and "spatial" in i)
    cand = next(i for i in ids if i.startswith("vla-eval:xvla:") and "spatial" in i)
    page = _ok(client, f"/compare?parent={parent}&candidate={cand}")
    links = _targets(page)
    tasks = [u for u in links if u.startswith("/compare/task?")]
    assert len(tasks) == 10
    for url in links:
        _ok(client, url)
    task = _ok(client, tasks[0])
    assert "candidate elapsed s" in task and "parent elapsed s" in task
    for url in _targets(task):
        _ok(client, url)


def test_a_traceless_episode_shows_what_the_log_stored(
    client: TestClient, real_store: ha.Store, real_dir: Path
) -> None:
    """vla-eval keeps no trace: the episode page shows each side's stored fields (status,
    elapsed_sec, the timeout's failure_reason) instead of only "no trace stored"."""
    rows = real_store.sql(
        "SELECT run_id, key FROM stg_samples WHERE run_id LIKE 'vla-eval:pi05:%spatial%' "
        "AND status = 'error' ORDER BY key LIMIT 1"
    ).rows()
    ((parent, key),) = rows
    cand = real_store.sql(
        "SELECT run_id FROM stg_runs WHERE run_id LIKE 'vla-eval:xvla:%spatial%'"
    ).item()
    elapsed = real_store.sql(
        "SELECT value FROM stg_scores WHERE run_id = ? AND key = ? AND metric = 'elapsed_sec'",
        [cand, key],
    ).item()
    r = client.get("/episode", params={"parent": parent, "candidate": cand, "key": key})
    assert r.status_code == 200
    assert "<b>failure_reason</b>: timeout" in r.text and "<td>error</td>" in r.text
    assert f"<b>elapsed_sec</b>: {elapsed!r}" in r.text
    assert "the log's fields above are what it recorded" in r.text
    assert "no trace stored for this episode" not in r.text
