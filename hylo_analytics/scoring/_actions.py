"""ExpectedActionScorer: deterministic scoring of an agent's tool / action calls from its spans.

The calls are the episode's ``span`` trace events (docs/trace-format.md) of ``span_kind``
(default ``tool``; ``None``: every kind), in trace order; a call's arguments are its
``attributes.arguments``. The expected actions are a list read from a path (default
``case.expected.actions``) or given literally; each is a name (``"search"``) or an object
``{"name": "search", "arguments": {...}}``. An expected action *matches* a call when the names
are equal and, when it gives ``arguments``, the call's arguments match them: ``subset`` (every
expected key present with an equal value; the default) or ``exact`` (equal objects). Key order
never matters; ``1 == 1.0`` but ``true != 1``.

``check``:

- ``selection``: each expected name was called (arguments ignored);
- ``arguments``: each expected action has a matching call;
- ``sequence``: the expected actions are a subsequence of the calls, in order (greedy, each
  matched at the earliest call after the previous match);
- ``exact_sequence``: the calls are exactly the expected actions, one to one, in order.

The value is the fraction of expected actions matched (``sequence``: the length of the matched
prefix), or with ``mode: all`` 1 when all matched, else 0; ``exact_sequence`` is always 1 or 0.
``explanation`` names the first expected action that failed. An episode without a usable trace
abstains (``no trace (...)``), so does one whose trace has no ``span`` event at all (``no spans
in the trace``: it was not instrumented, which is not the same as calling nothing) and one with
an empty expected list; a missing expected path or a malformed list is an error row.

All of it runs in DuckDB over every episode at once; arguments are compared in Python once per
distinct (expected, called) pair, and ``sequence`` walks the expected positions (one query per
position over all episodes, not per episode).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import duckdb
import pyarrow as pa

from hylo_analytics._config import ConfigError, check_keys, expect_list, expect_mapping, expect_str
from hylo_analytics._sql import query_sql
from hylo_analytics._traces import with_raw_sql
from hylo_analytics.errors import InputError
from hylo_analytics.scoring._common import ScorerDeclaration, sql_str
from hylo_analytics.scoring._paths import canon, extract_sql, path_sql

__all__ = ["ExpectedActionScorer", "expected_action_rows", "parse_expected_actions"]

Check = Literal["selection", "arguments", "sequence", "exact_sequence"]
_CHECKS = ("selection", "arguments", "sequence", "exact_sequence")
_ARGS = ("subset", "exact")
_MODES = ("fraction", "all")


@dataclass(frozen=True)
class ExpectedActionScorer:
    """Score the episode's calls against expected actions (see the module docstring)."""

    name: str
    check: Check = "selection"
    expected: str = "case.expected.actions"  # the path of the expected list
    actions: tuple[str | Mapping[str, Any], ...] | None = None  # a literal list instead
    arguments: Literal["subset", "exact"] = "subset"
    mode: Literal["fraction", "all"] = "fraction"
    span_kind: str | None = "tool"
    declaration: ScorerDeclaration = field(default_factory=ScorerDeclaration)

    def __post_init__(self) -> None:
        for attr, allowed in (("check", _CHECKS), ("arguments", _ARGS), ("mode", _MODES)):
            if getattr(self, attr) not in allowed:
                raise InputError(
                    f"scorer {self.name!r}: {attr} must be one of {allowed}, "
                    f"not {getattr(self, attr)!r}"
                )
        if self.actions is None:
            path_sql(self.expected)
        else:
            object.__setattr__(self, "actions", tuple(self.actions))
            for i, a in enumerate(self.actions):
                if not (isinstance(a, str) or (isinstance(a, Mapping) and "name" in a)):
                    raise InputError(
                        f"scorer {self.name!r}: actions[{i}] must be a name or "
                        f"{{name, arguments}}, not {a!r}"
                    )

    @property
    def source(self) -> str:
        return f"scorer:{self.name}"

    @property
    def version(self) -> str:
        """``actions/<hash>``: changes whenever the declaration does."""
        body = json.dumps(
            [
                self.check,
                self.expected,
                self.actions,
                self.arguments,
                self.mode,
                self.span_kind,
                self.declaration.metadata_json(),
            ],
            sort_keys=True,
            default=dict,
        )
        return "actions/" + hashlib.sha256(body.encode()).hexdigest()[:12]


_KEYS = ("check", "expected", "actions", "arguments", "mode", "span_kind")


def parse_expected_actions(
    at: str, name: str, block: object, declaration: ScorerDeclaration
) -> ExpectedActionScorer:
    """Validate an ``expected_actions:`` block of a ``score:`` entry (errors name the key)."""
    m = expect_mapping(block, at)
    check_keys(m, _KEYS, at)
    for k, allowed in (("check", _CHECKS), ("arguments", _ARGS), ("mode", _MODES)):
        if k in m and m[k] not in allowed:
            raise ConfigError(f"{at}.{k}", f"expected one of {list(allowed)}, got {m[k]!r}")
    if "expected" in m and "actions" in m:
        raise ConfigError(f"{at}.actions", "give expected (a path) or actions (a list), not both")
    actions = None
    if "actions" in m:
        actions = tuple(expect_list(m["actions"], f"{at}.actions"))
    expected = expect_str(m.get("expected", "case.expected.actions"), f"{at}.expected")
    kind = m.get("span_kind", "tool")
    if kind is not None:
        expect_str(kind, f"{at}.span_kind")
    try:
        return ExpectedActionScorer(
            name,
            m.get("check", "selection"),
            expected,
            actions,
            m.get("arguments", "subset"),
            m.get("mode", "fraction"),
            kind,
            declaration,
        )
    except ValueError as exc:
        raise ConfigError(at, str(exc).split(": ", 1)[-1]) from exc


def _args_match(expected: Any, called: Any, how: str) -> bool:
    if how == "subset" and isinstance(expected, dict):
        return isinstance(called, dict) and all(
            k in called and canon(v) == canon(called[k]) for k, v in expected.items()
        )
    return bool(canon(expected) == canon(called))


def expected_action_rows(
    con: duckdb.DuckDBPyConnection, scorer: ExpectedActionScorer, records: str, runs: str
) -> pa.Table:
    """Score every record of relation ``records``; rows follow ``RESULT_COLUMNS``.

    The steps are the ``sql/queries/scoring_actions_*.sql`` files, over temp tables named for
    this call; only the argument comparison (subset or exact, numbers by value) is Python's.
    """
    t = f"_act_{uuid.uuid4().hex[:8]}"
    ep, exp, calls, cand, ok, walk = (
        f"{t}_{x}" for x in ("ep", "exp", "calls", "cand", "ok", "walk")
    )
    src = (
        sql_str(json.dumps(list(scorer.actions), default=dict))
        if scorer.actions is not None
        else None
    )
    ev = f"json({src})" if src is not None else extract_sql(scorer.expected)
    where = scorer.expected if src is None else "actions"
    # the span events' lines, from the trace files kept once (hylo_analytics._traces)
    spans = with_raw_sql(
        "select run_id, key, episode_id, idx, raw from stg_events "
        f"where run_id in (select run_id from {runs}) and type = 'span'"
    )
    try:
        sql = query_sql("scoring_actions_episodes", ep=ep, ev=ev, records=records, runs=runs)
        con.execute(sql, {"where": where})
        con.execute(query_sql("scoring_actions_expected", exp=exp, ep=ep))
        shape = {"shape": "a name or {name, arguments}"}
        con.execute(query_sql("scoring_actions_malformed", ep=ep, exp=exp), shape)
        con.execute(query_sql("scoring_actions_drop_abstaining", ep=ep, exp=exp))
        sql = query_sql("scoring_actions_calls", calls=calls, spans=spans)
        con.execute(sql, {"kind": scorer.span_kind})
        con.execute(query_sql("scoring_actions_candidates", cand=cand, exp=exp, calls=calls))
        pairs = con.execute(query_sql("scoring_actions_argument_pairs", cand=cand)).fetchall()
        same = [
            (a, b)
            for a, b in pairs
            if b is not None and _args_match(json.loads(a), json.loads(b), scorer.arguments)
        ]
        con.register(
            ok,
            pa.table(
                {
                    "a": pa.array([a for a, _ in same], pa.string()),
                    "b": pa.array([b for _, b in same], pa.string()),
                }
            ),
        )
        names_only = "false" if scorer.check != "selection" else "true"
        matched = query_sql("scoring_actions_matched", cand=cand, ok=ok, names_only=names_only)
        if scorer.check == "sequence":
            hit = _walk(con, exp, matched, walk)
        else:
            at = "m.cpos = m.pos" if scorer.check == "exact_sequence" else "true"
            hit = query_sql("scoring_actions_hits", matched=matched, at=at)
        params = {
            "check": scorer.check,
            "mode": scorer.mode,
            "metric": scorer.name,
            "source": scorer.source,
            "version": scorer.version,
            "metadata": scorer.declaration.metadata_json(),
        }
        sql = query_sql("scoring_actions_rows", hit=hit, ep=ep, exp=exp, calls=calls)
        return con.sql(sql, params=params).to_arrow_table()
    finally:
        for name in (ep, exp, calls, cand, walk):
            con.execute(f"drop table if exists {name}")
        with contextlib.suppress(Exception):  # not registered when a query above failed
            con.unregister(ok)


def _walk(con: duckdb.DuckDBPyConnection, exp: str, matched: str, walk: str) -> str:
    """The greedy subsequence match: position p matches at the earliest matching call after
    position p-1's; one query per position, over every episode at once."""
    # fetchall, not fetchone: a half-read result stays open and blocks the next statement
    (n,) = con.execute(query_sql("scoring_actions_walk_start", walk=walk, exp=exp)).fetchall()[0]
    step = query_sql("scoring_actions_walk_step", walk=walk, matched=matched)
    for p in range(1, int(n) + 1):
        con.execute(step, {"p": p})
    return query_sql("scoring_actions_walk_hits", walk=walk)
