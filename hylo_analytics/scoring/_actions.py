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
    """Score every record of relation ``records``; rows follow ``RESULT_COLUMNS``."""
    t = f"_act_{uuid.uuid4().hex[:8]}"
    ep, exp, calls, cand, ok = (f"{t}_{x}" for x in ("ep", "exp", "calls", "cand", "ok"))
    src = (
        sql_str(json.dumps(list(scorer.actions), default=dict))
        if scorer.actions is not None
        else None
    )
    ev = f"json({src})" if src is not None else extract_sql(scorer.expected)
    where = sql_str(scorer.expected) if src is None else "'actions'"
    kind = "" if scorer.span_kind is None else f"and raw ->> '$.kind' = {sql_str(scorer.span_kind)}"
    # the span events' lines, from the trace files kept once (hylo_analytics._traces)
    spans = with_raw_sql(
        "select run_id, key, episode_id, idx, raw from stg_events "
        f"where run_id in (select run_id from {runs}) and type = 'span'"
    )
    try:
        # one row per episode: the expected list, whether the trace has spans, why it abstains
        con.execute(f"""
            create temp table {ep} as
            with r as (select *, {ev} as ev from {records}),
            sp as (
                select run_id, episode_id, count(*) as n_spans from stg_events
                where run_id in (select run_id from {runs}) and type = 'span'
                group by all
            )
            select r.run_id, r.key, r.task_id, r.seed, r.epoch, r.episode_id, r.ev,
                case when json_extract(r.record, '$.trace') is null
                     then 'no trace (trace_status=' || coalesce(
                         json_extract_string(r.record, '$.sample.trace_status'), 'none') || ')'
                     when r.ev is null then 'missing path: ' || {where}
                     when json_type(r.ev) <> 'ARRAY' then 'not a list at ' || {where} || ': '
                         || left(cast(r.ev as varchar), 60)
                     when json_array_length(r.ev) = 0 then 'no expected actions'
                     when coalesce(sp.n_spans, 0) = 0 then 'no spans in the trace'
                end as why
            from r left join sp on sp.run_id = r.run_id and sp.episode_id = r.episode_id""")
        con.execute(f"""
            create temp table {exp} as
            select run_id, episode_id, pos, e,
                case when json_type(e) = 'VARCHAR' then e ->> '$' else e ->> '$.name' end as ename,
                case when json_type(e) = 'OBJECT' then e -> '$.arguments' end as eargs
            from (select run_id, episode_id, unnest(cast(ev as json[])) as e,
                         generate_subscripts(cast(ev as json[]), 1) as pos
                  from {ep} where why is null)""")
        # a malformed expected action is an error for its episode, named by position
        con.execute(f"""
            update {ep} set why = b.msg
            from (select run_id, episode_id, 'expected action ' || min(pos)
                         || ' is not a name or {{name, arguments}}' as msg
                  from {exp} where ename is null group by all) as b
            where b.run_id = {ep}.run_id and b.episode_id = {ep}.episode_id""")
        con.execute(
            f"delete from {exp} where (run_id, episode_id) in "
            f"(select run_id, episode_id from {ep} where why is not null)"
        )
        con.execute(f"""
            create temp table {calls} as
            select run_id, episode_id,
                row_number() over (partition by run_id, episode_id order by idx) as cpos,
                raw ->> '$.name' as cname, raw -> '$.attributes.arguments' as cargs
            from ({spans})
            where true {kind}""")
        # every (expected position, call) pair with the same name
        con.execute(f"""
            create temp table {cand} as
            select x.run_id, x.episode_id, x.pos, c.cpos, x.eargs, c.cargs
            from {exp} as x join {calls} as c
            on c.run_id = x.run_id and c.episode_id = x.episode_id and c.cname = x.ename""")
        pairs = con.execute(
            f"select distinct cast(eargs as varchar), cast(cargs as varchar) from {cand} "
            "where eargs is not null and json_type(eargs) <> 'NULL'"
        ).fetchall()
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
        use_args = scorer.check != "selection"
        # the pairs that match: names (already) and, when expected, arguments
        matched = f"""(select m.* from {cand} as m
            where {"false" if use_args else "true"}
               or m.eargs is null or json_type(m.eargs) = 'NULL'
               or exists (select 1 from {ok} as q where q.a = cast(m.eargs as varchar)
                                                  and q.b = cast(m.cargs as varchar)))"""
        if scorer.check in ("selection", "arguments"):
            hit = f"select distinct run_id, episode_id, pos, true as hit from {matched}"
        elif scorer.check == "sequence":
            hit = _walk(con, exp, matched, t)
        else:
            hit = f"""select distinct m.run_id, m.episode_id, m.pos, true as hit from {matched} as m
                      where m.cpos = m.pos"""
        return _rows(con, scorer, ep, exp, calls, hit)
    finally:
        for name in (ep, exp, calls, cand, f"{t}_walk"):
            con.execute(f"drop table if exists {name}")
        with contextlib.suppress(Exception):  # not registered when a query above failed
            con.unregister(ok)


def _walk(con: duckdb.DuckDBPyConnection, exp: str, matched: str, t: str) -> str:
    """The greedy subsequence match: position p matches at the earliest matching call after
    position p-1's; one query per position, over every episode at once."""
    walk = f"{t}_walk"
    con.execute(
        f"create temp table {walk} as select run_id, episode_id, 0 as pos, 0 as at "
        f"from {exp} group by run_id, episode_id"
    )
    # fetchall, not fetchone: a half-read result stays open and blocks the next statement
    (n,) = con.execute(f"select coalesce(max(pos), 0) from {exp}").fetchall()[0]
    for p in range(1, int(n) + 1):
        con.execute(f"""
            insert into {walk}
            select w.run_id, w.episode_id, {p}, min(m.cpos)
            from {walk} as w join {matched} as m
              on m.run_id = w.run_id and m.episode_id = w.episode_id
             and m.pos = {p} and m.cpos > w.at
            where w.pos = {p - 1}
            group by w.run_id, w.episode_id""")
    return f"select run_id, episode_id, pos, true as hit from {walk} where pos > 0"


def _rows(
    con: duckdb.DuckDBPyConnection,
    scorer: ExpectedActionScorer,
    ep: str,
    exp: str,
    calls: str,
    hit: str,
) -> pa.Table:
    label = "cast(to_json(x.ename) as varchar)"
    if scorer.check != "selection":  # the arguments are part of what failed
        label += " || coalesce(' ' || cast(x.eargs as varchar), '')"
    if scorer.check == "exact_sequence":
        value = "case when n_hit = n and n_calls = n then 1.0 else 0.0 end"
        expl = """case when not (n_hit = n and n_calls = n) then 'called ' || called
                   || ' != expected ' || wanted end"""
    else:
        frac = "n_hit / n" if scorer.mode == "fraction" else "case when n_hit = n then 1 else 0 end"
        value = f"cast({frac} as double)"
        verb = (
            "not called after the previous match"
            if scorer.check == "sequence"
            else "not called with matching arguments"
            if scorer.check == "arguments"
            else "not called"
        )
        expl = f"""case when n_hit < n then 'expected action ' || first_miss || ' '
                   || miss_label || ' {verb}'
                   || case when n - n_hit > 1 then ' (' || (n - n_hit) || ' of ' || n
                      || ' expected actions failed)' else '' end end"""
    return con.sql(f"""
        with hit as ({hit}),
        per as (
            select x.run_id, x.episode_id, count(*) as n, count(h.hit) as n_hit,
                min(x.pos) filter (where h.hit is null) as first_miss,
                arg_min({label}, x.pos) filter (where h.hit is null) as miss_label,
                cast(to_json(list(x.ename order by x.pos)) as varchar) as wanted
            from {exp} as x left join hit as h
              on h.run_id = x.run_id and h.episode_id = x.episode_id and h.pos = x.pos
            group by x.run_id, x.episode_id
        ),
        c as (
            select run_id, episode_id, count(*) as n_calls,
                cast(to_json(list(cname order by cpos)) as varchar) as called
            from {calls} group by run_id, episode_id
        ),
        j as (
            select e.*, p.n, p.n_hit, p.first_miss, p.miss_label, p.wanted,
                coalesce(cc.n_calls, 0) as n_calls, coalesce(cc.called, '[]') as called
            from {ep} as e
            left join per as p on p.run_id = e.run_id and p.episode_id = e.episode_id
            left join c as cc on cc.run_id = e.run_id and cc.episode_id = e.episode_id
        )
        select run_id, key, task_id, seed, epoch, episode_id,
            {sql_str(scorer.name)} as metric,
            case when why is null then {value} end as value,
            why is null as valid, why as skip_reason,
            case when why is null then {expl} end as explanation,
            {sql_str(scorer.source)} as source, 'score' as source_kind,
            {sql_str(scorer.version)} as scorer_version,
            {sql_str(scorer.declaration.metadata_json())} as metadata,
            coalesce(starts_with(why, 'missing path') or starts_with(why, 'not a list')
                     or starts_with(why, 'expected action'), false) as is_error
        from j
        order by run_id, key, epoch""").to_arrow_table()
