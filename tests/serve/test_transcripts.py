"""An Inspect sample's transcript on the episode page, read from its log on demand, escaped;
and the flipped keys of two real Inspect runs (logs written by inspect_ai itself)."""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from _inspect_logs import HOSTILE_PROMPT, generate_in_subprocess
from hostile_data import assert_nothing_injected

import hylo_analytics as ha
from hylo_analytics.ingest.inspect_transcript import (
    Message,
    SampleScore,
    ToolCall,
    Transcript,
    TranscriptUnavailable,
    read_transcript,
)

pytest.importorskip("starlette")
with warnings.catch_warnings():  # starlette's TestClient moves from httpx to httpx2: not ours
    warnings.filterwarnings("ignore", message="Using `httpx`")
    from starlette.testclient import TestClient

from hylo_analytics.serve import create_app
from hylo_analytics.serve.pages._episode import _transcript

RAW = ("\x1b", "\x07", "\u202e", "<script>alert")


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """det (an .eval log) and odd (a .json log): opposite outcomes on every sample."""
    root = tmp_path_factory.mktemp("transcripts")
    return generate_in_subprocess(root / "logs", "generate_transcripts")


@pytest.fixture(scope="module")
def store(logs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    store = ha.open_store(tmp_path_factory.mktemp("store") / "store")
    store.ingest(list(logs.values()), progress=False)
    return store


def _run(store: ha.Store, model: str) -> str:
    runs = store.sql("SELECT run_id, agent_name FROM runs")
    return str(runs.filter(pl.col("agent_name") == f"hylotest/{model}-1")["run_id"].item())


@pytest.fixture(scope="module")
def client(store: ha.Store) -> Iterator[TestClient]:
    with TestClient(create_app(store.root), base_url="http://localhost") as c:
        yield c


def _episode(client: TestClient, store: ha.Store, key: str) -> str:
    params = {"parent": _run(store, "det"), "candidate": _run(store, "odd"), "key": key}
    r = client.get("/episode", params=params)
    assert r.status_code == 200
    return r.text


@pytest.mark.slow
def test_every_key_of_the_two_runs_flipped_with_its_sample(store: ha.Store) -> None:
    odd, det = _run(store, "odd"), _run(store, "det")
    flips = store.flips(odd, det, metrics=["match"])
    assert flips.sort("key")["sample_id"].to_list() == ["h0", "h1", "h2", "h3"]
    assert dict(flips.group_by("change").len().iter_rows()) == {"fix": 2, "regression": 2}
    compared = store.compare(odd, det, metrics=["match"], ci="none")
    assert compared.select("candidate_wins", "parent_wins").row(0) == (2, 2)
    assert flips["candidate_path"].str.ends_with(".json").all()
    assert flips["parent_path"].str.ends_with(".eval").all()


@pytest.mark.parametrize("side", ["det", "odd"])
def test_our_reader_reads_what_inspect_ai_reads(logs: dict[str, Path], side: str) -> None:
    from inspect_ai.log import read_eval_log_sample

    theirs = read_eval_log_sample(str(logs[side]), "h1", 1)
    ours = read_transcript(logs[side], "h1", 1)
    assert [m.role for m in ours.messages] == [m.role for m in theirs.messages]
    assert [m.text for m in ours.messages] == [m.text for m in theirs.messages]
    assert ours.messages[0].text == f"{HOSTILE_PROMPT} 1"
    assert {s.scorer: s.explanation for s in ours.scores} == {
        k: v.explanation for k, v in (theirs.scores or {}).items()
    }


def test_the_episode_page_shows_both_transcripts_escaped(
    client: TestClient, store: ha.Store
) -> None:
    page = _episode(client, store, "hostile_arith#h1")
    assert page.count('<div class="transcript">') == 2
    assert (
        page.count('<div class="msg user">') == 2 and page.count('<div class="msg assistant">') == 2
    )
    assert "<td>match</td>" in page and "wrong" in page  # the scores and their explanation
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;\\u001b]0;pwned\\u0007" in page
    for raw in RAW:
        assert raw not in page
    assert_nothing_injected(page, scripts=1)


def test_a_moved_log_says_so_on_the_page(
    logs: dict[str, Path], store: ha.Store, tmp_path: Path
) -> None:
    path = logs["odd"]
    moved = tmp_path / path.name
    shutil.move(path, moved)
    try:
        # a fresh app: the transcripts are kept per data version
        with TestClient(create_app(store.root), base_url="http://localhost") as fresh:
            page = _episode(fresh, store, "hostile_arith#h2")
    finally:
        shutil.move(moved, path)
    assert "is not there any more (moved or deleted since ingest)" in page
    assert page.count('<div class="transcript">') == 2  # the other side still reads


def test_unreadable_logs_and_missing_samples_raise_with_the_reason(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    with pytest.raises(TranscriptUnavailable, match="holds no sample 'nope' at epoch 1"):
        read_transcript(logs["det"], "nope", 1)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TranscriptUnavailable, match="cannot read the transcript from"):
        read_transcript(bad, "h1", 1)
    cut = tmp_path / "cut.eval"  # a log cut short: its central directory is gone
    data = logs["det"].read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(TranscriptUnavailable, match="cannot read the transcript from"):
        read_transcript(cut, "h1", 1)


def test_a_hostile_tool_call_and_score_are_escaped() -> None:
    evil = "<script>alert(1)</script>\x1b[31m<img src=x onerror=alert(2)>"
    t = Transcript(
        path=f"/logs/{evil}.eval",
        sample_id=evil,
        epoch=1,
        messages=(
            Message("assistant", evil, (ToolCall(evil, evil, f'{{"cmd": "{evil}"}}'),)),
            Message("tool", evil, tool_call_id=evil, function=evil, error=evil),
            Message(evil, evil),
        ),
        scores=(SampleScore(evil, evil, evil, evil),),
        target=evil,
        error=evil,
        n_messages=5,
    )
    html = _transcript(t)
    assert "<script" not in html and "<img" not in html and "\x1b" not in html
    assert "2 more messages in the log" in html
    assert_nothing_injected(html, scripts=0)
    assert "transcript: " in _transcript(evil) and "<script" not in _transcript(evil)


def test_from_the_comparison_to_each_flipped_episodes_transcript(
    client: TestClient, store: ha.Store
) -> None:
    """An Inspect comparison on its scorer (``?metric=``): comparison -> task -> the
    episode of each discordant pair, whose page shows both transcripts."""
    import html
    import re

    params = {"parent": _run(store, "det"), "candidate": _run(store, "odd"), "metric": "match"}
    r = client.get("/compare", params=params)
    assert r.status_code == 200 and "2 wins / 2 losses / 0 ties" in r.text
    [task] = {html.unescape(h) for h in re.findall(r'href="(/compare/task\?[^"]+)"', r.text)}
    assert "metric=match" in task
    r = client.get(task)
    assert r.status_code == 200
    outcomes = re.findall(r"<td>(candidate won|parent won|tie|dropped)</td>", r.text)
    assert outcomes == ["candidate won"] * 2 + ["parent won"] * 2
    episodes = {html.unescape(h) for h in re.findall(r'href="(/episode\?[^"]+)"', r.text)}
    assert len(episodes) == 4
    for link in episodes:
        page = client.get(link).text
        assert page.count('<div class="transcript">') == 2 and "metric=match" in page
