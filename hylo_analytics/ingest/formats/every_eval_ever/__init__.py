"""Every Eval Ever: the shared schema (converters from Inspect, HELM, lm-eval), both files.

* **The aggregate JSON** ``{schema_version, evaluation_id, source_metadata, model_info,
  evaluation_results: [{evaluation_name, source_data, metric_config, score_details,
  generation_config}], detailed_evaluation_results?}``.
* **The instance-level JSONL** (:mod:`._instances`): one line per sample.

When the aggregate names its instances (``detailed_evaluation_results``: ``file_path`` and
``checksum``) and they are there (a file of this ingest with that checksum, or the file the
path names, relative to the aggregate's folder or one above it, with that checksum), the
instances are the run and the aggregate is their companion: recorded, not a second run of
the same evaluation. Otherwise the aggregate is a run of its own with **counts but no keys**
(:mod:`hylo_analytics.ingest._counted`): each evaluation result is a task
(``evaluation_name``), its ``score`` the figure, its count ``score_details.uncertainty.
num_samples`` or the number of ``source_data.sample_ids`` (``samples_number`` is the
dataset's size, per the schema, not the number evaluated, so it is never taken as the count).
A rate with a count aggregates and ranks from it (its Wilson interval from the count); a
score without one (a leaderboard scrape) is its figure alone, without an interval; pairing
either is refused with the reason. The file's ``evaluation_results`` are the run's
``results`` as written (``{"evaluation_results": [...]}``) (intervals, half-widths, ``samples_number``); ``model_info`` and
``source_metadata`` its ``extra``.

Identity: ``run_id`` = ``eee:<evaluation_id>``, ``agent_name`` = ``model_info.id``,
``benchmark_id`` = the results' one ``source_data.dataset_name``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import duckdb
import numpy as np
import pyarrow as pa

from hylo_analytics._sql import query_sql
from hylo_analytics.ingest._common import load_json_docs
from hylo_analytics.ingest._counted import figure_rows
from hylo_analytics.ingest._files import MAX_FILE_BYTES, SourceFile
from hylo_analytics.ingest._locate import field_line
from hylo_analytics.ingest._reader import SNIFF_BYTES, Parsed, Reader, remap_file_idx
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest._sqlcheck import Check, compile_checks
from hylo_analytics.ingest.formats.every_eval_ever._instances import (
    FORMAT as INSTANCES_FORMAT,
)
from hylo_analytics.ingest.formats.every_eval_ever._instances import (
    parse_instances,
    sniff_instances,
)
from hylo_analytics.ingest.traces import name_surrogates

__all__ = ["AGGREGATE_FORMAT", "INSTANCES_FORMAT", "READERS", "parse", "sniff_aggregate"]

AGGREGATE_FORMAT = "every_eval_ever/aggregate"
_UP = 4  # folders above the aggregate's own where its instances' path is looked for

_DOC_CHECKS = compile_checks(
    [
        Check("evaluation_id", "json_extract(raw, '$.evaluation_id')", ("VARCHAR",)),
        Check("model_info.id", "json_extract(raw, '$.model_info.id')", ("VARCHAR",)),
        Check("evaluation_results", "json_extract(raw, '$.evaluation_results')", ("ARRAY",)),
    ]
)
_RESULT_CHECKS = compile_checks(
    [
        Check("evaluation_name", "json_extract(r, '$.evaluation_name')", ("VARCHAR",)),
        Check("score_details.score", "json_extract(r, '$.score_details.score')",
              ("DOUBLE", "BIGINT", "UBIGINT")),
        Check("score_details.uncertainty.num_samples",
              "json_extract(r, '$.score_details.uncertainty.num_samples')", ("BIGINT", "UBIGINT"),
              required=False),
        Check("metric_config.metric_id", "json_extract(r, '$.metric_config.metric_id')",
              ("VARCHAR",), required=False),
    ],
    field_prefix="'evaluation_results[' || j || '].'",
)  # fmt: skip


def sniff_aggregate(head: bytes, path: Path | None = None) -> bool:
    """A JSON object with a ``schema_version`` and ``evaluation_results`` near its top."""
    h = head.lstrip()
    return h.startswith(b"{") and b'"schema_version"' in h and b'"evaluation_results"' in h


def parse(con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]) -> Parsed:
    """The instance files and the aggregates of a batch (one parse: an aggregate finds its
    instances among them by checksum)."""
    is_inst = [sniff_instances(f.data[:SNIFF_BYTES], f.path) for f in files]
    inst = [i for i, x in enumerate(is_inst) if x]
    agg = [i for i, x in enumerate(is_inst) if not x]
    runs_i, samples_i, scores_i, problems, run_of = parse_instances(con, [files[i] for i in inst])
    by_sha: dict[str, str | None] = {files[inst[k]].sha256: rid for k, rid in run_of.items()}
    by_sha.update((files[i].sha256, by_sha.get(files[i].sha256)) for i in inst)
    agg_files = [files[i] for i in agg]
    runs_a, samples_a, scores_a, more, companions = _aggregates(con, agg_files, by_sha)
    problems += more
    to_inst, to_agg = np.asarray(inst, np.int32), np.asarray(agg, np.int32)
    runs, samples, scores = (
        pa.concat_tables([_remap(a, to_inst), _remap(b, to_agg)], promote_options="permissive")
        for a, b in ((runs_i, runs_a), (samples_i, samples_a), (scores_i, scores_a))
    )
    owners = {int(to_agg[k]): rid for k, rid in companions.items()}
    return Parsed(runs, samples, scores, problems=problems, companions=owners)


def _remap(table: pa.Table, mapping: np.ndarray) -> pa.Table:
    """``table`` with its sub-batch ``file_idx`` as the batch's."""
    out = remap_file_idx(table, mapping) if table.num_rows else table
    assert out is not None
    return out


def _aggregates(
    con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile], by_sha: dict[str, str | None]
) -> tuple[pa.Table, pa.Table, pa.Table, list[Problem], dict[int, str | None]]:
    """The aggregates' runs (those whose instances are not there), their figure rows, the
    problems, and the companions (file -> its instances' run id, None when not read)."""
    _good, problems = load_json_docs(con, "_eee_a", files)
    problems = name_surrogates(problems, {str(f.path): f.data for f in files})
    bad: set[int] = set()
    found = con.execute(
        f"""SELECT file_idx, b.field, b.error FROM (
                SELECT file_idx, unnest({_DOC_CHECKS}) AS b FROM _eee_a) ORDER BY 1"""
    ).fetchall()
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _eee_r AS "
        + query_sql("ingest_eee_results", checks=_RESULT_CHECKS)
    )
    found += con.execute(
        """SELECT file_idx, b.field, b.error FROM (SELECT file_idx, j, unnest(bad) AS b FROM _eee_r)
           UNION ALL
           SELECT file_idx, 'evaluation_results[' || j || '].evaluation_name',
                  'a second result for ' || task_id || ' (' || metric || ') in this file'
           FROM (SELECT *, row_number() OVER (PARTITION BY file_idx, task_id, metric
                                              ORDER BY j) AS nth FROM _eee_r)
           WHERE nth > 1 AND len(bad) = 0
           ORDER BY 1"""
    ).fetchall()
    for fi, fld, why in found:
        problems.append(Problem(str(files[fi].path), field_line(files[fi].data, fld), fld, why))
        bad.add(fi)
    companions = _companions(con, files, by_sha, bad)
    keep = [i for i in _good if i not in bad and i not in companions]
    con.register("_eee_keep", pa.table({"file_idx": pa.array(keep, pa.int32())}))
    samples, scores = figure_rows(
        con,
        """(SELECT r.file_idx, 'eee:' || (a.raw ->> '$.evaluation_id') AS run_id, r.task_id,
                   r.metric, r.value, r.n, r.j AS ord, r.direction
            FROM _eee_r AS r JOIN _eee_a AS a USING (file_idx)
            WHERE r.file_idx IN (SELECT file_idx FROM _eee_keep))""",
    )
    con.register("_eee_samples", samples)
    runs = con.sql(query_sql("ingest_eee_runs", format=AGGREGATE_FORMAT)).to_arrow_table()
    con.unregister("_eee_samples")
    for name in ("_eee_a", "_eee_keep"):
        con.unregister(name)
    con.execute("DROP TABLE IF EXISTS _eee_r")
    return runs, samples, scores, problems, companions


def _companions(
    con: duckdb.DuckDBPyConnection,
    files: Sequence[SourceFile],
    by_sha: dict[str, str | None],
    bad: set[int],
) -> dict[int, str | None]:
    """The aggregates whose instances are there: in this batch, or at their ``file_path``."""
    out: dict[int, str | None] = {}
    for fi, path, algo, checksum in con.execute(
        """SELECT file_idx, raw ->> '$.detailed_evaluation_results.file_path',
                  coalesce(raw ->> '$.detailed_evaluation_results.hash_algorithm', 'sha256'),
                  lower(raw ->> '$.detailed_evaluation_results.checksum')
           FROM _eee_a WHERE json_type(raw, '$.detailed_evaluation_results') = 'OBJECT'
           ORDER BY 1"""
    ).fetchall():
        if fi in bad or not checksum:
            continue
        if algo == "sha256" and checksum in by_sha:
            out[fi] = by_sha[checksum]
        elif path and _on_disk(files[fi].path, path, algo, checksum):
            out[fi] = None
    return out


def _on_disk(aggregate: Path, named: str, algo: str, checksum: str) -> bool:
    """Whether the instances ``named`` (a repository-relative path) are beside the aggregate
    or up to :data:`_UP` folders above it, with that checksum (never a path that climbs)."""
    rel = PurePosixPath(named)
    if rel.is_absolute() or ".." in rel.parts or algo not in ("sha256", "md5"):
        return False
    for folder in [aggregate.parent, *aggregate.parent.parents][: _UP + 1]:
        candidate = folder.joinpath(*rel.parts)
        try:
            if candidate.is_file() and not candidate.is_symlink():
                if candidate.stat().st_size > MAX_FILE_BYTES:
                    return False
                return hashlib.new(algo, candidate.read_bytes()).hexdigest() == checksum
        except OSError:
            return False
    return False


READERS = (
    Reader(INSTANCES_FORMAT, sniff_instances, parse),
    Reader(AGGREGATE_FORMAT, sniff_aggregate, parse),
)
