"""Write a stored run back out as a hylo EvalLog: v0.1, or the v0.2 layout.

v0.1 is the layout the hylo reader ingests; a run that came from a v0.1 log round-trips
losslessly (same JSON up to key and sample order), and its traces are written back line by
line in their original order, at their original relative paths: each event's line as read
from the trace file the store keeps once (``trace_files``; ``events.raw`` for a grader's grade
events and in a store written before that table), byte for byte.
A score is written as its value, or as ``{"value", "explanation", "skip_reason"}`` (the members
it has) when it has an explanation or abstains for another reason than the one the reader gives
an abstention (``episode errored`` when the sample's status is ``error``, else ``abstained``):
a vla-eval ``harness error: timeout`` or an inspect-robots ``sample error: ...`` comes back as
it was (``skip_reason`` is the MetricResult field of the worldfoundry spec). The run's
``status`` and ``created`` are written at the top (not in the spec's v0.1 list; the reader takes
them back when they are strings). A run whose keys are not ``<task_id>#<seed>`` (inspect-robots,
Inspect) cannot be written as v0.1 (the reader refuses such a key): export it as v0.2. A sample
without a task id, seed or status (a MetricResult file has no seeds) cannot be written at all.

What cannot come back: the number behind a non-numeric score value (stored as an abstention;
its ``skip_reason`` comes back), a trace that was refused or missing at ingest (its path was
not stored), the order of samples (exported sorted by key, then epoch), the difference between
an absent and an empty ``scores`` object (absent is written), the difference between a metric a
sample omits and one it reports as null (ingest records both as an abstention, so that a metric
of the run is counted for every sample; null is written), and an abstention without a reason
(it comes back with the reader's). One score per metric and sample is written, the resolved
one: when several sources hold it, the one of highest precedence (``score`` > ``derived`` >
``observation`` > ``imported``, then the latest batch); it comes back as the log's own
(``source = evallog``, ``source_kind = imported``), without the other sources' rows and without
the columns a log has no place for (``scorer_version``, ``metadata`` and the MetricResult
columns ``raw_value``, ``normalized_value``, ``coverage``, ``components``, ``diagnostics``,
``artifact_refs``, ``judge_trace``). The file read back is a hylo EvalLog: ``runs.source_format``
and ``ingested_files.format`` name the version exported (v0.1 or v0.2), not the format of the
file first ingested (v0.2 keeps that in ``eval.source_format``), and the provenance columns
(``source_path``, ``source_sha256``, ``ingested_at``) are those of the export.
``epoch`` is written when the log needs it (a key repeated or an epoch other than 1);
``episode_id`` when it is not the key (the reader's default for an absent one).
Run metadata (``runs.extra``: the log's unmodelled top-level members) and sample metadata
(``samples.extra``) are written back as they were read (v0.1: at the top and in each sample;
v0.2: ``eval.extra`` and each episode's ``extra``). ``tests/test_export.py`` round-trips the
real vla-eval and inspect-robots files and compares every column of every table.

A run's errors convention (``runs.errors_policy``: vla-eval's counts an errored episode as a
failure) is written as ``errors_policy`` (v0.2: ``eval.errors_policy``) when it is not a hylo
log's own, so the run read back keeps its default rate.

v0.2 is the inspect-robots layout with the hylo identity kept beside it: ``{version, status,
eval, results, stats, samples}``, one sample per key with ``scene_id`` (the key), ``status``,
``epochs`` (one ``{metric: value}`` per epoch, as inspect-robots writes them) and ``reduced``
(the mean of each metric over the epochs that did not abstain), and hylo's own fields:
``key``, ``task_id``, ``seed`` and ``episodes`` (per epoch: epoch, episode id, status, trace,
score explanations and skip reasons (``{metric: text}``, as above) and the sample's unmodelled
fields). ``eval`` holds the run: id, created, benchmark, agent, ``results`` and ``extra`` as
stored; ``results.metrics`` are the run's means.
The reader ingests v0.2 onto the same rows, so it round-trips like v0.1, keys of any shape
included.

Both versions write the benchmark's v0.2 members back into ``benchmark`` (v0.2:
``eval.benchmark``): ``episodes_per_task``, ``max_steps`` (task id -> step limit) and
``upstream`` (``repo``, ``commit``, ``assets``), from the runs columns of the same names
(``benchmark_upstream``). A run's ``parent_run_id`` is written back at the top (v0.2: in
``eval``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hylo_analytics._harness import default_errors
from hylo_analytics._sql import query_sql
from hylo_analytics._traces import with_raw_sql
from hylo_analytics.errors import InputError
from hylo_analytics.resolution import preferred_query

if TYPE_CHECKING:
    from hylo_analytics.store import ParquetStore

__all__ = ["export_evallog"]

V01 = "hylo.evallog/v0.1"
V02 = "hylo.evallog/v0.2"


def _scores_sql() -> str:
    return query_sql("export_scores", preferred=preferred_query(runs=True))


def _samples_sql(prefix: str) -> str:
    return query_sql("export_samples", scores=_scores_sql()).replace(
        "$prefix", "'" + prefix.replace("'", "''") + "'"
    )


def _with_scores(body: str, scores: str | None) -> str:
    if scores is None:
        return body
    return body[:-1] + (',"scores":' if body != "{}" else '"scores":') + scores + "}"


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def export_evallog(
    store: ParquetStore,
    run_id: str,
    path: str | os.PathLike[str],
    *,
    version: Literal["v0.1", "v0.2"] = "v0.1",
    traces: bool = True,
) -> Path:
    """Write run ``run_id`` of ``store`` to ``path`` as a hylo EvalLog; returns the path.

    With ``traces=True`` (v0.1 and v0.2), each sample's trace is written from the stored
    event lines to ``<path's folder>/<its relative path>``.
    """
    from hylo_analytics.store import as_parquet

    store = as_parquet(store)  # a Store (the facade) holds its ParquetStore
    if version not in ("v0.1", "v0.2"):
        raise InputError(f"version {version!r}: expected 'v0.1' or 'v0.2'")
    con = store.con
    run_id = store.resolve_run(run_id)  # an id, a unique prefix or a selector
    row = con.execute("SELECT * FROM stg_runs WHERE run_id = ?", [run_id]).fetchall()
    cols = [d[0] for d in con.execute("SELECT * FROM stg_runs LIMIT 0").description]
    run = dict(zip(cols, row[0], strict=True))
    # a log the reader would refuse is not written: every sample needs a task id, a seed and a
    # status (a MetricResult file has no seeds) ...
    missing = con.execute(
        "SELECT key, CASE WHEN task_id IS NULL THEN 'task_id' WHEN seed IS NULL THEN 'seed'"
        " ELSE 'status' END FROM stg_samples WHERE run_id = ?"
        " AND (task_id IS NULL OR seed IS NULL OR status IS NULL) ORDER BY key LIMIT 1",
        [run_id],
    ).fetchall()
    if missing:
        raise InputError(
            f"run {run_id!r}: sample {missing[0][0]!r} has no {missing[0][1]}, which a hylo "
            "EvalLog requires of every sample; it cannot be exported (export a run ingested "
            "from an EvalLog, or give its samples that field)"
        )
    if version == "v0.1":
        # ... and v0.1 a key '<task_id>#<seed>'
        odd = con.execute(
            "SELECT key, task_id, seed FROM stg_samples WHERE run_id = ?"
            " AND key IS DISTINCT FROM task_id || '#' || CAST(seed AS VARCHAR) LIMIT 1",
            [run_id],
        ).fetchall()
        if odd:
            key, task_id, seed = odd[0]
            raise InputError(
                f"run {run_id!r} has key {key!r}, not '<task_id>#<seed>' "
                f"({task_id}#{seed}), which a v0.1 log requires: export it as v0.2"
            )
    source = run["source_path"] or ""
    prefix = str(Path(source).parent) + os.sep
    rows = con.execute(_samples_sql(prefix), {"run": run_id, "runs": [run_id]}).fetchall()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    benchmark = _drop_none(
        {
            "id": run["benchmark_id"] or run["source_format"],
            "version": run["benchmark_version"],
            "digest": run["benchmark_digest"],
            "split": run["split"],
            "requires_privileged": run["requires_privileged"],
            # the v0.2 benchmark members, as stored (absent when the log had none)
            "episodes_per_task": run["episodes_per_task"],
            "max_steps": json.loads(run["max_steps"]) if run["max_steps"] else None,
            "upstream": json.loads(run["benchmark_upstream"])
            if run["benchmark_upstream"]
            else None,
        }
    )
    agent = _drop_none(
        {
            "name": run["agent_name"],
            "version": run["agent_version"],
            "components": json.loads(run["agent_components"]) if run["agent_components"] else None,
        }
    )
    results = json.loads(run["results"]) if run["results"] else None
    extra = json.loads(run["extra"]) if run["extra"] else {}
    # the run's errors convention travels with it when it is not a hylo log's own (a vla-eval
    # run counts a timeout as a failure, and so does its export when read back)
    policy = run.get("errors_policy") or default_errors(run["source_format"])
    carried = policy if policy != default_errors(V01) else None
    if version == "v0.1":
        samples = ",".join(_with_scores(r[7], r[8]) for r in rows)
        top = {**extra, "version": V01, "run_id": run_id, "benchmark": benchmark, "agent": agent}
        if run["parent_run_id"] is not None:
            top["parent_run_id"] = run["parent_run_id"]
        # not in the v0.1 spec's list, read back by the hylo reader (v0.2: status, eval.created)
        top.update(
            _drop_none(
                {"status": run["status"], "created": run["created"], "errors_policy": carried}
            )
        )
        if results is not None:
            top["results"] = results
    else:
        samples = _v02_samples(rows)
        top = {
            "version": V02,
            "status": run["status"],
            "eval": _drop_none(
                {
                    "run_id": run_id,
                    "parent_run_id": run["parent_run_id"],
                    "created": run["created"],
                    "task": run["benchmark_id"],
                    "benchmark": benchmark,
                    "agent": agent,
                    "source_format": run["source_format"],
                    "errors_policy": carried,
                    "results": results,
                    "extra": extra or None,
                }
            ),
            "results": {
                "metrics": _run_means(store, run_id),
                "total_scenes": len({r[0] for r in rows}),
                "total_trials": len(rows),
            },
            "stats": {
                "n_samples": len({r[0] for r in rows}),
                "n_episodes": len(rows),
                "source_path": run["source_path"],
            },
        }
    text = json.dumps(top, indent=None)
    out.write_text(text[:-1] + (", " if top else "") + f'"samples": [{samples}]' + "}")
    if traces:
        _write_traces(store, run_id, out.parent, prefix)
    return out


def _v02_samples(rows: list[tuple[Any, ...]]) -> str:
    # rows are sorted by key, epoch: one v0.2 sample per key
    out: list[str] = []
    i = 0
    while i < len(rows):
        j = i
        while j < len(rows) and rows[j][0] == rows[i][0]:
            j += 1
        group = rows[i:j]
        epochs, episodes = [], []
        sums: dict[str, list[float]] = {}
        for _key, epoch, _task, _seed, status, episode_id, trace, _body, scores, extra in group:
            sc = json.loads(scores) if scores else {}
            values = {m: (v.get("value") if isinstance(v, dict) else v) for m, v in sc.items()}
            why = {m: v.get("explanation") for m, v in sc.items() if isinstance(v, dict)}
            skipped = {m: v.get("skip_reason") for m, v in sc.items() if isinstance(v, dict)}
            for m, val in values.items():
                sums.setdefault(m, [])
                if val is not None:
                    sums[m].append(float(val))
            epochs.append(values)
            episodes.append(
                _drop_none(
                    {
                        "epoch": epoch,
                        "episode_id": episode_id,
                        "status": status,
                        "trace": trace,
                        "explanation": _drop_none(why) or None,
                        "skip_reason": _drop_none(skipped) or None,
                        "extra": json.loads(extra) if extra else None,
                    }
                )
            )
        first = group[0]
        statuses = {g[4] for g in group}
        out.append(
            json.dumps(
                {
                    "scene_id": first[0],
                    "key": first[0],
                    "task_id": first[2],
                    "seed": first[3],
                    # inspect-robots has one status per scene: 'error' if any epoch errored
                    "status": statuses.pop()
                    if len(statuses) == 1
                    else ("error" if "error" in statuses else first[4]),
                    "epochs": epochs,
                    "reduced": {m: (sum(v) / len(v) if v else None) for m, v in sums.items()},
                    "episodes": episodes,
                }
            )
        )
        i = j
    return ",".join(out)


def _run_means(store: ParquetStore, run_id: str) -> dict[str, float | None]:
    # the figures of mart_aggregate_run (and aggregate): the mean over keys of the resolution
    rows = store.con.execute(
        "SELECT metric, mean FROM mart_aggregate_run WHERE run_id = ? ORDER BY metric",
        [run_id],
    ).fetchall()
    return {m: v for m, v in rows}


def _write_traces(store: ParquetStore, run_id: str, folder: Path, prefix: str) -> None:
    events = with_raw_sql(
        "SELECT run_id, key, episode_id, idx, raw FROM stg_events WHERE run_id = $run"
    )
    rows = store.con.execute(query_sql("export_traces", events=events), {"run": run_id}).fetchall()
    for trace_path, text in rows:
        rel = trace_path[len(prefix) :] if trace_path.startswith(prefix) else Path(trace_path).name
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
