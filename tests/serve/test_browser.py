"""The app in a real browser: Playwright drives Chromium against a real uvicorn server.

The flow of the issue: open the runs page, pick a parent and a candidate, open a task, open a
discordant episode and see both traces; a run ingested while the server runs appears without
a reload by hand. Screenshots go to ``HYLO_SCREENSHOT_DIR`` (else the test's tmp folder).
Without Chromium the test skips, unless ``HYLO_REQUIRE_BROWSER=1`` (CI), which fails instead.
"""

from __future__ import annotations

import html
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import hylo_analytics as ha

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PARENT, CAND = "run-octo-ft-1.0.0-0000", "run-octo-ft-1.2.0-rc1-0002"


def _chromium() -> str:
    for found in (CHROMIUM, shutil.which("chromium"), shutil.which("chromium-browser")):
        if found and Path(found).exists():
            return found
    if os.environ.get("HYLO_REQUIRE_BROWSER", "") == "1":
        pytest.fail("no Chromium at /usr/bin/chromium; HYLO_REQUIRE_BROWSER=1 makes that a failure")
    pytest.skip("no Chromium at /usr/bin/chromium (apt-get install chromium); CI requires it")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture()
def server(served_store: Path) -> Iterator[str]:
    """A uvicorn server over the store in a background thread; yields its base URL."""
    yield from _running(served_store)


def _running(store: Path) -> Iterator[str]:
    uvicorn = pytest.importorskip("uvicorn")
    from hylo_analytics.serve import create_app

    port = _free_port()
    config = uvicorn.Config(create_app(store), host="127.0.0.1", port=port, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture()
def shots(tmp_path: Path) -> Path:
    keep = os.environ.get("HYLO_SCREENSHOT_DIR")
    out = Path(keep) if keep else tmp_path / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    return out


def test_the_flow_in_a_real_browser(
    server: str,
    served_store: Path,
    shots: Path,
    tmp_path: Path,
    new_run: Callable[[Path, str], Path],
) -> None:
    executable = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=ARGS)
        page: Any = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))

        # runs: pick the parent with the keyboard, the candidate with the mouse
        page.goto(server + "/")
        page.wait_for_selector("text=Runs")
        assert page.locator('input[name="parent"]').count() == 3
        assert "data as of" in page.inner_text("header")
        texts = page.locator("tr[data-row]").all_inner_texts()
        for _ in range(next(i for i, t in enumerate(texts) if PARENT in t) + 1):
            page.keyboard.press("j")  # the selection starts above the first row
        page.keyboard.press("p")
        assert page.locator(f'input[name="parent"][value="{PARENT}"]').is_checked()
        page.check(f'input[name="candidate"][value="{CAND}"]')
        page.screenshot(path=str(shots / "serve-runs.png"), full_page=True)

        # comparison: verdict, rule, forest plot, per-task table
        page.click("#compare")
        page.wait_for_url("**/compare?*")
        assert "statistical rule" in page.content()
        chart = page.locator("div.chart img")
        chart.wait_for()
        page.wait_for_function("document.querySelector('div.chart img').naturalWidth > 100")
        assert page.locator("span.verdict").count() >= 11
        compare_url = page.url
        page.screenshot(path=str(shots / "serve-compare.png"), full_page=True)

        # task: discordant pairs first
        page.locator('a[href^="/compare/task"]').first.click()
        page.wait_for_url("**/compare/task?*")
        first = page.locator("tbody tr").first.inner_text()
        assert "candidate won" in first or "parent won" in first
        page.screenshot(path=str(shots / "serve-task.png"), full_page=True)

        # episode: open the first discordant pair with the keyboard, see both traces
        page.keyboard.press("j")
        page.keyboard.press("Enter")
        page.wait_for_url("**/episode?*")
        assert page.locator("svg.timeline").count() == 2
        assert page.locator("section").count() == 2
        assert page.locator("td", has_text="step").count() > 2
        page.screenshot(path=str(shots / "serve-episode.png"), full_page=True)

        # a stable URL: the comparison opens again from its address alone
        other = browser.new_page()
        other.goto(compare_url)
        assert "statistical rule" in other.content()
        other.close()

        # live: a run ingested now appears on the runs page without a manual reload
        page.goto(server + "/")
        page.wait_for_selector("text=Runs")
        before = page.inner_text("#asof")
        ha.open_store(served_store, create=False).ingest(
            new_run(tmp_path / "live", "run-live-0001"), progress=False
        )
        page.wait_for_selector('input[value="run-live-0001"]', timeout=10_000)
        assert page.inner_text("#asof") != before
        # its success is read in the background; the page reloads again when it is ready
        live_row = page.locator("tr", has_text="run-live-0001")
        live_row.locator("text=/0\\.\\d{3} \\[/").wait_for(timeout=15_000)
        page.screenshot(path=str(shots / "serve-live.png"), full_page=True)

        assert errors == []
        browser.close()


def test_the_ranking_page_in_a_real_browser(
    server: str, served_store: Path, shots: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the runs page to the ranking of every run: a ranking slower than the first
    request's wait says "computing" and the page reloads itself into the ranks, with both
    charts drawn; the form ranks another field."""
    from hylo_analytics.serve import _rank_routes, _ranking

    view = _ranking._view

    def slow(store: ha.Store, query: Any) -> Any:
        time.sleep(1.0)
        return view(store, query)

    monkeypatch.setattr(_rank_routes, "FIRST_WAIT", 0.0)
    monkeypatch.setattr(_ranking, "_view", slow)
    n = ha.open_store(served_store, create=False).runs().height  # the flow above adds one
    executable = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=ARGS)
        page: Any = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on(
            "console",
            lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None,
        )
        page.goto(server + "/")
        page.click("#rank-links >> text=every run")
        page.wait_for_url("**/rank?policy=run_id")
        assert page.locator("#rank-pending").count() == 1  # still computing
        page.wait_for_selector("#rank-summary", timeout=30_000)  # reloaded by itself
        assert page.locator("tr[data-row]").count() == n
        assert f"{n} policies, {n * (n - 1) // 2} pairs" in page.inner_text("#rank-summary")
        for kind in ("strengths", "heatmap"):
            page.wait_for_function(
                # a function, not an expression string: CDP calls it; the page's CSP forbids
                # the eval an expression string would need
                f"() => document.getElementById('rank-{kind}').naturalWidth > 100",
                timeout=30_000,
            )
        page.screenshot(path=str(shots / "serve-rank.png"), full_page=True)
        page.select_option("select[name=policy]", "agent_version")
        page.click("#rank-form button")
        page.wait_for_url("**/rank?policy=agent_version*")
        page.wait_for_selector("#rank-summary", timeout=30_000)
        assert page.locator("tr[data-row]").count() == n  # one version a run
        assert errors == []
        browser.close()


def test_the_pareto_page_in_a_real_browser(server: str, served_store: Path) -> None:
    """From the nav to the front of every run on steps: the table and the chart drawn."""
    n = ha.open_store(served_store, create=False).runs().height
    executable = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=ARGS)
        page: Any = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on(
            "console",
            lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None,
        )
        page.goto(server + "/")
        page.click("header >> text=pareto")
        page.wait_for_selector("#pareto-pick")
        page.click("#pareto-pick >> text=steps")
        page.wait_for_selector("#pareto-summary", timeout=30_000)
        assert page.locator("tr[data-row]").count() == n
        page.wait_for_function(
            "() => document.getElementById('pareto-chart').naturalWidth > 100", timeout=30_000
        )
        page.goto(server + "/critical-difference?policy=run_id")
        page.wait_for_selector("#cd-summary", timeout=30_000)
        assert page.locator("tr[data-row]").count() == n
        page.wait_for_function(
            "() => document.getElementById('cd-chart').naturalWidth > 100", timeout=30_000
        )
        assert errors == []
        browser.close()


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scored store of runs, agents and tasks named after attacks (tests/hostile_data.py)."""
    from hostile_data import write_hostile_runs

    root = tmp_path_factory.mktemp("hostile")
    write_hostile_runs(root / "logs")
    store = ha.open_store(root / "store")
    store.ingest(root / "logs", progress=False)
    store.score()
    return root


@pytest.fixture()
def hostile_server(hostile_store: Path) -> Iterator[str]:
    yield from _running(hostile_store / "store")


def test_no_script_of_the_corpus_runs_in_a_real_browser(
    hostile_store: Path, hostile_server: str, tmp_path: Path
) -> None:
    """The chart HTML, the report and every served page over hostile names load in Chromium;
    no payload runs (each would set window.__pwned and the title), no corpus element exists,
    and the policy blocks nothing of ours."""
    from hostile_data import CANDIDATE, PARENT, big_key

    from hylo_analytics import charts

    executable = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    store = ha.open_store(hostile_store / "store", create=False)
    report = store.report(CANDIDATE, PARENT)
    chart = charts.save(charts.paired_forest(report.tasks), tmp_path / "forest.html")
    page_file = report.save(tmp_path / "report.html")
    key = big_key(hostile_store / "logs")
    pair = {"parent": PARENT, "candidate": CANDIDATE}
    from hylo_analytics.serve.pages import url

    served = [
        url("/", {}),
        url("/compare", pair),
        url("/compare/task", {**pair, "task": key.rsplit("#", 1)[0]}),
        url("/episode", {**pair, "key": key}),
        url("/rank", {"policy": "run_id"}),
        url("/rank", {}),  # refused: the one agent's name in the message
        url("/pareto", {"cost": "steps", "policy": "run_id"}),
        url("/pareto", {"cost": "steps"}),  # refused: one agent
        url("/critical-difference", {"policy": "run_id"}),
    ]
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=ARGS)
        page: Any = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on(
            "console",
            lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None,
        )

        def clean(where: str) -> None:
            pwned = page.evaluate("[window.__pwned, document.title]")
            assert pwned[0] is None and pwned[1] != "pwned", where
            assert page.locator("[data-pwned]").count() == 0, where

        page.goto(chart.as_uri())
        clean("chart html")
        page.wait_for_selector(".vega-embed svg, .vega-embed canvas", timeout=20_000)
        assert "data-pwned" in page.evaluate("JSON.stringify(spec)")  # the names, as data
        page.goto(page_file.as_uri())
        page.wait_for_selector("h1")
        clean("report")
        for path in served:
            page.goto(hostile_server + html.unescape(path))
            page.wait_for_selector("main")
            clean(path)
        assert errors == []
        browser.close()


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory, real_dir: Path) -> Path:
    """The real LIBERO results (../shared/data/real), whose task names make wide tables."""
    root = tmp_path_factory.mktemp("real-browser") / "store"
    store = ha.open_store(root)
    store.ingest(real_dir / "vla-eval-harness", progress=False)
    return root


@pytest.fixture()
def real_server(real_store: Path) -> Iterator[str]:
    yield from _running(real_store)


def test_no_page_is_wider_than_a_1400px_window(real_store: Path, real_server: str) -> None:
    """Wide tables scroll in their own box: at 1,400 px no served page scrolls sideways."""
    from hylo_analytics.serve.pages import url

    executable = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    runs = ha.open_store(real_store, create=False).sql("SELECT run_id FROM stg_runs")["run_id"]
    parent = next(r for r in runs if r.startswith("vla-eval:pi05:") and "spatial" in r)
    cand = next(r for r in runs if r.startswith("vla-eval:xvla:") and "spatial" in r)
    pair = {"parent": parent, "candidate": cand}
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=ARGS)
        page: Any = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(real_server + html.unescape(url("/compare", pair)))
        task = page.locator('a[href^="/compare/task"]').first.get_attribute("href")
        shown = ["/", html.unescape(url("/compare", pair)), task, "/rank",
                 "/pooled?candidate=agent%3Dxvla&parent=agent%3Dpi05"]  # fmt: skip
        page.goto(real_server + task)
        shown.append(page.locator('a[href^="/episode"]').first.get_attribute("href"))
        for path in shown:
            page.goto(real_server + path)
            page.wait_for_selector("main")
            width = page.evaluate("document.documentElement.scrollWidth")
            body = page.evaluate("document.body.scrollWidth")
            assert max(width, body) <= 1400, (path, width, body)
        browser.close()
