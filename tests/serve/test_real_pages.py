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


@pytest.mark.slow
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


@pytest.mark.slow
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


# -- the errors policy on the real LIBERO runs (issue 27 item 1) ----------------------------

RATES = {  # mart_success_rates' rate and interval for each ?errors=
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


def _pi05_xvla_spatial(real_store: ha.Store) -> tuple[str, str]:
    def one(agent: str) -> str:
        run: str = real_store.sql(
            f"SELECT run_id FROM stg_runs WHERE run_id LIKE 'vla-eval:{agent}:%spatial%'"
        ).item()
        return run

    return one("pi05"), one("xvla")


def _row(text: str, run: str) -> str:
    (row,) = [r for r in text.split("<tr data-row") if f'name="parent" value="{run}"' in r]
    return row


@pytest.mark.parametrize("errors", [None, "failure", "exclude"])
def test_the_runs_page_shows_the_harness_number_under_each_policy(
    client: TestClient, real_store: ha.Store, errors: str | None
) -> None:
    """pi05 on libero_spatial: 0.926 (the harness's own overall_success_rate, its 30 timeouts
    as failures) by default and under failure, 0.985 with them excluded; success sorts on the
    shown number."""
    rates = real_store.sql("SELECT * FROM mart_success_rates")
    rate, low, high = RATES[errors]
    text = _ok(client, "/?sort=success" + (f"&errors={errors}" if errors else ""))
    if errors is None:
        assert (
            "errors: each harness&#x27;s convention (vla-eval, vla-eval/aggregate: failure;" in text
        )
    for r in rates.iter_rows(named=True):
        row = _row(text, r["run_id"])
        if r[rate] is None:  # the Inspect run that errored before any step, excluded
            assert not re.search(r"<td>\d\.\d{3} \[", row)
        else:
            assert f"<td>{r[rate]:.3f} [{r[low]:.3f}, {r[high]:.3f}]</td>" in row
        assert f"<td>{errors or r['errors']}</td>" in row
        assert f'<td><span class="num">{r["n_errors"]}</span></td>' in row
    pi05, _ = _pi05_xvla_spatial(real_store)
    shown = _row(text, pi05)
    assert ("<td>0.926 [" in shown) == (errors != "exclude")
    assert ("<td>0.985 [" in shown) == (errors == "exclude")
    ids = re.findall(r'name="parent" value="([^"]+)"', text)
    order = rates.sort([rate, "run_id"], descending=[True, False], nulls_last=True)
    assert ids == order["run_id"].to_list()
    for url in _targets(text):  # the toggle, sort and pager links
        _ok(client, url)


@pytest.mark.slow
@pytest.mark.parametrize("errors", [None, "failure", "exclude"])
def test_pi05_timeouts_count_alike_on_the_comparison_and_the_task_page(
    client: TestClient, real_store: ha.Store, errors: str | None
) -> None:
    """pi05 (parent) vs xvla (candidate) on libero_spatial: pi05's 30 timeouts fall in one
    task. Under failure (vla-eval's convention, the default) a timeout against an xvla success
    is "candidate won", not "dropped"; excluded, the 30 pairs are dropped. The task page's
    counts equal the comparison's row for every task under each policy."""
    pi05, xvla = _pi05_xvla_spatial(real_store)
    frame = real_store.compare([xvla], pi05, by=["task_id"], errors=errors)
    query = [("parent", pi05), ("candidate", xvla), *([("errors", errors)] if errors else [])]
    r = client.get("/compare", params=query)
    assert r.status_code == 200
    applied = errors or "failure"
    assert frame["errors"].unique().to_list() == [applied]
    assert f"<b>errors: {applied} (" in r.text
    assert "errored episodes 0 of the candidate, 30 of the parent" in r.text
    dropped = 30 if applied == "exclude" else 0
    assert f"; {dropped} pairs dropped (0 by the candidate, {dropped} by the parent" in r.text
    tasks = sorted({html.unescape(u) for u in re.findall(r'href="(/compare/task\?[^"]+)"', r.text)})
    assert len(tasks) == 10
    timeouts = 0
    for url in tasks:
        text = _ok(client, url)
        task_id = html.unescape(re.findall(r"<h1>Task (.*?)</h1>", text)[0])
        row = frame.filter(task_id=task_id).row(0, named=True)
        (line,) = re.findall(r'id="outcomes">(.*?)</p>', text)
        assert (
            f"{row['candidate_wins']} candidate won / {row['parent_wins']} parent won / "
            f"{row['ties']} ties / {row['n_dropped'] + row['n_unmatched']} dropped" in line
        ), (task_id, line)
        n = int(re.findall(r"(\d+) of the parent", line)[0])
        timeouts += n
        if n:
            assert f"<b>errors: {applied} (" in text
            # each timed-out side is marked; under failure its score is the 0 counted
            marked = re.findall(r'<td>([^<]*) <span class="note">errored</span></td>', text)
            assert marked == ["0.000" if applied == "failure" else ""] * min(n, 50)
            assert (row["n_dropped"] == n) == (applied == "exclude")
    assert timeouts == 30
