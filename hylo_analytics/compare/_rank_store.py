"""The values a ranking of stored runs pairs, read in one query and reduced in numpy.

:func:`store_values` is :func:`~hylo_analytics.compare.rank_runs`' reader: the runs' policy
and suite as codes (one row each from ``stg_runs``), then ``sql/queries/rank_values.sql``
(the errors policy, a key's epochs reduced where they lie, numbers out: the hashes of run and
key), then the policy's runs of a key reduced together here. No join runs in DuckDB, whose
estimate of the resolved scores' size would put a million rows on the build side of one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from hylo_analytics._harness import Errors
from hylo_analytics._sql import query_sql
from hylo_analytics.compare._prepare import Reducer
from hylo_analytics.compare.pairwise import PolicyValues
from hylo_analytics.compare.runs import _Reader
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.store import ParquetStore

__all__ = ["names_ranked", "store_values"]

SEP = "\x1f"
# DuckDB's ``hash`` is a hash table's, fast but not collision-free on structured strings
# ('Arabic#counted:106@...-00045/1' and '...:306@...-00047/1' share one): on a collision the
# codes are taken again from the lower 64 bits of MD5 (six times slower, so only then).
HASHES = ("hash", "md5_number_lower")


def store_values(
    store: ParquetStore,
    runs: Sequence[str] | None,
    *,
    policy: str,
    strata: Sequence[str],
    metric: str,
    source: str | None,
    policies: Sequence[str] | None,
    errors: Errors | None,
    reducer: Reducer | None,
    keys_of: Sequence[str] = (),
    cluster: str | None = None,
    fewest: int = 2,
) -> tuple[PolicyValues, pl.DataFrame, pl.DataFrame]:
    """The ranking's values of ``runs`` (ids, prefixes or selectors naming every run they
    match; None: every run), the directions their scores declare, and the runs left out
    (``run_id``, ``reason``: no policy field, or no score of the metric). ``keys_of``: other
    metrics whose keys are coded with the metric's, so the ``key_code`` of two calls (one
    per metric, the same ``keys_of``) name the same keys (``Store.pareto``). ``cluster``: a
    score column whose value names each key's cluster (its smallest, should a key's rows
    disagree). With ``keys_of`` the keys are coded over every source, whatever ``source``
    (``Store.calibrate`` reads a judge's source beside an oracle's). ``fewest``: the
    policies it needs (a ranking's two)."""
    from hylo_analytics.aggregate.summaries import select_runs
    from hylo_analytics.resolution import preferred_query, run_filter

    ids = None if runs is None else select_runs(store, list(runs))
    filt = run_filter(store, ids)
    meta = _run_codes(store, ids, policy, list(strata), errors)
    scores = preferred_query(runs=filt is not None, metrics=True, sources=source is not None)
    params: dict[str, object] = {"metrics": [metric]}
    if filt is not None:
        params["runs"] = filt
    if source is not None:
        params["sources"] = [source]
    cl = ""
    if cluster is not None:
        have = store.sql(f"select * from ({scores}) limit 0", params).columns
        if cluster not in have or cluster == "source":
            raise InputError(
                f"rank: the scores have no column {cluster!r} (cluster= takes a score column, "
                f"e.g. task_id: {', '.join(have)})"
            )
        quoted = '"' + cluster.replace('"', '""') + '"'
        cl = f", min(cast({quoted} as varchar)) as cl"
    every = preferred_query(runs=filt is not None, metrics=True) if keys_of else scores
    key_params = {k: v for k, v in params.items() if k != "sources" or not keys_of}
    keys, key_hash = _hashed(
        store,
        f"select key{cl} from ({every}) where key is not null group by key",
        {**key_params, "metrics": list(dict.fromkeys([metric, *keys_of]))},
        "key",
    )
    keys = keys.sort("key")
    fill = _failing_runs(store, meta, scores, params, metric)
    how = reducer or "mean"
    query = query_sql("rank_values", reducer="sum" if how == "mean" else how,
                      scores=f"({scores})", run_hash=meta.hash, key_hash=key_hash)  # fmt: skip
    long = store.sql(query, {**params, "fill": fill})
    if long.is_empty():
        raise SelectionError(
            f"rank: no scores of {metric!r} in the runs selected; check the metric and runs "
            "(see 'hylo-analytics runs')"
        )
    values = _reduced(long, meta, keys, policies, metric, reducer, fewest)
    reader = _Reader(store, ids or [], source, None, {}, ())
    reader.filter = filt  # the same run filter as the values' (None: every run)
    declared = reader.declared([metric])
    return values, declared, _left_out(store, meta, long, policy, metric)


def _left_out(
    store: ParquetStore, meta: _RunCodes, long: pl.DataFrame, policy: str, metric: str
) -> pl.DataFrame:
    """The selected runs the ranking cannot hold, each with why: a run never leaves a
    ranking without a word (the real molmoact2 runs name their success ``success_at_end``)."""
    scored = meta.runs.filter(pl.col("h").is_in(long["run"].unique().implode()))["run_id"]
    silent = meta.runs.filter(~pl.col("run_id").is_in(scored.implode()))["run_id"].to_list()
    from hylo_analytics.resolution import runs_without

    held = runs_without(store, [metric], silent) if silent else None
    unscored = pl.DataFrame({"run_id": silent}, schema={"run_id": pl.String})
    if held is not None:
        unscored = unscored.join(held, on="run_id", how="left")
    else:
        unscored = unscored.with_columns(metrics=pl.lit(None, pl.String))
    return pl.concat(
        [
            pl.DataFrame({"run_id": meta.unnamed}, schema={"run_id": pl.String}).with_columns(
                reason=pl.lit(f"no {policy}: it names no policy")
            ),
            unscored.select(
                "run_id",
                reason=pl.format(
                    "no score of {}; its metrics: {}",
                    pl.lit(repr(metric)),
                    pl.col("metrics").fill_null("none"),
                ),
            ),
        ]
    )


@dataclass(frozen=True)
class _RunCodes:
    """The selected runs: ``runs`` (run_id, hash, policy and suite codes, errors policy),
    the names the codes stand for, and the errors policy the ranking applies (``mixed``
    when the runs' conventions differ)."""

    runs: pl.DataFrame
    policies: list[str]
    strata: list[str]
    errors: str
    unnamed: list[str]
    hash: str  # the function of HASHES the run codes ``h`` come from


def _run_codes(
    store: ParquetStore,
    ids: list[str] | None,
    policy: str,
    strata: list[str],
    errors: Errors | None,
) -> _RunCodes:
    cols = list(dict.fromkeys(["run_id", policy, *strata]))
    where = "" if ids is None else " WHERE list_contains($runs, run_id)"
    meta, run_hash = _hashed(
        store,
        f"SELECT {', '.join(cols)}, run_errors(errors_policy, source_format) AS _conv "
        f"FROM stg_runs{where}",
        None if ids is None else {"runs": ids},
        "run_id",
    )
    unnamed = meta.filter(pl.col(policy).is_null())["run_id"].to_list()
    meta = meta.filter(pl.col(policy).is_not_null())
    stratum = pl.concat_str(
        [pl.col(c).cast(pl.String).fill_null("") for c in strata] or [pl.lit("")], separator=SEP
    )
    meta = meta.with_columns(_pol=pl.col(policy).cast(pl.String), _stratum=stratum)
    policies = sorted(set(meta["_pol"].to_list()))
    suites = sorted(set(meta["_stratum"].to_list()))
    conventions = set(meta["_conv"].to_list())
    applied = errors or (conventions.pop() if len(conventions) == 1 else "mixed")
    runs = meta.select(
        "run_id",
        "h",
        policy=pl.col("_pol").cast(pl.Enum(policies)).to_physical().cast(pl.Int64),
        stratum=pl.col("_stratum").cast(pl.Enum(suites)).to_physical().cast(pl.Int64),
        errors=pl.lit(errors, pl.String).fill_null(pl.col("_conv")),
    ).sort("h")
    return _RunCodes(runs, policies, suites, applied, unnamed, run_hash)


def _hashed(
    store: ParquetStore, query: str, params: Mapping[str, object] | None, column: str
) -> tuple[pl.DataFrame, str]:
    """``query``'s rows with ``h``, the code of their distinct ``column``, and the function of
    :data:`HASHES` it comes from: the first under which no two values share a code."""
    both = ", ".join(f"{f}({column}) AS _h{i}" for i, f in enumerate(HASHES))
    rows = store.sql(f"SELECT *, {both} FROM ({query})", params)
    for i, name in enumerate(HASHES):
        if rows[f"_h{i}"].n_unique() == rows[column].n_unique():
            return rows.rename({f"_h{i}": "h"}).drop(
                f"_h{j}" for j in range(len(HASHES)) if j != i
            ), name
    raise SelectionError(
        f"rank: two {column}s share a 64-bit code under every hash; rank them as a frame"
    )


def _failing_runs(
    store: ParquetStore,
    meta: _RunCodes,
    scores: str,
    params: Mapping[str, object],
    metric: str,
) -> list[str]:
    """The runs whose errored abstentions count as failures: errors policy ``failure`` and a
    0/1 metric (declared binary, or declared nothing and every valid value of the run 0 or 1:
    ``compare._prepare``'s rule, through the same macro as ``int_paired``)."""
    failing = meta.runs.filter(pl.col("errors") == "failure")["run_id"].to_list()
    if not failing:
        return []
    kind = store.sql("select declared_kind(cast($m as varchar)) as k", {"m": metric})["k"][0]
    if kind is not None:
        return failing if kind == "binary" else []
    zero_one = store.sql(
        "select run_id from (select run_id, coalesce(bool_and(value in (0, 1)) filter (where "
        f"value is not null), true) as z from ({scores}) group by run_id) where z",
        params,
    )["run_id"]
    return [r for r in failing if r in set(zero_one.to_list())]


def _reduced(
    long: pl.DataFrame,
    meta: _RunCodes,
    keys: pl.DataFrame,
    policies: Sequence[str] | None,
    metric: str,
    reducer: Reducer | None,
    fewest: int = 2,
) -> PolicyValues:
    """The (run, key) rows of ``rank_values`` reduced per (policy, suite, key), in numpy:
    a mean is the sum of the runs' sums over the sum of their valid counts (every valid row
    of the key weighs the same, as when one frame's epochs and runs are reduced together)."""
    run_h = meta.runs["h"].to_numpy()
    key_h = keys["h"].to_numpy()
    key_order = np.argsort(key_h)
    cluster = None
    if "cl" in keys.columns:  # each key's cluster code (null values together one cluster)
        cluster = (keys["cl"].fill_null("").rank("dense") - 1).to_numpy().astype(np.int64)
    run = np.searchsorted(run_h, long["run"].to_numpy())
    key = key_order[np.searchsorted(key_h[key_order], long["key"].to_numpy())]
    pol = meta.runs["policy"].to_numpy()[run]
    strat = meta.runs["stratum"].to_numpy()[run]
    n_k, n_s = max(len(key_h), 1), max(len(meta.strata), 1)
    group, back = np.unique((pol * n_s + strat) * n_k + key, return_inverse=True)
    back = back.ravel()
    n_rows = np.bincount(back, weights=long["n_rows"].to_numpy(), minlength=len(group))
    if reducer is None and (n_rows > 1).any():
        g = int(group[np.argmax(n_rows > 1)])
        raise InputError(
            f"rank: policy {meta.policies[g // (n_s * n_k)]!r} has several rows (epochs or "
            f"runs) of key {keys['key'][g % n_k]!r}: choose reducer='mean'|'max'|'min' "
            "(CLI: --reducer)"
        )
    value = long["value"].fill_null(float("nan")).to_numpy()
    if (reducer or "mean") == "mean":
        valid = np.bincount(back, weights=long["n_valid"].to_numpy(), minlength=len(group))
        sums = np.bincount(back, weights=np.nan_to_num(value), minlength=len(group))
        with np.errstate(invalid="ignore", divide="ignore"):
            reduced = np.where(valid > 0, sums / np.maximum(valid, 1), np.nan)
    else:
        reduced = np.full(len(group), np.nan)
        (np.fmax if reducer == "max" else np.fmin).at(reduced, back, value)
    g_pol, g_strat, g_key = group // (n_s * n_k), (group // n_k) % n_s, group % n_k
    held = sorted(np.asarray(meta.policies, dtype=object)[np.unique(g_pol)].tolist())
    names = names_ranked(policies, held, metric, fewest)
    index = {n: i for i, n in enumerate(names)}
    recode = (
        pl.Series(meta.policies, dtype=pl.String)
        .replace_strict(index, default=-1, return_dtype=pl.Int64)
        .to_numpy()
    )
    mine = recode[g_pol]
    keep = mine >= 0
    return PolicyValues.from_codes(
        policies=names,
        strata=meta.strata,
        policy=mine[keep],
        stratum=g_strat[keep],
        key=g_key[keep],
        value=reduced[keep],
        errors=meta.errors,
        cluster=None if cluster is None else cluster[g_key[keep]],
    )


def names_ranked(
    policies: Sequence[str] | None, held: list[str], metric: str, fewest: int = 2
) -> list[str]:
    names = list(policies) if policies is not None else held
    missing = [p for p in names if p not in held]
    if missing:
        shown = held if len(held) <= 20 else [*held[:20], f"... ({len(held):,} in all)"]
        raise SelectionError(f"rank: no scores of {metric!r} for policies {missing}; have {shown}")
    if len(set(names)) < fewest:
        raise SelectionError(
            f"rank: needs at least two policies, got {names}; select runs of two or more"
        )
    return names
