"""Declarative scorers (Autobench kinds ``value``, ``pass``, ``exact``, ``schema``).

A dotted path (``output.coverage``, ``sample.scores.steps``, ``case.expected.queue``,
``output.items.0``) resolves against one JSON **record** per sample, built in SQL::

    {"sample": {run_id, key, task_id, seed, epoch, episode_id, status, trace_status,
                "scores": {metric: value, ...},   # the scores the source log wrote (imported)
                ...the sample's fields we do not model (its ``extra`` JSON)},
     "output": sample.extra.output,             # when the log has it
     "case":   sample.extra.case,
     "trace":  {steps, interventions, return, success_once, success_at_end, latency_p95,
                end_status, end_reason, errored, n_events}}   # only with a usable trace

``sample.scores`` holds only the log's own scores, so a declarative scorer never reads another
scorer's output and the result does not depend on the order scorers run in. Paths resolve for
all samples at once with ``json_extract``; a path that does not resolve is a per-row error
(``missing path: <path>``), a JSON ``null`` is an abstention, and a scorer reading ``trace.``
abstains on an episode without a usable trace (``no trace (trace_status=...)``, as the
built-ins do) instead of failing it. A path ``factors.<name>`` (``factors.workload.size``)
reads the sample's factor by the rule ``post_derive``'s ``match_on`` uses
(:func:`hylo_analytics._sql.factor_sql`: ``task_id`` / ``seed``, else the flat key
``"workload.size"`` of the sample's fields, then the dotted path); the name is the whole rest
of the path. ``schema`` validation and the
comparison of objects in ``exact`` run in Python once per *distinct* value.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import duckdb
import pyarrow as pa

from hylo_analytics._config import (
    ConfigError,
    check_keys,
    expect_bool,
    expect_mapping,
    expect_str,
)
from hylo_analytics._lazy import LazyModule
from hylo_analytics.errors import InputError
from hylo_analytics.scoring._actions import parse_expected_actions
from hylo_analytics.scoring._common import ScorerDeclaration, sql_str
from hylo_analytics.scoring._paths import canon, extract_sql, path_sql

if TYPE_CHECKING:
    import jsonschema
    import yaml
else:  # imported on first use: jsonschema costs ~0.1 s, and most stores use no declarative scorer
    jsonschema = LazyModule("jsonschema")
    yaml = LazyModule("yaml")

__all__ = [
    "DeclarativeScorer",
    "declarative_rows",
    "load_scorers",
    "parse_scorers",
    "path_sql",
]

Kind = Literal["value", "pass", "exact", "schema"]
_KINDS = ("value", "pass", "exact", "schema")
_NUMERIC = "('BIGINT', 'UBIGINT', 'DOUBLE')"
_TRUE = ("true", "pass", "passed", "yes")
_FALSE = ("false", "fail", "failed", "no")


@dataclass(frozen=True)
class DeclarativeScorer:
    """A scorer declared by data: a kind, its path(s) and the scoring contract."""

    name: str
    kind: Kind
    path: str  # value / pass / schema: the path read; exact: the actual path
    expected: str | None = None  # exact: the expected path
    schema: Mapping[str, Any] | None = None  # schema: the JSON Schema
    declaration: ScorerDeclaration = field(default_factory=ScorerDeclaration)

    @property
    def reads_trace(self) -> bool:
        """Whether a path reads ``trace``: such a scorer abstains on an untraced episode."""
        paths = (self.path, self.expected or "")
        return any(p == "trace" or p.startswith(("trace.", "trace[")) for p in paths)

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise InputError(
                f"scorer {self.name!r}: kind must be one of {_KINDS}, not {self.kind!r}"
            )
        path_sql(self.path)
        if self.kind == "exact":
            if not self.expected:
                raise InputError(f"scorer {self.name!r}: exact needs an expected path")
            path_sql(self.expected)
        if self.kind == "schema":
            if not isinstance(self.schema, Mapping):
                raise InputError(f"scorer {self.name!r}: schema needs a JSON Schema mapping")
            cls = jsonschema.validators.validator_for(self.schema)
            try:
                cls.check_schema(dict(self.schema))
            except jsonschema.SchemaError as exc:
                raise InputError(
                    f"scorer {self.name!r}: invalid JSON Schema: {exc.message}"
                ) from exc

    @property
    def source(self) -> str:
        return f"scorer:{self.name}"

    @property
    def version(self) -> str:
        """``decl/<hash>``: changes whenever the declaration does."""
        body = json.dumps(
            [self.kind, self.path, self.expected, self.schema, self.declaration.metadata_json()],
            sort_keys=True,
            default=dict,
        )
        return "decl/" + hashlib.sha256(body.encode()).hexdigest()[:12]


def load_scorers(source: str | os.PathLike[str] | Mapping[str, Any]) -> list[Any]:
    """Read declarative scorers from a YAML file or a mapping.

    The format is Autobench's ``score:`` block (the top-level ``score`` key is optional)::

        score:
          coverage:
            value: output.coverage        # or  pass: PATH | exact: {actual, expected}
            semantic: coverage.ratio      #     | schema: {path, schema}
            unit: ratio
            goal: maximize                # or direction:
            role: objective
            optional: false

    Errors are :class:`ConfigError` naming the key path (``score.coverage.value: ...``), prefixed
    with the file when read from one.
    """
    if isinstance(source, Mapping):
        data: Any = source
    else:
        try:
            data = yaml.safe_load(Path(source).read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(str(source), f"not valid YAML: {exc}") from exc
    if isinstance(data, Mapping) and "score" in data:
        data = data["score"]
    try:
        return parse_scorers(data)
    except ConfigError as exc:
        if isinstance(source, Mapping):
            raise
        raise ConfigError(f"{source}: {exc.path}", exc.message) from exc


_ACTIONS = "expected_actions"  # ExpectedActionScorer (scoring/_actions.py)
_DECL_KEYS = (
    *_KINDS,
    _ACTIONS,
    "semantic",
    "semantic_type",
    "unit",
    "goal",
    "direction",
    "role",
    "optional",
)
_DIRECTIONS = ("maximize", "minimize")
_ROLES = ("objective", "constraint", "diagnostic")


def parse_scorers(block: object, path: str = "score") -> list[Any]:
    """Validate a ``score:`` block (scorer name -> declaration) and build its scorers.

    The one validator of the declarative format: :func:`load_scorers` and the analysis spec both
    use it, so every error names the key path (``score.coverage.exact.expected``).
    """
    scorers = expect_mapping(block, path)
    return [_one(f"{path}.{name}", name, decl) for name, decl in scorers.items()]


def _one(at: str, name: str, decl: object) -> Any:
    m = expect_mapping(decl, at)
    check_keys(m, _DECL_KEYS, at)
    kinds = [k for k in (*_KINDS, _ACTIONS) if k in m]
    if len(kinds) != 1:
        raise ConfigError(
            at,
            f"expected exactly one of {[*_KINDS, _ACTIONS]}, found {', '.join(kinds) or 'none'}",
        )
    kind = kinds[0]
    kp = f"{at}.{kind}"
    expected: str | None = None
    schema: Mapping[str, Any] | None = None
    if kind == "exact":
        e = expect_mapping(m[kind], kp)
        check_keys(e, ["actual", "expected"], kp)
        path = _path(e.get("actual"), f"{kp}.actual")
        expected = _path(e.get("expected"), f"{kp}.expected")
    elif kind == "schema":
        e = expect_mapping(m[kind], kp)
        check_keys(e, ["path", "schema"], kp)
        path = _path(e.get("path", "output"), f"{kp}.path")
        schema = expect_mapping(e.get("schema"), f"{kp}.schema")
        try:
            jsonschema.validators.validator_for(schema).check_schema(dict(schema))
        except jsonschema.SchemaError as exc:
            raise ConfigError(f"{kp}.schema", f"invalid JSON Schema: {exc.message}") from exc
    elif kind != _ACTIONS:
        path = _path(m[kind], kp)
    for k in ("semantic", "semantic_type", "unit"):
        if m.get(k) is not None:  # ``unit: null`` is "no unit"
            expect_str(m[k], f"{at}.{k}")
    if "direction" in m and "goal" in m:
        raise ConfigError(f"{at}.goal", "give goal or direction, not both")
    for k in ("goal", "direction"):
        if k in m and m[k] not in _DIRECTIONS:
            raise ConfigError(f"{at}.{k}", f"expected one of {list(_DIRECTIONS)}, got {m[k]!r}")
    if "role" in m and m["role"] not in _ROLES:
        raise ConfigError(f"{at}.role", f"expected one of {list(_ROLES)}, got {m['role']!r}")
    declaration = ScorerDeclaration(
        semantic=str(m.get("semantic", m.get("semantic_type", ""))),
        unit=m.get("unit"),
        direction=m.get("direction", m.get("goal", "maximize")),
        role=m.get("role", "objective"),
        optional=expect_bool(m.get("optional", False), f"{at}.optional"),
    )
    if kind == _ACTIONS:
        return parse_expected_actions(kp, name, m[kind], declaration)
    return DeclarativeScorer(name, kind, path, expected, schema, declaration)  # type: ignore[arg-type]


def _path(value: object, at: str) -> str:
    text = expect_str(value, at)
    try:
        path_sql(text)
    except ValueError as exc:
        raise ConfigError(at, str(exc)) from exc
    return text


def declarative_rows(
    con: duckdb.DuckDBPyConnection, scorer: DeclarativeScorer, records: str
) -> pa.Table:
    """Score every record in relation ``records``; rows follow ``RESULT_COLUMNS``."""
    p = sql_str(scorer.path)
    a = extract_sql(scorer.path)
    if scorer.kind == "value":
        value, why, err = _value_exprs(p)
    elif scorer.kind == "pass":
        value, why, err = _pass_exprs(p)
    elif scorer.kind == "exact":
        return _exact(con, scorer, records, a)
    else:
        return _schema(con, scorer, records, a)
    return con.sql(
        _select(scorer, f"select *, {a} as v from {records}", value, why, err)
    ).to_arrow_table()


def _select(
    scorer: DeclarativeScorer,
    inner: str,
    value: str,
    why: str,
    err: str,
    explanation: str = "cast(null as varchar)",
) -> str:
    if scorer.reads_trace:
        # like the built-ins: an episode without a usable trace abstains, it is not an error
        untraced = """json_extract(record, '$.trace') is null"""
        why = f"""case when {untraced} then 'no trace (trace_status='
                  || coalesce(json_extract_string(record, '$.sample.trace_status'), 'none')
                  || ')' else {why} end"""
        err = f"(not {untraced} and {err})"
    return f"""
    select run_id, key, task_id, seed, epoch, episode_id, {sql_str(scorer.name)} as metric,
           cast(case when why is null then {value} end as double) as value, why is null as valid,
           why as skip_reason, {explanation} as explanation,
           {sql_str(scorer.source)} as source, 'score' as source_kind,
           {sql_str(scorer.version)} as scorer_version,
           {sql_str(scorer.declaration.metadata_json())} as metadata, {err} as is_error
    from (select *, {why} as why from ({inner}))"""


def _value_exprs(p: str) -> tuple[str, str, str]:
    value = "case when json_type(v) = 'BOOLEAN' then case when try_cast(v as boolean) then 1.0 else 0.0 end else try_cast(v as double) end"
    why = f"""case when v is null then 'missing path: ' || {p}
                   when json_type(v) = 'NULL' then 'null at path: ' || {p}
                   when json_type(v) not in {_NUMERIC} and json_type(v) <> 'BOOLEAN'
                   then 'not a number at ' || {p} || ': ' || left(cast(v as varchar), 60) end"""
    return value, why, "why is not null and not starts_with(why, 'null at path')"


def _pass_exprs(p: str) -> tuple[str, str, str]:
    t = ", ".join(sql_str(x) for x in _TRUE)
    f = ", ".join(sql_str(x) for x in _FALSE)
    word = "lower(v ->> '$')"
    value = f"""case when json_type(v) = 'BOOLEAN' then case when try_cast(v as boolean) then 1.0 else 0.0 end
                     when json_type(v) = 'VARCHAR' then case when {word} in ({t}) then 1.0 else 0.0 end
                     else try_cast(v as double) end"""
    ok = f"""(json_type(v) = 'BOOLEAN'
              or (json_type(v) in {_NUMERIC} and try_cast(v as double) in (0, 1))
              or (json_type(v) = 'VARCHAR' and {word} in ({t}, {f})))"""
    why = f"""case when v is null then 'missing path: ' || {p}
                   when json_type(v) = 'NULL' then 'null at path: ' || {p}
                   when not {ok} then 'not boolean-like at ' || {p} || ': ' || left(cast(v as varchar), 60) end"""
    return value, why, "why is not null and not starts_with(why, 'null at path')"


def _exact(
    con: duckdb.DuckDBPyConnection, scorer: DeclarativeScorer, records: str, a: str
) -> pa.Table:
    assert scorer.expected is not None
    e = extract_sql(scorer.expected)
    pa_, pe = sql_str(scorer.path), sql_str(scorer.expected)
    # Scalars compare in SQL (numbers as numbers); objects and arrays compare once per distinct
    # pair in Python, where key order does not matter.
    inner = f"""select *, {a} as va, {e} as ve,
        json_type({a}) in ('OBJECT', 'ARRAY') or json_type({e}) in ('OBJECT', 'ARRAY') as nested
        from {records}"""
    con.execute(f"create or replace temp table _exact_pairs as {inner}")
    pairs = con.execute(
        "select distinct cast(va as varchar), cast(ve as varchar) from _exact_pairs "
        "where nested and va is not null and ve is not null"
    ).fetchall()
    same = [(x, y) for x, y in pairs if canon(json.loads(x)) == canon(json.loads(y))]
    con.register(
        "_exact_same",
        pa.table(
            {
                "a": pa.array([x for x, _ in same], pa.string()),
                "b": pa.array([y for _, y in same], pa.string()),
            }
        ),
    )
    eq = f"""case when json_type(va) in {_NUMERIC} and json_type(ve) in {_NUMERIC}
                  then try_cast(va as double) = try_cast(ve as double)
                  when nested then exists (select 1 from _exact_same as q
                                           where q.a = cast(va as varchar) and q.b = cast(ve as varchar))
                  else cast(va as varchar) = cast(ve as varchar) end"""
    why = f"""case when va is null then 'missing path: ' || {pa_}
                   when ve is null then 'missing path: ' || {pe} end"""
    expl = """case when not eq then 'actual ' || left(cast(va as varchar), 60)
                    || ' != expected ' || left(cast(ve as varchar), 60) end"""
    out = con.sql(
        _select(
            scorer,
            f"select *, {eq} as eq from _exact_pairs",
            "case when eq then 1.0 else 0.0 end",
            why,
            "why is not null",
            expl,
        )
    ).to_arrow_table()
    con.unregister("_exact_same")
    con.execute("drop table if exists _exact_pairs")
    return out


def _schema(
    con: duckdb.DuckDBPyConnection, scorer: DeclarativeScorer, records: str, a: str
) -> pa.Table:
    assert scorer.schema is not None
    cls = jsonschema.validators.validator_for(scorer.schema)
    validator = cls(dict(scorer.schema))
    con.execute(
        f"create or replace temp table _schema_vals as select *, cast({a} as varchar) as v from {records}"
    )
    distinct = [
        r[0]
        for r in con.execute("select distinct v from _schema_vals where v is not null").fetchall()
    ]
    # jsonschema validates one instance at a time: do it once per distinct value.
    verdicts: dict[str, list[Any]] = {"v": [], "ok": [], "msg": []}
    for text in distinct:
        err = jsonschema.exceptions.best_match(validator.iter_errors(json.loads(text)))
        verdicts["v"].append(text)
        verdicts["ok"].append(err is None)
        verdicts["msg"].append(None if err is None else f"{err.json_path}: {err.message}"[:200])
    con.register(
        "_schema_verdicts",
        pa.table(
            verdicts,
            schema=pa.schema([("v", pa.string()), ("ok", pa.bool_()), ("msg", pa.string())]),
        ),
    )
    inner = "select s.*, d.ok, d.msg from _schema_vals as s left join _schema_verdicts as d on d.v = s.v"
    why = f"case when v is null then 'missing path: ' || {sql_str(scorer.path)} end"
    out = con.sql(
        _select(scorer, inner, "case when ok then 1.0 else 0.0 end", why, "why is not null", "msg")
    ).to_arrow_table()
    con.unregister("_schema_verdicts")
    con.execute("drop table if exists _schema_vals")
    return out
