"""serve's pooled page over the real LIBERO results: X-VLA against pi05 over the four suites,
the same numbers as Store.pooled_compare, under each errors policy."""

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
def client(tmp_path_factory: pytest.TempPathFactory, real_dir: Path) -> Iterator[TestClient]:
    store = ha.open_store(tmp_path_factory.mktemp("pooled-serve") / "store")
    store.ingest(real_dir / "vla-eval-harness", progress=False)
    with TestClient(create_app(store.root), base_url="http://localhost") as c:
        yield c


@pytest.mark.slow
def test_the_pooled_page(client: TestClient) -> None:
    r = client.get("/pooled", params={"candidate": "agent=xvla", "parent": "agent=pi05"})
    assert r.status_code == 200, r.text[-600:]
    page = r.text
    for shown in ("libero_spatial", "pooled", "0.013", "improved", "stratified sign-flip",
                  "mover (tango per suite)", "suite: 1/S each"):  # fmt: skip
        assert shown in page, shown
    # the errors toggle links to the same page under each policy
    assert "errors=exclude" in page
    r = client.get(
        "/pooled", params={"candidate": "agent=xvla", "parent": "agent=pi05", "errors": "exclude"}
    )
    assert r.status_code == 200


def test_a_selector_the_suites_do_not_match_is_a_400(client: TestClient) -> None:
    r = client.get(
        "/pooled", params={"candidate": "agent=xvla", "parent": "agent=pi05,benchmark=libero_10"}
    )
    assert r.status_code == 400 and "one side only" in r.text


@pytest.mark.slow
def test_the_runs_page_picks_pool_xvla_against_pi05(client: TestClient) -> None:
    """Two runs picked on the runs page (one suite each) pool their agents over the four
    suites, and the forest plot draws each suite and the pooled row."""
    runs = client.get("/", params={"q": "libero_spatial"}).text
    parent = next(r for r in re.findall(r'name="parent" value="([^"]+)"', runs) if ":pi05:" in r)
    cand = next(r for r in re.findall(r'name="parent" value="([^"]+)"', runs) if ":xvla:" in r)
    r = client.get("/pooled/pick", params={"parent": parent, "candidate": cand},
                   follow_redirects=False)  # fmt: skip
    assert r.status_code == 303
    assert r.headers["location"] == "/pooled?candidate=agent%3Dxvla&parent=agent%3Dpi05"
    page = client.get(r.headers["location"]).text
    src = re.search(r'id="pooled-forest" src="([^"]+)"', page)
    assert src is not None
    svg = client.get(html.unescape(src[1]))
    assert svg.status_code == 200
    for row in ("libero_spatial", "libero_object", "libero_goal", "libero_10",
                "pooled over the suites"):  # fmt: skip
        assert row in svg.text, row
