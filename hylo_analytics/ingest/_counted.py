"""Figures a harness published without their samples (a rate and its count) as store rows.

An aggregate without per-sample data (an Every Eval Ever file without instances, a lm-eval
task run without ``--log_samples``) says "0.45 of 20" but names no sample. It is stored as
rows every verb reads, marked so that nothing pairs them:

* a rate of a known count ``n`` (``value * n`` a whole number ``k``) is ``n`` samples of status
  ``counted``, ``k`` scored 1 and the others 0: a 0/1 metric's mean and Wilson interval depend
  on ``k`` and ``n`` only, so ``aggregate``, the marts, ``rank``'s means and ``summarize`` give
  the harness's figure with the interval of its count;
* any other figure (a corpus F1, a rate whose count is unknown) is one sample of status
  ``summary`` scored with the figure itself: its mean is the figure, with no interval.

Their keys (``<task>#counted:<i>@<run_id>``, ``<task>#summary@<run_id>``) are the run's own,
so no other run shares them, and each score's ``metadata`` carries ``{"hylo_unkeyed":
"counted" | "summary", "k", "n"}``: a paired comparison of such a metric is refused with the
reason (:func:`hylo_analytics.compare.runs.paired_inputs`), since which samples a rate counted
is not known. Their ``seed`` is the row's number (0 for a summary): an EvalLog export needs one.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from hylo_analytics._sql import query_sql

__all__ = ["MAX_COUNTED", "UNKEYED", "figure_rows"]

UNKEYED = "hylo_unkeyed"  # the metadata field that marks a row no key pairs
MAX_COUNTED = 1_000_000  # a figure of a larger count stays one summary row


def figure_rows(con: duckdb.DuckDBPyConnection, figures: str) -> tuple[pa.Table, pa.Table]:
    """The samples and scores of the figures in the relation ``figures`` (SQL: columns
    ``file_idx, run_id, task_id, metric, value, n, ord, direction``; ``ord`` orders a run's
    figures, ``direction`` is the metric's as the file declares it, or null)."""
    con.execute(f"CREATE OR REPLACE TEMP VIEW _figures AS SELECT * FROM {figures}")
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _figure_rows AS "
        + query_sql("ingest_counted_rows", max_counted=str(MAX_COUNTED))
    )
    samples = con.sql(
        f"""SELECT file_idx, run_id, key, task_id, CAST(coalesce(min(i), 0) AS BIGINT) AS seed,
                  1 AS epoch, key AS episode_id, kind AS status, 'none' AS trace_status,
                  json_object('{UNKEYED}', kind, 'n', max(n)) AS extra
           FROM _figure_rows GROUP BY file_idx, run_id, key, task_id, kind
           ORDER BY file_idx, run_id, min(ord), min(i)"""
    ).to_arrow_table()
    scores = con.sql(
        f"""SELECT file_idx, run_id, key, task_id, CAST(coalesce(i, 0) AS BIGINT) AS seed,
                  1 AS epoch, key AS episode_id, metric, value, value IS NOT NULL AS valid,
                  CASE WHEN value IS NULL THEN 'non-finite value' END AS skip_reason,
                  'evallog' AS source, 'imported' AS source_kind,
                  CAST(CASE WHEN direction IS NULL THEN json_object('{UNKEYED}', kind, 'k', k, 'n', n)
                            ELSE json_object('{UNKEYED}', kind, 'k', k, 'n', n, 'direction',
                                             direction) END AS VARCHAR) AS metadata
           FROM _figure_rows ORDER BY file_idx, run_id, ord, i"""
    ).to_arrow_table()
    con.execute("DROP TABLE IF EXISTS _figure_rows")
    con.execute("DROP VIEW IF EXISTS _figures")
    return samples, scores
