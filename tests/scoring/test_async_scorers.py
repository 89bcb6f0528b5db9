"""Async per-episode Python scorers: awaited concurrently, bounded, rows in episode order."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import hylo_analytics as ha
from hylo_analytics.scoring import EpisodeScorer, ScorerDeclaration, ScoringCall


class Gauge:
    """Counts how many scorer bodies are in flight at once."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.calls = 0

    async def __call__(self, call: ScoringCall) -> Any:
        self.now += 1
        self.calls += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(0.05)
            # the value names its own episode: a row paired with another episode's value shows
            return float(call.sample["key"][1:3]) + (100.0 if call.variant == "run-many-2" else 0)
        finally:
            self.now -= 1


def _values(store: ha.Store, source: str) -> dict[tuple[str, str], Any]:
    df = store.sql(
        "select run_id, key, value, skip_reason from stg_scores where source = ?", [source]
    )
    return {(r[0], r[1]): (r[2], r[3]) for r in df.rows()}


def _want() -> dict[tuple[str, str], Any]:
    return {
        (run, f"k{i:02d}#0"): (float(i) + (100.0 if run == "run-many-2" else 0.0), None)
        for run in ("run-many-1", "run-many-2")
        for i in range(25)
    }


@pytest.mark.slow
def test_async_scorer_runs_episodes_concurrently(many_store: ha.Store) -> None:
    gauge = Gauge()
    report = many_store.score([EpisodeScorer("slow", gauge, concurrency=10)])
    assert report.ok
    assert gauge.calls == 50
    assert gauge.peak == 10  # overlapped, and never more than the bound
    assert _values(many_store, "scorer:slow") == _want()


def test_async_scorer_inside_a_running_loop(many_store: ha.Store) -> None:
    """As from Jupyter: store.score is called while this thread's loop is running."""
    gauge = Gauge()

    async def notebook_cell() -> ha.ScoringReport:
        return many_store.score([EpisodeScorer("slow", gauge, concurrency=50)])

    report = asyncio.run(notebook_cell())
    assert report.ok and gauge.peak > 1
    assert _values(many_store, "scorer:slow") == _want()


def test_async_errors_are_rows_per_episode(many_store: ha.Store) -> None:
    async def fn(call: ScoringCall) -> Any:
        await asyncio.sleep(0)
        n = int(call.sample["key"][1:3])
        if n == 3:
            raise RuntimeError("boom")
        if n == 4:
            return "oops"
        return None if n == 5 else float(n)

    def returns_awaitable(call: ScoringCall) -> Any:  # a sync fn handing back a coroutine
        return fn(call)

    report = many_store.score(
        [
            EpisodeScorer("a", fn),
            EpisodeScorer("b", returns_awaitable, declaration=ScorerDeclaration(optional=True)),
        ]
    )
    for source in ("scorer:a", "scorer:b"):
        got = _values(many_store, source)
        assert got[("run-many-1", "k03#0")] == (None, "error: RuntimeError: boom")
        assert got[("run-many-1", "k04#0")] == (None, "error: returned str, expected float or None")
        assert got[("run-many-1", "k05#0")] == (None, "abstained")
        assert got[("run-many-2", "k07#0")] == (7.0, None)
    assert report.failed_runs == {"run-many-1": ("scorer:a",), "run-many-2": ("scorer:a",)}


def test_call_exposes_variant_observations_and_spans(many_store: ha.Store) -> None:
    seen: dict[tuple[str, str], ScoringCall] = {}

    def fn(call: ScoringCall) -> float:
        seen[(call.variant, call.sample["key"])] = call
        return float(len(call.selected_spans(kind="tool", name="search")))

    many_store.score([EpisodeScorer("n_search", fn)])
    call = seen[("run-many-2", "k07#0")]
    assert call.agent == "agent@2"
    assert call.observations == {"imported": 7.0}
    assert [s["name"] for s in call.spans] == ["search"]
    assert call.spans[0]["attributes"] == {"arguments": {"q": 7}}
    assert call.selected_spans(kind="llm") == ()
    assert call.selected_spans(name="other") == ()
    assert {v for v, _ in _values(many_store, "scorer:n_search").values()} == {1.0}
