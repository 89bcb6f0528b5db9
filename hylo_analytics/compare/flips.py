"""The episodes that flipped: the keys behind a comparison's wins and losses, one row each.

A comparison counts, per (candidate, metric, task), the pairs the candidate won and lost;
:func:`flip_scores` and :func:`flip_runs` (``Store.flips``) list them. They pair the rows
exactly as :func:`~hylo_analytics.compare.compare_scores` does (the same
:class:`~hylo_analytics.compare._counts.PairedRows` query: epochs reduced by their mean,
the errors policy applied, abstentions dropped), so the flips of a task are its
``candidate_wins`` and ``parent_wins`` (a test holds them equal), and the direction of each
metric is the comparison's (:func:`hylo_analytics.metrics.resolve_directions`).

``change`` names the flip: for a pair of 0/1 values of a metric to maximize, ``regression``
(success -> failure) or ``fix`` (failure -> success); otherwise ``worse`` or ``better`` in the
metric's direction (higher is better when it is unknown, as the comparison counts wins),
with ``diff`` (candidate - parent) and ``improvement`` (``diff`` signed so that positive is
better). Rows come grouped by task, regressions and the worst first, then by size.

From the store, each row also carries what leads to its episode: the runs' episode ids and
epochs of the key, the raw sample id an Inspect log gave it (``sample_id``) and each run's
source file (``candidate_path``, ``parent_path``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

import polars as pl
import pyarrow as pa

from hylo_analytics._harness import Errors, check_errors
from hylo_analytics._sql import query_sql
from hylo_analytics.compare._counts import PairedRows, frame_rows
from hylo_analytics.compare._prepare import Reducer, declared_pairs, one_direction, prepare_scores
from hylo_analytics.compare.runs import candidate_runs, in_run_order, paired_inputs
from hylo_analytics.errors import InputError
from hylo_analytics.metrics import Direction, resolve_directions
from hylo_analytics.resolution import registered
from hylo_analytics.store import FEW_RUNS, ParquetStore, pinned

__all__ = ["CHANGES", "flip_runs", "flip_scores"]

#: The values of ``change``, in the order rows are listed within a task.
CHANGES = ("regression", "worse", "fix", "better")

# one run a query: an equality on run_id reaches the scan of the samples (a list does not)
_LINKS_SQL = """
SELECT s.run_id, s.key,
       list(s.epoch ORDER BY s.epoch, s.episode_id) AS epochs,
       list(s.episode_id ORDER BY s.epoch, s.episode_id) AS episode_ids,
       min(json_extract_string(s.extra, '$.sample_id')) AS sample_id,
       any_value(r.source_path) AS path,
       string_agg(DISTINCT s.status, ',' ORDER BY s.status) AS status
FROM samples AS s INNER JOIN runs AS r ON r.run_id = s.run_id
WHERE s.run_id = $run AND list_contains($keys, s.key)
GROUP BY s.run_id, s.key
"""
# each side's key as the resolution reads it before any errors policy: errored, and why
_SIDES_SQL = """
SELECT run_id, key, metric, errored, skip_reason AS reason FROM int_key_scores
WHERE run_id = $run AND list_contains($keys, key) AND list_contains($metrics, metric)
"""


def flip_scores(
    scores: pl.DataFrame | PairedRows,
    *,
    candidates: Sequence[str] | str,
    parent: str,
    metrics: Sequence[str] | None = None,
    by: Sequence[str] = (),
    reducer: Reducer | None = "mean",
    pair_on_epoch: bool = False,
    directions: Mapping[str, Direction] | None = None,
    errors: Errors | None = None,
    declared: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The keys whose paired values differ, for every candidate against ``parent``.

    ``scores``, ``metrics``, ``by``, ``reducer``, ``pair_on_epoch``, ``directions`` and
    ``errors`` mean what they mean to :func:`~hylo_analytics.compare.compare_scores`; the
    pairs are the same. Returns one row per (candidate, metric, pair key) that flipped:
    ``candidate``, ``parent``, ``metric``, the ``by`` columns, ``key`` (and ``epoch`` when
    ``pair_on_epoch``), ``change``, ``direction``, ``candidate_value``, ``parent_value``,
    ``diff``, ``improvement`` and ``errors`` (the policy applied).
    """
    cands = [candidates] if isinstance(candidates, str) else list(candidates)
    if parent in cands:
        raise InputError(
            f"parent {parent!r} is also listed as a candidate; drop it from the candidates"
        )
    policy_arg = check_errors(errors, "flips: errors")
    if isinstance(scores, PairedRows):
        if policy_arg == "failure":
            raise InputError("errors='failure' needs the scores frame (see Store.flips)")
        found = scores.discordant(parent)
        policy: str = policy_arg or "exclude"
        pk, by = list(scores.pk), list(scores.by)
    else:
        pk, by = (["key", "epoch"] if pair_on_epoch else ["key"]), list(by)
        reduced, has_reason, _dtypes, policy = prepare_scores(
            scores, cands, parent, metrics, by, pk, reducer, policy_arg
        )
        if declared is None and "metadata" in scores.columns:
            declared = declared_pairs(scores)
        with frame_rows(reduced, pk, by, has_reason) as rows:
            found = rows.discordant(parent)
    found = found.rename({f"_k_{k}": k for k in pk if k not in by})
    found = found.drop([f"_k_{k}" for k in pk if k in by])
    out = _classified(found, parent, pk, by, directions, declared, policy)
    if isinstance(scores, pl.DataFrame) and "errored" in scores.columns and pk == ["key"]:
        return _with_sides(out, _frame_sides(scores, [*cands, parent]))
    return out


def _frame_sides(scores: pl.DataFrame, runs: list[str]) -> pl.DataFrame:
    """:func:`_store_sides` of a frame: per (run, key, metric), errored when a row of it
    errored with no value, and its first skip reason."""
    reason = pl.col("skip_reason") if "skip_reason" in scores.columns else pl.lit(None, pl.String)
    return (
        scores.lazy()
        .filter(pl.col("run_id").is_in(runs))
        .group_by("run_id", "key", pl.col("metric").cast(pl.String))
        .agg(
            errored=(pl.col("errored").fill_null(False) & pl.col("value").is_null()).any(),
            reason=reason.cast(pl.String).drop_nulls().first(),
        )
        .collect()
    )


def _with_sides(flips: pl.DataFrame, sides: pl.DataFrame) -> pl.DataFrame:
    """Each flip with both sides' ``errored`` and skip ``reason``, ``errored_side``
    (candidate, parent, both or null) and a ``flip_note`` where a side errored: a harness
    error counted as a failure (``errors='failure'``) is no fix and no regression of the
    policy's, and is said so wherever flips are shown (issue 40)."""
    sides = sides.with_columns(
        pl.col("run_id", "metric").cast(pl.String), pl.col("key").cast(flips.schema["key"])
    )
    flips = flips.with_columns(pl.col("metric").cast(pl.String).alias("_m"))
    cand = sides.select(candidate="run_id", key="key", _m="metric",
                        candidate_errored="errored", candidate_reason="reason")  # fmt: skip
    par = sides.select(parent="run_id", key="key", _m="metric",
                       parent_errored="errored", parent_reason="reason")  # fmt: skip
    out = flips.join(cand, on=["candidate", "key", "_m"], how="left", maintain_order="left")
    out = out.join(par, on=["parent", "key", "_m"], how="left", maintain_order="left").drop("_m")
    ce = pl.col("candidate_errored").fill_null(False)
    pe = pl.col("parent_errored").fill_null(False)
    side = (
        pl.when(ce & pe).then(pl.lit("both")).when(ce).then(pl.lit("candidate"))
        .when(pe).then(pl.lit("parent"))
    )  # fmt: skip
    why = pl.when(pe).then(pl.col("parent_reason")).otherwise(pl.col("candidate_reason"))
    note = pl.format(
        "the {} errored ({}): a harness error, counted as a failure under errors='{}', not "
        "a {} of the policy's",
        side,
        why.fill_null("no reason given"),
        pl.col("errors"),
        pl.col("change"),
    )
    return out.with_columns(
        candidate_errored=ce, parent_errored=pe, errored_side=side,
        flip_note=pl.when(ce | pe).then(note),
    )  # fmt: skip


def _classified(
    found: pl.DataFrame,
    parent: str,
    pk: list[str],
    by: list[str],
    directions: Mapping[str, Direction] | None,
    declared: pl.DataFrame | None,
    policy: str,
) -> pl.DataFrame:
    """``change``, ``direction`` and ``improvement`` of each discordant pair, sorted."""
    metrics = found["metric"].cast(pl.String).unique().to_list()
    dirs = resolve_directions(metrics, explicit=directions, declared=one_direction(declared))
    direction = (
        pl.col("metric")
        .cast(pl.String)
        .replace_strict({m: d for m, (d, _) in dirs.items()}, default="unknown")
    )
    c, p = pl.col("candidate_value"), pl.col("parent_value")
    down = pl.col("direction") == "minimize"
    zero_one = c.is_in([0.0, 1.0]) & p.is_in([0.0, 1.0]) & ~down
    better = pl.col("improvement") > 0
    out = (
        found.with_columns(
            pl.col("candidate").cast(pl.String),
            pl.lit(parent).alias("parent"),
            direction.alias("direction"),
            (c - p).alias("diff"),
        )
        .with_columns(improvement=pl.when(down).then(-pl.col("diff")).otherwise("diff"))
        .with_columns(
            change=pl.when(zero_one & better)
            .then(pl.lit("fix"))
            .when(zero_one)
            .then(pl.lit("regression"))
            .when(better)
            .then(pl.lit("better"))
            .otherwise(pl.lit("worse")),
            errors=pl.lit(policy),
        )
    )
    keys = [k for k in pk if k not in by]
    first = ["candidate", "parent", "metric", *by, *keys, "change", "direction"]
    values = ["candidate_value", "parent_value", "diff", "improvement", "errors"]
    order = pl.col("change").replace_strict({c: i for i, c in enumerate(CHANGES)})
    return out.select(*first, *values).sort(
        ["candidate", "metric", *by, order, pl.col("improvement").abs(), *keys],
        descending=[False, False, *([False] * len(by)), False, True, *([False] * len(keys))],
        nulls_last=False,
    )


@pinned
def flip_runs(
    store: ParquetStore,
    candidates: Sequence[str] | str,
    parent: str,
    *,
    metrics: Sequence[str] | None = ("success",),
    source: str | None = None,
    force: bool = False,
    pending: pa.Table | None = None,
    **options: object,
) -> pl.DataFrame:
    """:func:`flip_scores` on the store's resolved scores, per task, behind the same gate as
    :func:`~hylo_analytics.compare.compare_runs` (same runs, metrics, ``errors``, ``source``,
    ``force`` and engine options), with each key's links (see the module docstring)."""
    cands, parent = candidate_runs(store, candidates, parent)
    by = ["task_id"]
    with registered(store, pending) as rel:
        got = paired_inputs(store, cands, parent, rel, metrics, by, source, force, options)
        flips = flip_scores(
            got.scores,
            candidates=cands,
            parent=parent,
            metrics=got.metrics,
            by=by,
            declared=got.declared,
            **options,  # type: ignore[arg-type]
        )
    flips = _with_sides(flips, _store_sides(store, flips, [*cands, parent]))
    return in_run_order(_linked(store, flips, [*cands, parent]), cands)


def _store_sides(store: ParquetStore, flips: pl.DataFrame, runs: list[str]) -> pl.DataFrame:
    """Each flipped (run, key, metric) as the resolution holds it before the errors policy:
    ``errored`` and the skip reason (one query a run: an equality reaches the scan)."""
    keys = flips["key"].unique().to_list()
    metrics = flips["metric"].cast(pl.String).unique().to_list()
    found = [store.sql(_SIDES_SQL, {"run": r, "keys": keys, "metrics": metrics}) for r in runs]
    found = [f for f in found if f.height]
    schema = {"run_id": pl.String, "key": pl.String, "metric": pl.String,
              "errored": pl.Boolean, "reason": pl.String}  # fmt: skip
    return pl.concat(found) if found else pl.DataFrame(schema=schema)


def _linked(store: ParquetStore, flips: pl.DataFrame, runs: list[str]) -> pl.DataFrame:
    """Each flip with each side's epochs, episode ids and source file, and the sample id."""
    keys = flips["key"].unique().to_list()
    if len(runs) < FEW_RUNS:
        found = [store.sql(_LINKS_SQL, {"run": r, "keys": keys}) for r in runs] if keys else []
    else:  # a selector's 2,000 runs: one scan for every (run, key) to link
        found = [_links_of_many(store, flips)]
    links = pl.concat([f for f in found if f.height]) if any(f.height for f in found) else None
    empty = pl.DataFrame(
        schema={
            "run_id": pl.String,
            "key": pl.String,
            "epochs": pl.List(pl.Int64),
            "episode_ids": pl.List(pl.String),
            "sample_id": pl.String,
            "path": pl.String,
            "status": pl.String,
        }
    )
    links = empty if links is None else links
    cand = links.select(
        pl.col("run_id").alias("candidate"),
        "key",
        pl.col("epochs"),
        pl.col("episode_ids").alias("candidate_episode_ids"),
        "sample_id",
        pl.col("path").alias("candidate_path"),
        pl.col("status").alias("candidate_status"),
    )
    par = links.select(
        pl.col("run_id").alias("parent"),
        "key",
        pl.col("episode_ids").alias("parent_episode_ids"),
        pl.col("path").alias("parent_path"),
        pl.col("status").alias("parent_status"),
    )
    return flips.join(cand, on=["candidate", "key"], how="left", maintain_order="left").join(
        par, on=["parent", "key"], how="left", maintain_order="left"
    )


def _links_of_many(store: ParquetStore, flips: pl.DataFrame) -> pl.DataFrame:
    """The links of every flip's two sides in one query (``compare_flip_links``)."""
    wanted = pl.concat(
        [
            flips.select(pl.col("candidate").alias("run_id"), "key"),
            flips.select(pl.col("parent").alias("run_id"), "key"),
        ]
    ).unique()
    name = f"_flip_keys_{uuid.uuid4().hex[:8]}"
    store.con.register(name, wanted.to_arrow())
    try:
        return store.sql(query_sql("compare_flip_links", wanted=name))
    finally:
        store.con.unregister(name)
