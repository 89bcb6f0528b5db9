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
from urllib.parse import parse_qs, urlsplit

import polars as pl
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


@pytest.mark.slow
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


# -- the errors policy (issue 27 item 1): one policy per page, a toggle, the same counts -----

POLICIES = (None, "failure", "exclude")
# mart_success_rates' rate and interval for each policy (None: each run's harness convention)
RATE_COLUMNS = {
    None: ("success_rate", "ci_low", "ci_high"),
    "failure": (
        "success_rate_errors_as_failures",
        "errors_as_failures_ci_low",
        "errors_as_failures_ci_high",
    ),
    "exclude": (
        "success_rate_errors_excluded",
        "errors_excluded_ci_low",
        "errors_excluded_ci_high",
    ),
}


def _params(errors: str | None, **more: str) -> dict[str, str]:
    return {**more, **({"errors": errors} if errors else {})}


def _run_row(text: str, run: str) -> str:
    (row,) = [r for r in text.split("<tr data-row") if f'name="parent" value="{run}"' in r]
    return row


def _shown_rate(row: str) -> str:
    (cell,) = re.findall(r"<td>(\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\])</td>", row)
    return str(cell)


def _outcomes(text: str) -> dict[str, int]:
    """The task page's counts line: every outcome over every page, and the errored episodes."""
    (line,) = re.findall(r'<p class="note" id="outcomes">(.*?)</p>', text)
    found = re.findall(r"(\d+) (candidate won|parent won|ties|dropped|of the candidate|of the "
                       r"parent)", line)  # fmt: skip
    return {name: int(n) for n, name in found}


def _toggle(text: str) -> list[str]:
    return [html.unescape(u) for u in re.findall(r'class="errors-choice" href="([^"]*)"', text)]


@pytest.mark.parametrize("errors", POLICIES)
def test_runs_page_shows_each_policy_as_mart_success_rates_has_it(
    client: TestClient, served_store: Path, errors: str | None
) -> None:
    rates = ha.open_store(served_store, create=False).sql("SELECT * FROM mart_success_rates")
    r = client.get("/", params=_params(errors))
    assert r.status_code == 200
    assert 'id="errors-policy"' in r.text
    if errors is None:
        assert "errors: each harness&#x27;s convention" in r.text
    else:
        assert f"<b>errors: {errors} (" in r.text
    rate, low, high = RATE_COLUMNS[errors]
    for row in rates.iter_rows(named=True):
        shown = _run_row(r.text, row["run_id"])
        assert _shown_rate(shown) == f"{row[rate]:.3f} [{row[low]:.3f}, {row[high]:.3f}]"
        assert f"<td>{errors or row['errors']}</td>" in shown  # the policy each row follows
        assert f'<td><span class="num">{row["n_errors"]}</span></td>' in shown
    # the sample has errored episodes: the policies' numbers differ, so the test can tell
    assert rates.filter(pl.col("n_errors") > 0).height == 3


def test_runs_page_toggle_keeps_the_other_params_and_each_link_answers(
    client: TestClient,
) -> None:
    text = client.get("/", params={"q": "octo", "sort": "success", "errors": "failure"}).text
    links = _toggle(text)
    assert links == [
        "/?q=octo&sort=success",
        "/?q=octo&sort=success&errors=failure",
        "/?q=octo&sort=success&errors=exclude",
    ]
    assert 'aria-current="true"><b>failure</b>' in text
    for link in links:
        assert client.get(link).status_code == 200
    # the sort links, the search form and the picker keep the policy too
    assert "/?q=octo&sort=run&errors=failure" in [html.unescape(u) for u in _links(text, "/")]
    assert text.count('<input type="hidden" name="errors" value="failure">') == 2


def test_runs_page_sorts_on_the_shown_rate(client: TestClient, served_store: Path) -> None:
    rates = ha.open_store(served_store, create=False).sql("SELECT * FROM mart_success_rates")
    for errors in POLICIES:
        rate = RATE_COLUMNS[errors][0]
        text = client.get("/", params=_params(errors, sort="success")).text
        ids = re.findall(r'name="parent" value="([^"]+)"', text)
        assert ids == rates.sort([rate, "run_id"], descending=[True, False])["run_id"].to_list()
        shown = [float(_shown_rate(_run_row(text, i)).split()[0]) for i in ids]
        assert shown == sorted(shown, reverse=True)


@pytest.mark.slow
@pytest.mark.parametrize("errors", POLICIES)
def test_comparison_and_task_pages_count_alike_under_each_policy(
    client: TestClient, served_store: Path, errors: str | None
) -> None:
    store = ha.open_store(served_store, create=False)
    frame = store.compare([CAND], PARENT, by=["task_id"], errors=errors)
    page = client.get("/compare", params=_params(errors, parent=PARENT, candidate=CAND))
    assert page.status_code == 200
    applied = frame["errors"].unique().to_list()
    assert applied == [errors or "exclude"]  # the sample is a hylo log: exclude by default
    assert f"<b>errors: {applied[0]} (" in page.text
    overall = frame.filter(level="overall").row(0, named=True)
    assert f"{overall['candidate_wins']} wins / {overall['parent_wins']} losses" in page.text
    assert f"{overall['n_dropped']} pairs dropped" in page.text
    errored = store.sql(
        "SELECT run_id, count(*) FILTER (WHERE errored) AS n FROM int_key_scores "
        "WHERE metric = 'success' GROUP BY run_id"
    )
    n = dict(errored.iter_rows())
    assert f"errored episodes {n[CAND]} of the candidate, {n[PARENT]} of the parent" in page.text
    tasks = _links(page.text, "/compare/task")
    assert len(set(tasks)) == 10
    assert all(("errors=" in t) == (errors is not None) for t in tasks)
    for link in set(tasks):
        task = client.get(link)
        assert task.status_code == 200
        task_id = re.search(r"<h1>Task (.*?)</h1>", task.text)
        assert task_id is not None
        row = frame.filter(task_id=html.unescape(task_id.group(1))).row(0, named=True)
        counts = _outcomes(task.text)
        assert (
            counts["candidate won"],
            counts["parent won"],
            counts["ties"],
            counts["dropped"],
        ) == (
            row["candidate_wins"],
            row["parent_wins"],
            row["ties"],
            row["n_dropped"] + row["n_unmatched"],
        )
        assert f"<b>errors: {applied[0]} (" in task.text
        # the task's rows (one page of 20) classified the same way
        shown = re.findall(r"<td>(candidate won|parent won|tie|dropped)</td>", task.text)
        assert shown.count("dropped") == counts["dropped"]


def test_under_failure_an_errored_episode_is_a_failure_on_the_task_page(
    client: TestClient,
) -> None:
    """tabletop/turn_faucet: errored episodes on both sides; dropped when excluded, a failure
    (0) that decides the pair when counted as failures."""
    params = {"parent": PARENT, "candidate": CAND, "task": "tabletop/turn_faucet"}
    excluded = _outcomes(client.get("/compare/task", params=params).text)
    failed = _outcomes(client.get("/compare/task", params={**params, "errors": "failure"}).text)
    assert excluded["dropped"] > 0 and failed["dropped"] == 0
    assert excluded["of the candidate"] == failed["of the candidate"] > 0
    assert excluded["of the parent"] == failed["of the parent"] > 0
    assert failed["candidate won"] + failed["parent won"] > (
        excluded["candidate won"] + excluded["parent won"]
    )


def test_comparison_toggle_keeps_the_picks_and_the_forest_follows(client: TestClient) -> None:
    other = "run-octo-ft-1.1.0-0001"
    params = [("parent", PARENT), ("candidate", CAND), ("candidate", other)]
    text = client.get("/compare", params=[*params, ("errors", "exclude")]).text
    links = _toggle(text)
    assert len(links) == 3
    for link, errors in zip(links, POLICIES, strict=True):
        assert f"parent={PARENT}" in link and f"candidate={CAND}" in link
        assert f"candidate={other}" in link
        assert ("errors=" in link) == (errors is not None)
        r = client.get(link)
        assert r.status_code == 200
        charts = [html.unescape(u) for u in re.findall(r'src="(/compare/forest[^"]+)"', r.text)]
        assert len(charts) == 2
        assert all(("errors=" in c) == (errors is not None) for c in charts)
    svg = client.get(
        "/compare/forest.svg", params={"parent": PARENT, "candidate": CAND, "errors": "failure"}
    )
    assert svg.status_code == 200 and svg.text.startswith("<svg")
    # the task and episode pages keep the policy on their links
    task = client.get("/compare/task", params={"parent": PARENT, "candidate": CAND,
                                               "task": TASK, "errors": "failure"})  # fmt: skip
    toggled = _toggle(task.text)
    assert [parse_qs(urlsplit(u).query)["task"] for u in toggled] == [[TASK]] * 3
    episodes = _links(task.text, "/episode")
    assert episodes and all("errors=failure" in e for e in episodes)
    episode = client.get(episodes[0])
    assert episode.status_code == 200
    assert all("errors=failure" in u for u in _links(episode.text, "/compare/task"))


def test_the_memo_keeps_each_policy_apart(served_store: Path) -> None:
    reader = StoreReader(served_store, background=False)
    failed = reader.compare([CAND], PARENT, "failure")
    excluded = reader.compare([CAND], PARENT, "exclude")
    assert failed["errors"].unique().to_list() == ["failure"]
    assert excluded["errors"].unique().to_list() == ["exclude"]
    assert reader.compared([CAND], PARENT, "failure") is failed
    assert reader.compared([CAND], PARENT) is None
    over = [f.filter(level="overall")["n_dropped"].item() for f in (failed, excluded)]
    assert over[0] < over[1]


@pytest.mark.slow
def test_each_discordant_pair_links_to_its_episode_page(client: TestClient) -> None:
    r = client.get("/compare/task", params={"parent": PARENT, "candidate": CAND, "task": TASK})
    rows = re.findall(r"<tr data-row[^>]*>(.*?)</tr>", r.text)
    discordant = [row for row in rows if re.search(r"<td>(candidate|parent) won</td>", row)]
    assert discordant
    for row in discordant:
        [href] = re.findall(r'<a href="(/episode\?[^"]+)">([^<]+)</a>', row)[:1]
        query = parse_qs(urlsplit(html.unescape(href[0])).query)
        assert query["key"] == [html.unescape(href[1])]
        assert (query["parent"], query["candidate"]) == ([PARENT], [CAND])
        assert client.get(html.unescape(href[0])).status_code == 200
