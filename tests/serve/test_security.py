"""The server's defences: the Host allow-list against a real uvicorn, the CSP and headers on
every response, the token off loopback, and a 4xx page with its reason for every bad input."""

from __future__ import annotations

import http.client
import re
import shutil
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics._html import csp_hash

pytest.importorskip("starlette")
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx`")
    from starlette.testclient import TestClient

from hylo_analytics.serve import create_app
from hylo_analytics.serve._data import MAX_CANDIDATES, StoreReader

PARENT, CAND = "run-octo-ft-1.0.0-0000", "run-octo-ft-1.2.0-rc1-0002"
TASK = "tabletop/pick_cube"
OTHER = "run-other-split-0001"
UNSCORED = "run-unscored-0001"


@pytest.fixture(scope="module")
def client(served_store: Path) -> Iterator[TestClient]:
    with TestClient(create_app(served_store), base_url="http://localhost") as c:
        yield c


@pytest.fixture(scope="module")
def live(served_store: Path) -> Iterator[int]:
    """A real uvicorn over the store that also answers to ``hylo.lan``; yields its port."""
    uvicorn = pytest.importorskip("uvicorn")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    app = create_app(served_store, allow_hosts=["hylo.lan"])
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield port
    srv.should_exit = True
    thread.join(timeout=10)


def _get(port: int, host: str, path: str = "/api/version") -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.putrequest("GET", path, skip_host=True)
    conn.putheader("Host", host)
    conn.endheaders()
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return r.status, body


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1:{port}", 200),
        ("localhost:{port}", 200),
        ("LOCALHOST.", 200),
        ("[::1]:{port}", 200),
        ("hylo.lan:{port}", 200),  # --allow-host
        ("rebind.attacker.example:{port}", 400),
        ("127.0.0.1.attacker.example", 400),
        ("", 400),
    ],
)
@pytest.mark.slow
def test_a_real_server_answers_only_to_allowed_hosts(live: int, host: str, status: int) -> None:
    got, body = _get(live, host.format(port=live))
    assert got == status, body[:300]
    if status == 400:
        assert "does not answer to host" in body and "--allow-host" in body
        assert '"version"' not in body  # nothing of the store


def _inline_scripts(page: str) -> list[str]:
    return re.findall(r"<script>(.*?)</script>", page, flags=re.S)


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/", {}),
        ("/compare", {"parent": PARENT, "candidate": CAND}),
        ("/compare/task", {"parent": PARENT, "candidate": CAND, "task": TASK}),
        ("/episode", {"parent": PARENT, "candidate": CAND, "key": f"{TASK}#1000"}),
        ("/compare/forest.svg", {"parent": PARENT, "candidate": CAND}),
        ("/api/version", {}),
        ("/nowhere", {}),
        ("/", {"page": "0"}),
        ("/episode/../x", {}),
    ],
)
def test_every_response_carries_the_policy(
    client: TestClient, path: str, params: dict[str, str]
) -> None:
    r = client.get(path, params=params)
    csp = r.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    if r.headers["content-type"].startswith("text/html"):
        scripts = _inline_scripts(r.text)
        assert len(scripts) == 1 and csp_hash(scripts[0]) in csp
        assert "'unsafe-inline'" not in csp and "connect-src 'self'" in csp


def test_a_token_is_needed_off_loopback(served_store: Path) -> None:
    with TestClient(create_app(served_store, token="s3cret"), base_url="http://localhost") as c:
        denied = c.get("/")
        assert denied.status_code == 403 and "?token=" in denied.text
        assert c.get("/", params={"token": "wrong"}).status_code == 403
        r = c.get("/", params={"token": "s3cret", "q": "rc1"}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/?q=rc1"
        cookie = r.headers["set-cookie"].lower()
        assert "hylo_token=s3cret" in cookie and "httponly" in cookie
        assert "samesite=strict" in cookie
        assert c.get("/", params={"q": "rc1"}).status_code == 200  # the cookie now
        away = c.get("http://localhost//attacker.example/?token=s3cret", follow_redirects=False)
        assert away.headers["location"] == "/attacker.example/"  # a path here, not a host
        c.cookies.clear()
        assert c.get("/api/version").status_code == 403


def test_serve_warns_and_prints_a_token_off_loopback(
    served_store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uvicorn = pytest.importorskip("uvicorn")
    from hylo_analytics.cli import main

    apps: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: apps.append((app, kw)))
    assert main(["serve", "--store", str(served_store), "--host", "0.0.0.0"]) == 0
    out = capsys.readouterr()
    assert "WARNING" in out.err and "--allow-host" in out.err
    (token,) = re.findall(r"\?token=([\w-]+)", out.out)
    assert len(token) >= 24
    assert main(["serve", "--store", str(served_store)]) == 0
    out = capsys.readouterr()
    assert "token" not in out.out and "WARNING" not in out.err
    with TestClient(apps[0][0], base_url="http://localhost") as c:
        assert c.get("/").status_code == 403
        assert c.get("/", params={"token": token}).status_code == 200
    assert main(["serve", "--store", str(served_store), "--allow-host", "box.lan"]) == 0
    with TestClient(apps[2][0], base_url="http://box.lan:8765") as c:
        assert c.get("/").status_code == 200  # loopback bind: the name, no token
    main(["serve", "--store", str(served_store), "--host", "192.168.7.7"])
    with TestClient(apps[3][0], base_url="http://192.168.7.7:8765") as c:
        assert c.get("/").status_code == 403  # its own address is allowed; the token is due


@pytest.mark.parametrize(
    ("path", "params", "reason"),
    [
        ("/", {"page": str(10**30)}, "page must be a whole number"),
        ("/", {"page": "-1"}, "page must be a whole number"),
        ("/", {"page": "zz"}, "page must be a whole number"),
        ("/", {"sort": "run_id; DROP TABLE x"}, "sort must be one of"),
        (
            "/compare/task",
            {"parent": PARENT, "candidate": CAND, "task": TASK, "page": str(10**30)},
            "page must be a whole number",
        ),
        (
            "/episode",
            {"parent": PARENT, "candidate": CAND, "key": f"{TASK}#1000", "page": "1e9"},
            "page must be a whole number",
        ),
        (
            "/compare",
            [("parent", PARENT)] + [("candidate", f"r{i}") for i in range(MAX_CANDIDATES + 1)],
            f"at most {MAX_CANDIDATES}",
        ),
        ("/compare", {"parent": PARENT, "candidate": PARENT}, "the parent is its only"),
        ("/compare/forest.svg", {"parent": PARENT, "candidate": PARENT}, "the parent is its"),
        (
            "/episode/field",
            {"run": CAND, "key": f"{TASK}#1000", "episode": "x", "idx": "1", "field": "value"},
            "field must be one of",
        ),
        ("/", {"errors": "failures"}, "did you mean &#x27;failure&#x27;?"),
        ("/", {"errors": "none"}, "is not an errors policy"),
        ("/compare", {"errors": "drop"}, "is not an errors policy"),  # the picker too
        ("/compare", {"parent": PARENT, "candidate": CAND, "errors": "x"}, "errors policy"),
        (
            "/compare/forest.svg",
            {"parent": PARENT, "candidate": CAND, "errors": "FAILURE"},
            "is not an errors policy",
        ),
        (
            "/compare/task",
            {"parent": PARENT, "candidate": CAND, "task": TASK, "errors": "exclude "},
            "is not an errors policy",
        ),
        (
            "/episode",
            {"parent": PARENT, "candidate": CAND, "key": f"{TASK}#1000", "errors": "1"},
            "is not an errors policy",
        ),
    ],
)
def test_bad_parameters_are_400_pages_with_the_reason(
    client: TestClient, path: str, params: Any, reason: str
) -> None:
    r = client.get(path, params=params)
    assert r.status_code == 400, r.text[:300]
    assert reason in r.text and r.headers["content-type"].startswith("text/html")


def test_a_hostile_errors_value_is_escaped_in_its_400(client: TestClient) -> None:
    r = client.get("/compare", params={"parent": PARENT, "candidate": CAND,
                                       "errors": '"><img src=x onerror=alert(1)>'})  # fmt: skip
    assert r.status_code == 400
    assert "<img src=x" not in r.text and "&lt;img src=x onerror=alert(1)&gt;" in r.text


def test_a_page_past_the_end_is_empty_not_an_error(client: TestClient) -> None:
    r = client.get("/", params={"page": "99"})
    assert r.status_code == 200 and "page 99 of 1" in r.text and 'rel="prev"' in r.text


@pytest.fixture(scope="module")
def incomparable(
    served_store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    """A copy of the store plus a run of another split (the gate refuses the pair) and a run
    with no scores (nothing to compare)."""
    import json

    root = tmp_path_factory.mktemp("gate")
    store = shutil.copytree(served_store, root / "store")
    sample = Path(__file__).resolve().parents[2] / "data" / "sample" / PARENT / "evallog.json"
    log = json.loads(sample.read_text())
    log["run_id"], log["benchmark"]["split"] = OTHER, "some-other-split"
    for s in log["samples"]:
        s.pop("trace", None)
    (root / "logs" / "other").mkdir(parents=True)
    (root / "logs" / "other" / "evallog.json").write_text(json.dumps(log))
    log["run_id"], log["benchmark"]["split"] = UNSCORED, "heldout"
    for s in log["samples"]:
        s.pop("scores", None)
    (root / "logs" / "unscored").mkdir()
    (root / "logs" / "unscored" / "evallog.json").write_text(json.dumps(log))
    opened = ha.open_store(store, create=False)
    opened.ingest(root / "logs", progress=False)
    opened.score()
    with TestClient(create_app(store), base_url="http://localhost") as c:
        yield c


@pytest.mark.slow
@pytest.mark.parametrize("path", ["/compare", "/compare/forest.svg"])
def test_an_incomparable_pair_is_a_409_page_that_says_why(
    incomparable: TestClient, path: str
) -> None:
    r = incomparable.get(path, params={"parent": PARENT, "candidate": OTHER})
    assert r.status_code == 409, r.text[:300]
    assert "not comparable" in r.text and "some-other-split" in r.text


def test_episode_events_are_paged(served_store: Path) -> None:
    reader = StoreReader(served_store)
    first = reader.episode(CAND, f"{TASK}#1000", page=1, size=5)
    assert first.rows.height == 5 and first.total > 5
    last = reader.episode(CAND, f"{TASK}#1000", page=first.pages, size=5)
    assert 1 <= last.rows.height <= 5
    past = reader.episode(CAND, f"{TASK}#1000", page=first.pages + 1, size=5)
    assert past.rows.height == 0 and past.total == first.total


def test_comparison_tasks_are_paged(served_store: Path) -> None:
    from hylo_analytics.serve import pages

    reader = StoreReader(served_store)
    frame = reader.compare([CAND], PARENT)
    tasks = frame.filter(pl.col("level") != "overall")
    many = pl.concat(
        [frame.filter(pl.col("level") == "overall")]
        + [tasks.with_columns(pl.col("task_id") + f"-{i}") for i in range(12)]
    )  # 120 tasks

    def page(n: int) -> str:
        return pages.comparison_page(
            many,
            parent=PARENT,
            candidates=[CAND],
            labels={},
            rule="rule",
            forests={},
            version=reader.version(),
            page=n,
        )

    second, third = page(2), page(3)
    assert "page 2 of 3 (120 rows)" in second and second.count('<a href="/compare/task?') == 50
    assert third.count('<a href="/compare/task?') == 20 and 'rel="next"' not in third


def test_names_are_cut_on_pages_and_messages_kept(served_store: Path) -> None:
    from hylo_analytics.serve import pages
    from hylo_analytics.serve._data import FIELD_CHARS, NAME_CHARS

    version = StoreReader(served_store).version()
    note = "why " * 200  # 800 characters of reason: kept whole
    assert note.strip() in pages.error_page(400, note, version)
    huge = pages.error_page(400, "x" * 10 * FIELD_CHARS, version)
    assert "x" * (FIELD_CHARS - 1) + "\u2026" in huge and "x" * FIELD_CHARS not in huge
    frame = StoreReader(served_store).runs_page(q=None, sort="run", page=1)
    rows = frame.rows.with_columns(agent_name=pl.lit("a" * 1000))
    page = pages.runs_page(
        type(frame)(rows, frame.total, 1, frame.size), q=None, sort="run", version=version
    )
    assert "a" * (NAME_CHARS - 1) + "\u2026" in page and "a" * NAME_CHARS not in page


def test_a_parent_with_no_scores_is_a_400_that_says_why(incomparable: TestClient) -> None:
    r = incomparable.get("/compare", params={"parent": UNSCORED, "candidate": CAND})
    assert r.status_code == 400, r.text[:300]
    assert "cannot compare these runs" in r.text and "has no scores" in r.text
