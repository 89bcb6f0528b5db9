"""hylo EvalLog v0.2, rewritten into the v0.1 document it stands for (one query per batch).

A v0.2 log (the inspect-robots layout: ``eval / results / stats / samples``, one sample per key
with its ``epochs``) becomes a v0.1 document the same checks read onto the same tables; its run
``status`` and ``created`` travel in the member ``_V02_RUN``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import duckdb
import pyarrow as pa

from hylo_analytics.ingest._files import SourceFile
from hylo_analytics.ingest.formats.hylo._spec import _V02_RUN, FORMAT, FORMAT_V02

__all__ = ["v02_as_v01", "version_of"]

# the version member of a v0.2 log, where the exporter writes it; confirmed by DuckDB
_V02_HINT = re.compile(rb'"version"\s*:\s*"hylo\.evallog/v0\.2"')

_V02_SQL = f"""
WITH d AS (
    SELECT i, try(CAST(raw AS JSON)) AS j FROM _v02
), d2 AS (
    SELECT * FROM d WHERE j->>'$.version' = '{FORMAT_V02}' AND json_type(j) = 'OBJECT'
), smp AS (
    SELECT i, unnest(l) AS s, generate_subscripts(l, 1) AS si
    FROM (SELECT i, try(from_json(j->'$.samples', '["JSON"]')) AS l FROM d2)
), ep AS (
    -- a sample without epochs stays one row, so the checks still see it
    SELECT i, si, s, unnest(e) AS sc, generate_subscripts(e, 1) AS ei
    FROM (SELECT *, CASE WHEN json_type(s->'$.epochs') = 'ARRAY'
                         AND json_array_length(s->'$.epochs') > 0
                    THEN from_json(s->'$.epochs', '["JSON"]') ELSE [NULL::JSON] END AS e
          FROM smp)
), body AS (
    SELECT i, si, ei, json_extract(s, '$.episodes[' || CAST(ei - 1 AS VARCHAR) || ']') AS m, s, sc
    FROM ep
), v01 AS (
    SELECT i, si, ei, s, json_merge_patch(
        CASE WHEN json_type(m->'$.extra') = 'OBJECT' THEN m->'$.extra' ELSE '{{}}' END,
        json_object('key', s->'$.key', 'task_id', s->'$.task_id', 'seed', s->'$.seed',
                    'epoch', coalesce(m->'$.epoch', to_json(ei)), 'episode_id', m->'$.episode_id',
                    'status', coalesce(m->'$.status', s->'$.status'), 'trace', m->'$.trace'))
               AS b,
           CASE WHEN json_type(sc) = 'OBJECT' THEN to_json(map_from_entries(
                        list_transform(map_entries(json_transform(sc, '"MAP(VARCHAR, JSON)"')),
                        lambda e: {{'key': e.key, 'value': CASE
                            WHEN m->'$.explanation'->>e.key IS NOT NULL
                              OR m->'$.skip_reason'->>e.key IS NOT NULL
                            THEN json_object('value', e.value,
                                             'explanation', m->'$.explanation'->>e.key,
                                             'skip_reason', m->'$.skip_reason'->>e.key)
                            ELSE e.value END}})))
                WHEN sc IS NOT NULL THEN sc END AS scores
    FROM body
), arr AS (
    -- scores are appended, not patched in: a patch drops the null members (abstentions)
    SELECT i, CAST('[' || string_agg(CASE
        WHEN json_type(s) <> 'OBJECT' THEN CAST(s AS VARCHAR)
        WHEN scores IS NULL THEN CAST(b AS VARCHAR)
        ELSE substr(CAST(b AS VARCHAR), 1, length(CAST(b AS VARCHAR)) - 1) || CASE WHEN CAST(b AS VARCHAR) = '{{}}' THEN '' ELSE ',' END
             || '"scores":' || CAST(scores AS VARCHAR) || '}}' END,
        ',' ORDER BY si, ei) || ']' AS JSON) AS a
    FROM v01 GROUP BY i
)
SELECT d2.i, CAST(to_json(map_from_entries(list_concat(
    -- the run's unmodelled members, then its fields (a patch would drop their nested nulls)
    list_filter(map_entries(json_transform(CASE WHEN json_type(j->'$.eval.extra') = 'OBJECT'
                THEN j->'$.eval.extra' ELSE '{{}}' END, '"MAP(VARCHAR, JSON)"')),
                lambda e: e.key NOT IN ('version', 'run_id', 'parent_run_id', 'benchmark',
                                        'agent', 'results', '{_V02_RUN}', 'samples')),
    list_filter(map_entries(json_transform(json_object(
        'version', j->'$.version', 'run_id', j->'$.eval.run_id',
        'parent_run_id', j->'$.eval.parent_run_id',
        'benchmark', j->'$.eval.benchmark', 'agent', j->'$.eval.agent',
        'results', j->'$.eval.results',
        '{_V02_RUN}', json_object('status', j->'$.status', 'created', j->'$.eval.created'),
        'errors_policy', j->'$.eval.errors_policy',
        'samples', CASE WHEN json_type(j->'$.samples') = 'ARRAY'
                        THEN coalesce(arr.a, '[]'::JSON) ELSE j->'$.samples' END),
        '"MAP(VARCHAR, JSON)"')), lambda e: coalesce(json_type(e.value), 'NULL') <> 'NULL')
))) AS VARCHAR) AS doc
FROM d2 LEFT JOIN arr USING (i)
"""


def v02_as_v01(con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]) -> list[SourceFile]:
    """``files`` with each v0.2 log replaced by the v0.1 document it stands for.

    Only files whose bytes name the v0.2 version are parsed here (a regex, C speed, on the
    rest); one that is not JSON, or not v0.2 at its top level, is left as it is for the
    checks to name.
    """
    out = list(files)
    idx = [i for i, f in enumerate(files) if f.error is None and _V02_HINT.search(f.data)]
    if not idx:
        return out
    raws = [files[i].data.decode("utf-8", "replace") for i in idx]
    con.register("_v02", pa.table({"i": pa.array(idx, pa.int32()), "raw": raws}))
    try:
        rows = con.execute(_V02_SQL).fetchall()
    except duckdb.Error:
        rows = []  # left as written: the checked path names what is wrong
    finally:
        con.unregister("_v02")
    for i, doc in rows:
        if doc is not None:
            out[i] = dataclasses.replace(files[i], data=doc.encode())
    return out


def version_of(head: bytes) -> str:
    """``hylo.evallog/v0.2`` when a file's first bytes name it, else v0.1."""
    return FORMAT_V02 if _V02_HINT.search(head) else FORMAT
