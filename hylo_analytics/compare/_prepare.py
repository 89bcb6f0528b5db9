"""The rows a comparison pairs: the runs and metrics asked, the errors policy, epochs reduced.

:func:`prepare_scores` turns a long scores frame into one row per (run, pair key, metric),
refusing what would silently mislead (two sources of one key, duplicates without a reducer);
``compare_scores``, ``flip_scores`` and ``rank_policies`` pair what it returns.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import polars as pl

from hylo_analytics._harness import Errors, check_errors, policy_column
from hylo_analytics._lazy import LazyModule
from hylo_analytics.errors import InputError
from hylo_analytics.metrics import default_registry

if TYPE_CHECKING:
    from scipy import special
else:
    special = LazyModule("scipy.special")

__all__ = ["Reducer", "declared_pairs", "one_direction", "prepare_scores"]

Reducer = Literal["mean", "max", "min"]
_REDUCERS = ("mean", "max", "min")


def prepare_scores(
    scores: pl.DataFrame,
    cands: list[str],
    parent: str,
    metrics: Sequence[str] | None,
    by: list[str],
    pk: list[str],
    reducer: Reducer | None,
    errors: Errors | None,
    keep: Sequence[str] = (),
) -> tuple[pl.DataFrame, bool, dict[str, pl.DataType], str]:
    """The frame's rows of the runs and metrics asked for, one per (run, pair key, metric):
    the rows, whether they carry skip reasons, the dtypes of the id columns and the errors
    policy applied (``mixed`` when the runs' conventions differ). ``keep``: columns of the
    key carried along as ``by`` columns are (a cluster), the first epoch's value."""
    _check_columns(scores, ["run_id", "metric", "value", *pk, *by, *keep])
    _check_one_source(scores, pk)
    frame = scores.lazy().filter(pl.col("run_id").is_in([*cands, parent]))
    if metrics is not None:
        frame = frame.filter(pl.col("metric").is_in(list(metrics)))
    has_reason = "skip_reason" in scores.columns
    cols = list(dict.fromkeys(["run_id", *pk, "metric", *by, *keep]))
    extra = [pl.col("skip_reason").cast(pl.String)] if has_reason else []
    extra.append(policy_column(scores.columns, errors).alias("_policy"))
    if "errored" in scores.columns:
        extra.append(pl.col("errored").fill_null(False))
    elif errors == "failure":
        raise InputError(
            "errors='failure' needs an 'errored' column (the store's resolved scores have "
            "one: compare runs with Store.compare)"
        )
    value = pl.col("value").cast(pl.Float64).fill_nan(None)
    ids = frame.select(*cols, value, *extra).collect()
    policies = sorted(set(ids["_policy"].unique().drop_nulls().to_list()))
    policy = errors or (policies[0] if len(policies) == 1 else "mixed" if policies else "exclude")
    ids = _apply_errors(ids)
    reduced = _reduce(ids, [*pk, "metric"], list(dict.fromkeys([*by, *keep])), reducer, pk,
                      has_reason)  # fmt: skip
    dtypes = {c: scores.schema[c] for c in ["metric", *by]}
    return reduced, has_reason, dtypes, policy


def _errors_option(errors: Errors | None, errors_as_failures: bool | None) -> Errors | None:
    """``errors`` checked, with the deprecated ``errors_as_failures`` read as its alias."""
    errors = check_errors(errors, "compare: errors")
    if errors_as_failures is None:
        return errors
    warnings.warn(
        "errors_as_failures= is deprecated: pass errors='failure' (or 'exclude')",
        DeprecationWarning,
        stacklevel=3,
    )
    alias: Errors = "failure" if errors_as_failures else "exclude"
    if errors is not None and errors != alias:
        raise InputError(f"errors={errors!r} contradicts errors_as_failures={errors_as_failures}")
    return alias


def _apply_errors(frame: pl.DataFrame) -> pl.DataFrame:
    """The errors policy (``_policy`` per row): an errored abstention of a run under
    ``failure`` becomes a failure (0) where the metric is 0/1 for that run (declared binary,
    or declared nothing and every valid value of the run 0 or 1), as aggregate decides it per
    group; otherwise it stays a drop."""
    if "errored" not in frame.columns:
        return frame.drop("_policy")
    reg = default_registry()
    not_binary = [
        n for m in reg.ids() if reg.get(m).kind != "binary" for n in (m, *reg.get(m).aliases)
    ]
    binary = (
        frame.group_by("run_id", "metric")
        .agg(_01=pl.col("value").drop_nulls().is_in([0.0, 1.0]).all())
        .filter(pl.col("_01") & ~pl.col("metric").cast(pl.String).is_in(not_binary))
        .select("run_id", "metric")
        .with_columns(_bin=pl.lit(True))
    )
    out = frame.join(binary, on=["run_id", "metric"], how="left")
    # a harness error: what the other errors policy counts differently (kept per row)
    out = out.with_columns(_err=pl.col("value").is_null() & pl.col("errored"))
    fill = (
        pl.col("value").is_null()
        & pl.col("errored")
        & (pl.col("_policy") == "failure")
        & pl.col("_bin").fill_null(False)
    )
    out = out.with_columns(value=pl.when(fill).then(0.0).otherwise(pl.col("value")))
    if "skip_reason" in out.columns:
        out = out.with_columns(skip_reason=pl.when(fill).then(None).otherwise("skip_reason"))
    return out.drop("errored", "_policy", "_bin")


def declared_pairs(scores: pl.DataFrame) -> pl.DataFrame:
    """The distinct (metric, direction) pairs the score rows declare in ``metadata``."""
    return (
        scores.lazy()
        .select(
            pl.col("metric").cast(pl.String),
            direction=pl.col("metadata").cast(pl.String).str.json_path_match("$.direction"),
        )
        .unique()
        .collect()
    )


def one_direction(declared: pl.DataFrame | None) -> dict[str, str]:
    """metric -> the direction its rows declare, when they declare one (unambiguous)."""
    if declared is None:
        return {}
    found = (
        declared.filter(pl.col("direction").is_in(["maximize", "minimize"]))
        .group_by("metric")
        .agg(pl.col("direction").unique())
    )
    return {m: ds[0] for m, ds in found.iter_rows() if len(ds) == 1}


def _check_columns(frame: pl.DataFrame, needed: list[str]) -> None:
    missing = [c for c in dict.fromkeys(needed) if c not in frame.columns]
    if missing:
        raise InputError(f"scores frame lacks column(s) {missing}; it has {frame.columns}")


def _check_one_source(frame: pl.DataFrame, pk: list[str]) -> None:
    """Two sources of one key are two scorers, not two epochs: never average them."""
    if "source" not in frame.columns:
        return
    many = frame.group_by("run_id", *pk, "metric").agg(n=pl.col("source").n_unique())
    bad = many.filter(pl.col("n") > 1)
    if bad.height:
        ex = bad.row(0, named=True)
        raise InputError(
            f"{bad.height} (run, key, metric) combination(s) have scores of several sources, "
            f"e.g. run {ex['run_id']!r} key {ex['key']!r} metric {ex['metric']!r}; read the "
            "resolved scores (hylo_analytics.resolution) or filter one source first"
        )


def _reduce(
    frame: pl.DataFrame,
    ident: list[str],
    by: list[str],
    reducer: Reducer | None,
    pk: list[str],
    has_reason: bool,
) -> pl.DataFrame:
    """One row per (run, pair key, metric): refuse duplicates or reduce them explicitly."""
    group = ["run_id", *ident]
    if reducer is not None and reducer not in _REDUCERS:
        raise InputError(f"reducer must be one of {_REDUCERS} (never first/last), got {reducer!r}")
    ids = [
        pl.col(c).to_physical() if frame.schema[c] == pl.Categorical else pl.col(c) for c in group
    ]
    # a 64-bit row hash settles the common case (no duplicates) in one cheap pass; a hash
    # collision only costs the exact check below
    if frame.select(pl.struct(ids).hash(0).n_unique()).item() == frame.height:
        return frame
    counts = frame.group_by(group).len().filter(pl.col("len") > 1)
    if counts.is_empty():
        return frame
    if reducer is None:
        ex = counts.row(0, named=True)
        raise InputError(
            f"{counts.height} (run, key, metric) combination(s) have several rows (epochs), "
            f"e.g. run {ex['run_id']!r} key {ex['key']!r} metric {ex['metric']!r}: "
            f"{ex['len']} rows. Choose reducer='mean'|'max'|'min' (CLI: --reducer), or pair_on_epoch=True "
            "(CLI: --pair-on-epoch)."
        )
    value = getattr(pl.col("value"), reducer)()
    extra = [pl.col(b).first() for b in by if b not in pk]
    if "_err" in frame.columns:  # a key is a harness error when every epoch of it is one
        extra += [pl.col("_err").all(), pl.col("_err").any().alias("_err_any")]
    if has_reason:  # a key that abstained on every epoch keeps the first epoch's reason
        extra.append(pl.col("skip_reason").drop_nulls().first())
    # in order of first appearance: the rows' order is the order a bootstrap reads their
    # differences in, so an unordered group-by would change the interval from call to call
    return frame.group_by(group, maintain_order=True).agg(value, *extra)
