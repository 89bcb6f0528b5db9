"""ExpectedActionScorer: tool selection, arguments and order scored from the trace's spans."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from span_data import open_ingested, span, write_span_run

import hylo_analytics as ha
from hylo_analytics.scoring import ExpectedActionScorer, load_scorers

EXPECTED = [
    {"name": "search", "arguments": {"q": "cats"}},
    "open",
    {"name": "submit", "arguments": {"id": 1}},
]
TRACES: dict[str, list[dict[str, Any]] | None] = {
    # every expected call, in order, with an llm span between (not a tool: ignored)
    "ok#1": [
        span("search", q="cats", limit=5),
        span("chat", kind="llm"),
        span("open", id=1),
        span("submit", id=1.0),
    ],
    # the right tools, out of order, search with the wrong argument
    "order#2": [span("submit", id=1), span("open"), span("search", q="dogs")],
    # submit never called
    "partial#3": [span("search", q="cats"), span("open")],
    # an instrumented episode that called no tool: scored 0, not abstained
    "none#4": [span("chat", kind="llm")],
    # not instrumented: abstains
    "nospans#5": [{"type": "step", "t": 1, "action": [0.0]}],
    # no trace at all
    "untraced#6": None,
    # the exact sequence
    "exact#7": [span("search", q="cats"), span("open"), span("submit", id=1)],
    # a malformed expected list and a missing one
    "bad#8": [span("open")],
    "missing#9": [span("open")],
}
EXTRA = {k: {"case": {"expected": {"actions": EXPECTED}}} for k in TRACES}
EXTRA["bad#8"] = {"case": {"expected": {"actions": ["open", {"arguments": {}}]}}}
EXTRA["missing#9"] = {"case": {}}


@pytest.fixture()
def store(tmp_path: Path) -> ha.Store:
    write_span_run(tmp_path / "data", "run-act-1", TRACES, extra=EXTRA)
    return open_ingested(tmp_path)


def _rows(store: ha.Store, source: str) -> dict[str, tuple[Any, Any, Any]]:
    df = store.sql(
        "select key, value, skip_reason, explanation from stg_scores where source = ?", [source]
    )
    return {r[0]: r[1:] for r in df.rows()}


COMMON = {
    "nospans#5": (None, "no spans in the trace", None),
    "untraced#6": (None, "no trace (trace_status=none)", None),
    "bad#8": (None, "expected action 2 is not a name or {name, arguments}", None),
    "missing#9": (None, "missing path: case.expected.actions", None),
}


def test_selection(store: ha.Store) -> None:
    report = store.score({"tools": {"expected_actions": {"check": "selection"}}})
    assert _rows(store, "scorer:tools") == {
        "ok#1": (1.0, None, None),
        "order#2": (1.0, None, None),
        "partial#3": (2 / 3, None, 'expected action 3 "submit" not called'),
        "none#4": (
            0.0,
            None,
            'expected action 1 "search" not called (3 of 3 expected actions failed)',
        ),
        "exact#7": (1.0, None, None),
        **COMMON,
    }
    assert report.failed_runs == {"run-act-1": ("scorer:tools",)}  # bad#8 and missing#9
    (s,) = report.scorers
    assert (s.valid, s.abstained, s.errors) == (5, 2, 2)


@pytest.mark.slow
def test_arguments_subset_and_exact(store: ha.Store) -> None:
    store.score(
        {
            "subset": {"expected_actions": {"check": "arguments"}},
            "exact": {"expected_actions": {"check": "arguments", "arguments": "exact"}},
        }
    )
    subset, exact = _rows(store, "scorer:subset"), _rows(store, "scorer:exact")
    assert subset["ok#1"] == (1.0, None, None)  # limit=5 is extra; 1.0 == 1
    assert subset["order#2"] == (
        2 / 3,
        None,
        'expected action 1 "search" {"q":"cats"} not called with matching arguments',
    )
    assert exact["ok#1"][:2] == (2 / 3, None)  # search also had limit=5
    assert exact["exact#7"] == (1.0, None, None)


@pytest.mark.slow
def test_sequence(store: ha.Store) -> None:
    store.score(
        {
            "seq": {"expected_actions": {"check": "sequence"}},
            "seq_all": {"expected_actions": {"check": "sequence", "mode": "all"}},
            "exact_seq": {"expected_actions": {"check": "exact_sequence"}},
        }
    )
    seq = _rows(store, "scorer:seq")
    assert seq["ok#1"] == (1.0, None, None)
    # submit, open, search(q=dogs): search(q=cats) is never matched, nothing after it counts
    assert seq["order#2"] == (
        0.0,
        None,
        'expected action 1 "search" {"q":"cats"} not called after the previous match '
        "(3 of 3 expected actions failed)",
    )
    assert seq["partial#3"][:2] == (2 / 3, None)
    assert {k: v[0] for k, v in _rows(store, "scorer:seq_all").items() if v[1] is None} == {
        "ok#1": 1.0,
        "order#2": 0.0,
        "partial#3": 0.0,
        "none#4": 0.0,
        "exact#7": 1.0,
    }
    exact_seq = _rows(store, "scorer:exact_seq")
    assert exact_seq["exact#7"] == (1.0, None, None)
    assert exact_seq["ok#1"] == (1.0, None, None)  # the llm span is not a tool call
    assert exact_seq["partial#3"] == (
        0.0,
        None,
        'called ["search","open"] != expected ["search","open","submit"]',
    )
    assert exact_seq["nospans#5"] == COMMON["nospans#5"]


def test_literal_actions_and_any_kind(store: ha.Store) -> None:
    scorer = ExpectedActionScorer(
        "chat_first", "sequence", actions=("chat", "open"), span_kind=None
    )
    store.score([scorer])
    rows = _rows(store, "scorer:chat_first")
    assert rows["ok#1"] == (1.0, None, None)
    assert rows["partial#3"][0] == 0.0
    assert rows["missing#9"][0] == 0.0  # the literal list needs no path


@pytest.mark.parametrize(
    ("decl", "match"),
    [
        ({"check": "order"}, r"^score\.x\.expected_actions\.check: expected one of"),
        ({"mode": "some"}, r"^score\.x\.expected_actions\.mode: expected one of"),
        ({"expected": "a", "actions": []}, r"expected_actions\.actions: give expected"),
        ({"actions": [3]}, r"actions\[0\] must be a name"),
        ({"tools": 1}, r"^score\.x\.expected_actions\.tools: unknown key"),
    ],
)
def test_bad_declarations(decl: dict[str, Any], match: str) -> None:
    with pytest.raises(ha.ConfigError, match=match):
        load_scorers({"x": {"expected_actions": decl}})
