"""The paired-comparison engine: every candidate run against one parent, as one join.

:func:`compare_scores` works on a long scores frame (``run_id, key, metric, value`` plus any
``by`` columns), so it is usable on data that never went through a store;
:func:`~hylo_analytics.compare.compare_runs` (``Store.compare``) reads the resolved scores,
applies the comparability gate and calls it, and
:func:`~hylo_analytics.compare.paired_compare` is its two-run case. One tidy frame comes back:
one row per (candidate, metric) overall and one per ``by`` group, with wins, the one-sided
p of the verdict's test in each direction, their adjustment within the row's family, the mean
difference with its interval, what the dropped pairs could change, and a verdict with the p
that decided it and a note that says why. Every statistic is :mod:`hylo_analytics.stats`';
this module only lays the pairs out for it.

- **Intervals**: ``ci="auto"`` gives Tango's score interval for 0/1 metrics (it keeps its
  coverage near 0 and 1, where the percentile bootstrap collapses) and the percentile
  bootstrap of the differences otherwise; ``eq_low`` / ``eq_high`` are the same interval at ``1 - 2 alpha``, the
  equivalence (TOST) interval the verdict reads.
- **Tests**: the verdict's test is the one its interval inverts (column ``test``), so a
  verdict and the interval beside it describe one estimand, the mean difference: Tango's
  score test for 0/1 metrics, the bootstrap test of the mean from the interval's own
  resamples otherwise (percentile, BCa or bootstrap-t as ``ci`` says; the z test for
  ``normal``). ``p_mcnemar`` keeps the one-sided exact McNemar (the sign test for numeric
  metrics), the brief's statistic and ``paired_compare``'s ``p_value``; with ``ci="none"``
  it is the verdict's test.
- **Families**: p-values are adjusted within a family, by default one (candidate, metric,
  level): an overall row is its own family and adding ``by=`` never changes its verdict;
  ``family="level"`` pools every candidate and metric of one level.
- **Directions** come from one place (:func:`hylo_analytics.metrics.resolve_directions`):
  ``directions=``, then what the scores declare (their ``metadata`` ``direction``), then the
  metric registry; a metric with none is ``unknown``: two-sided tests, no improved/regressed.
- **Dropped pairs** (one side abstained) are counted per side, with their reasons, and the
  range the difference would span had they counted (``diff_if_drops_min`` / ``_max``, the
  dropped values set to the ends of the metric's observed range). Errored abstentions follow
  the errors policy (:mod:`hylo_analytics._harness`, column ``errors``): under ``failure`` an
  errored key of a 0/1 metric is a failure (0), under ``exclude`` a drop; by default each
  run's harness convention (vla-eval: failure; Inspect and hylo: exclude).

The key is the unit: several epochs of one key are reduced (by their mean, as in the SQL view
``int_key_scores``) before pairing, unless ``pair_on_epoch``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from hylo_analytics._harness import Errors, check_errors, policy_column
from hylo_analytics._lazy import LazyModule
from hylo_analytics.compare._counts import PairedRows, frame_rows
from hylo_analytics.compare.verdicts import Rule, StatisticalRule, add_verdicts
from hylo_analytics.metrics import Direction, default_registry, resolve_directions
from hylo_analytics.stats.bootstrap import DEFAULT_RESAMPLES, BootstrapMethod, bootstrap_test
from hylo_analytics.stats.intervals import DEFAULT_LEVEL, StatisticsWarning, z_value
from hylo_analytics.stats.paired import newcombe_ci, tango_ci, tango_p
from hylo_analytics.stats.significance import (
    Alternative,
    benjamini_hochberg,
    holm,
    mcnemar_p,
    signed_rank_p,
)

if TYPE_CHECKING:
    from scipy import special
else:
    special = LazyModule("scipy.special")

__all__ = [
    "COLUMNS",
    "TEST_LABELS",
    "CiMethod",
    "Family",
    "Reducer",
    "compare_scores",
    "test_label",
]

Reducer = Literal["mean", "max", "min"]
CiMethod = Literal["auto", "score", "newcombe", "bootstrap", "bca", "studentized", "normal", "none"]
Family = Literal["comparison", "level"]
_REDUCERS = ("mean", "max", "min")
_CI_METHODS = ("auto", "score", "newcombe", "bootstrap", "bca", "studentized", "normal", "none")
COLUMNS = (
    "direction",
    "direction_source",
    "n_pairs",
    "candidate_wins",
    "parent_wins",
    "ties",
    "n_dropped",
    "n_dropped_candidate",
    "n_dropped_parent",
    "n_dropped_both",
    "n_unmatched",
    "test",
    "p_value",
    "p_worse",
    "p_holm",
    "p_worse_holm",
    "p_bh",
    "p_worse_bh",
    "family",
    "family_size",
    "mean_candidate",
    "mean_parent",
    "mean_diff",
    "ci_low",
    "ci_high",
    "ci_method",
    "ci_adj_low",
    "ci_adj_high",
    "ci_adj_level",
    "eq_low",
    "eq_high",
    "margin",
    "diff_if_drops_min",
    "diff_if_drops_max",
    "drop_reasons",
    "drop_note",
    "wilcoxon_p",
    "p_mcnemar",
    "p_two_sided",
    "p_verdict",
    "verdict",
    "verdict_note",
    "verdict_rule",
)


def compare_scores(
    scores: pl.DataFrame | PairedRows,
    *,
    candidates: Sequence[str] | str,
    parent: str,
    metrics: Sequence[str] | None = None,
    by: Sequence[str] = (),
    reducer: Reducer | None = "mean",
    pair_on_epoch: bool = False,
    alternative: Alternative = "greater",
    mid_p: bool = False,
    directions: Mapping[str, Direction] | None = None,
    ci: CiMethod = "auto",
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
    rule: Rule | None = None,
    family: Family = "comparison",
    errors: Errors | None = None,
    errors_as_failures: bool | None = None,
    forced: Mapping[str, str] | None = None,
    declared: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Compare every candidate with ``parent`` on the keys they share, overall and per ``by``.

    Parameters
    ----------
    scores : one row per (run_id, key[, epoch], metric) with a nullable ``value``; optional
        ``skip_reason`` (names the drops), ``errored`` (for the errors policy), ``_policy`` or
        ``source_format`` (each row's harness convention) and
        ``metadata`` (declared directions) columns. With a ``source`` column, one source per
        key (resolve first: several sources are refused). Or rows already reduced to one per
        pair key, as SQL (``Store.compare`` pairs the store's scores where they lie); both
        are paired and counted by the same queries (:mod:`hylo_analytics.compare._counts`).
    reducer : how several epochs of one key are reduced before pairing (default ``mean``, the
        rule of ``int_key_scores``); ``None`` refuses duplicates with an error (never "the
        last one wins"). Abstentions are ignored by the reducer; a key whose epochs all
        abstained stays an abstention.
    pair_on_epoch : pair on (key, epoch) instead of reducing epochs.
    alternative : ``greater`` (default): ``p_value`` is the one-sided p that the candidate is
        better, ``p_worse`` that it is worse; ``two-sided``: both are the two-sided p. The
        test is the one the interval inverts (``test``; see the module docstring).
    mid_p : the mid-p variant of the exact McNemar (``p_mcnemar``, and ``p_value`` when
        ``ci="none"``).
    directions : metric -> "maximize" | "minimize", over what the scores and the registry say.
    ci : ``auto`` (Tango score interval for 0/1 metrics, percentile bootstrap of the paired
        differences otherwise), ``score`` or ``newcombe`` (0/1 metrics; others as auto),
        ``bootstrap`` (percentile), ``bca``, ``studentized``, ``normal`` (Wald; warns where it
        is known to fail) or ``none``; at ``level``.
    rule : the verdict rule (default :class:`StatisticalRule`); its ``alpha`` also sets the
        equivalence interval's level, ``1 - 2 alpha``.
    family : ``comparison`` (default: adjust within one candidate, metric and level) or
        ``level`` (every candidate and metric of one level together).
    errors : ``failure``: an errored abstention of a 0/1 metric (declared binary, or every
        valid value of its run 0 or 1) is a failure (0); ``exclude``: a drop; None (default):
        each run's harness convention. Named in the ``errors`` column (``mixed`` when the
        runs' conventions differ).
    errors_as_failures : deprecated alias: True is ``errors="failure"``.
    forced : candidate -> what the gate found different, for candidates compared anyway.
    declared : the (``metric``, ``direction``) pairs the scores' metadata declare, when read
        elsewhere (``Store.compare`` reads them in SQL); by default read from ``metadata``.
    """
    cands = [candidates] if isinstance(candidates, str) else list(candidates)
    if parent in cands:
        raise ValueError(f"parent {parent!r} is also listed as a candidate")
    if ci not in _CI_METHODS:
        raise ValueError(f"ci must be one of {_CI_METHODS}, got {ci!r}")
    if family not in ("comparison", "level"):
        raise ValueError(f"family must be 'comparison' or 'level', got {family!r}")
    rule = rule or StatisticalRule()
    errors = _errors_option(errors, errors_as_failures)
    if isinstance(scores, PairedRows):
        if errors == "failure":
            raise ValueError("errors='failure' needs the scores frame (see Store.compare)")
        policy: str = errors or "exclude"
        out = _compare(scores, cands, parent, declared, directions, alternative, mid_p, ci,
                       (n_resamples, level, seed), rule, family)  # fmt: skip
        dtypes: dict[str, pl.DataType] = {}
    else:
        pk = ["key", "epoch"] if pair_on_epoch else ["key"]
        reduced, has_reason, dtypes, policy = _prepare(
            scores, cands, parent, metrics, list(by), pk, reducer, errors
        )
        if declared is None and "metadata" in scores.columns:
            declared = _declared_pairs(scores)
        with frame_rows(reduced, pk, list(by), has_reason) as rows:
            out = _compare(rows, cands, parent, declared, directions, alternative, mid_p, ci,
                           (n_resamples, level, seed), rule, family)  # fmt: skip
    out = out.with_columns(
        pl.col("candidate").cast(pl.String),
        *(pl.col(c).cast(t) for c, t in dtypes.items() if c != "candidate"),
    )
    forced = forced or {}
    out = out.with_columns(
        pl.lit(parent).alias("parent"),
        pl.lit(alternative).alias("alternative"),
        pl.lit(mid_p).alias("mid_p"),
        pl.lit(level).alias("ci_level"),
        pl.lit(policy).alias("errors"),
        pl.col("candidate").is_in(list(forced)).alias("forced"),
        pl.col("candidate")
        .replace_strict(forced, default=None, return_dtype=pl.String)
        .alias("gate_note"),
    )
    first = ["candidate", "parent", "metric", "level", *by, *COLUMNS]
    return out.select(*first, pl.exclude(first)).sort(
        "candidate", "metric", "level", *by, nulls_last=False
    )


def _prepare(
    scores: pl.DataFrame,
    cands: list[str],
    parent: str,
    metrics: Sequence[str] | None,
    by: list[str],
    pk: list[str],
    reducer: Reducer | None,
    errors: Errors | None,
) -> tuple[pl.DataFrame, bool, dict[str, pl.DataType], str]:
    """The frame's rows of the runs and metrics asked for, one per (run, pair key, metric):
    the rows, whether they carry skip reasons, the dtypes of the id columns and the errors
    policy applied (``mixed`` when the runs' conventions differ)."""
    _check_columns(scores, ["run_id", "metric", "value", *pk, *by])
    _check_one_source(scores, pk)
    frame = scores.lazy().filter(pl.col("run_id").is_in([*cands, parent]))
    if metrics is not None:
        frame = frame.filter(pl.col("metric").is_in(list(metrics)))
    has_reason = "skip_reason" in scores.columns
    cols = list(dict.fromkeys(["run_id", *pk, "metric", *by]))
    extra = [pl.col("skip_reason").cast(pl.String)] if has_reason else []
    extra.append(policy_column(scores.columns, errors).alias("_policy"))
    if "errored" in scores.columns:
        extra.append(pl.col("errored").fill_null(False))
    elif errors == "failure":
        raise ValueError(
            "errors='failure' needs an 'errored' column (the store's resolved scores have "
            "one: compare runs with Store.compare)"
        )
    value = pl.col("value").cast(pl.Float64).fill_nan(None)
    ids = frame.select(*cols, value, *extra).collect()
    policies = sorted(set(ids["_policy"].unique().drop_nulls().to_list()))
    policy = errors or (policies[0] if len(policies) == 1 else "mixed" if policies else "exclude")
    ids = _apply_errors(ids)
    reduced = _reduce(ids, [*pk, "metric"], by, reducer, pk, has_reason)
    dtypes = {c: scores.schema[c] for c in ["metric", *by]}
    return reduced, has_reason, dtypes, policy


def _compare(
    rows: PairedRows,
    cands: list[str],
    parent: str,
    declared: pl.DataFrame | None,
    directions: Mapping[str, Direction] | None,
    alternative: Alternative,
    mid_p: bool,
    ci: CiMethod,
    boot: tuple[int, float, int],
    rule: Rule,
    family: Family,
) -> pl.DataFrame:
    """Every statistic of the comparison, from the counts of ``rows``' pairs."""
    by = list(rows.by)
    pat = rows.patterns(parent)
    fine = _sums(pat, by)
    missing = set(cands) - set(fine["candidate"].cast(pl.String).to_list())
    if missing:
        raise ValueError(f"candidate(s) {sorted(missing)} have no scores to compare")
    present = fine["metric"].cast(pl.String).unique().to_list()
    dirs = resolve_directions(present, explicit=directions, declared=_one_direction(declared))
    out = _aggregate(rows, pat, fine, parent, dirs, alternative, mid_p)
    # the family each row's p is adjusted in, so its interval can be adjusted the same way
    out = out.with_columns(family_size=pl.len().over(_family_keys(family)).cast(pl.Int64))
    out = _with_ci(out, rows, parent, ci, boot, rule.equivalence_level)
    out = _with_test(out, alternative)
    out = _with_tost(out, rule)
    out = _with_drops(out, pat, by, rows.has_reason)
    out = _adjust(out, family, by)
    return add_verdicts(out, rule)


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
        raise ValueError(f"errors={errors!r} contradicts errors_as_failures={errors_as_failures}")
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


def _declared_pairs(scores: pl.DataFrame) -> pl.DataFrame:
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


def _one_direction(declared: pl.DataFrame | None) -> dict[str, str]:
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
        raise ValueError(f"scores frame lacks column(s) {missing}; it has {frame.columns}")


def _check_one_source(frame: pl.DataFrame, pk: list[str]) -> None:
    """Two sources of one key are two scorers, not two epochs: never average them."""
    if "source" not in frame.columns:
        return
    many = frame.group_by("run_id", *pk, "metric").agg(n=pl.col("source").n_unique())
    bad = many.filter(pl.col("n") > 1)
    if bad.height:
        ex = bad.row(0, named=True)
        raise ValueError(
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
        raise ValueError(f"reducer must be one of {_REDUCERS} (never first/last), got {reducer!r}")
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
        raise ValueError(
            f"{counts.height} (run, key, metric) combination(s) have several rows (epochs), "
            f"e.g. run {ex['run_id']!r} key {ex['key']!r} metric {ex['metric']!r}: "
            f"{ex['len']} rows. Choose reducer='mean'|'max'|'min' (CLI: --reducer), or pair_on_epoch=True "
            "(CLI: --pair-on-epoch)."
        )
    value = getattr(pl.col("value"), reducer)()
    extra = [pl.col(b).first() for b in by if b not in pk]
    if has_reason:  # a key that abstained on every epoch keeps the first epoch's reason
        extra.append(pl.col("skip_reason").drop_nulls().first())
    # in order of first appearance: the rows' order is the order a bootstrap reads their
    # differences in, so an unordered group-by would change the interval from call to call
    return frame.group_by(group, maintain_order=True).agg(value, *extra)


def _levels(frame: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """``frame`` once as level 'overall' (by columns null) and once per ``by`` group."""
    overall = frame.with_columns(
        pl.lit("overall").alias("level"), *[pl.lit(None, frame.schema[b]).alias(b) for b in by]
    )
    if not by:
        return overall
    return pl.concat([overall, frame.with_columns(pl.lit("/".join(by)).alias("level"))])


def _up(fine: pl.DataFrame, by: list[str], sums: list[str], first: list[str]) -> pl.DataFrame:
    """Per-group aggregates plus the overall rows, summed from them (no second pass)."""
    keys = [c for c in fine.columns if c not in (*sums, *first, *by)]
    overall = fine.group_by(keys).agg(pl.col(first).first(), pl.col(sums).sum())
    overall = overall.with_columns(
        pl.lit("overall").alias("level"), *[pl.lit(None, fine.schema[b]).alias(b) for b in by]
    )
    if not by:
        return overall
    per = fine.with_columns(pl.lit("/".join(by)).alias("level"))
    return pl.concat([overall, per], how="diagonal")


_V, _PV, _N = pl.col("v"), pl.col("pv"), pl.col("n")
_OK = _V.is_not_null() & _PV.is_not_null()
_D = _V - _PV


def _sums(pat: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Per (candidate, metric, by group): the counts and sums of the pairs, weighted by the
    patterns' ``n``, and the range of the values and of the non-zero ``|d|``."""
    matched = pl.col("matched")
    cand_dropped = matched & _V.is_null() & _PV.is_not_null()
    par_dropped = matched & _PV.is_null() & _V.is_not_null()
    ok, d, n = _OK, _D, _N
    nzd = d.filter(ok & (d != 0)).abs()
    # in the patterns' order (sorted in SQL): float sums come out the same on every call
    return pat.group_by(["candidate", "metric", *by], maintain_order=True).agg(
        n_rows=n.sum(),
        n_matched=n.filter(matched).sum(),
        n_pairs=n.filter(ok).sum(),
        n_pos=n.filter(ok & (d > 0)).sum(),
        n_neg=n.filter(ok & (d < 0)).sum(),
        n_11=n.filter(ok & (_V == 1) & (_PV == 1)).sum(),
        n_nonbinary=n.filter(ok & ~(_V.is_in([0.0, 1.0]) & _PV.is_in([0.0, 1.0]))).sum(),
        sum_c=(_V * n).filter(ok).sum(),
        sum_p=(_PV * n).filter(ok).sum(),
        sum_d=(d * n).filter(ok).sum(),
        sum_d2=(d * d * n).filter(ok).sum(),
        n_dropped_candidate=n.filter(cand_dropped).sum(),
        n_dropped_parent=n.filter(par_dropped).sum(),
        n_dropped_both=n.filter(matched & _V.is_null() & _PV.is_null()).sum(),
        sum_pv_cd=(_PV * n).filter(cand_dropped).sum(),
        sum_cv_pd=(_V * n).filter(par_dropped).sum(),
        lo=pl.min_horizontal(_V.min(), _PV.min()),
        hi=pl.max_horizontal(_V.max(), _PV.max()),
        abs_lo=nzd.min(),
        abs_hi=nzd.max(),
    )


def _aggregate(
    rows: PairedRows,
    pat: pl.DataFrame,
    fine: pl.DataFrame,
    parent: str,
    directions: Mapping[str, tuple[str, str | None]],
    alternative: Alternative,
    mid_p: bool,
) -> pl.DataFrame:
    """Counts, means, Wilcoxon and the exact McNemar p-values for every (candidate, metric, level,
    group), from the sums of each finest group (``rows.sums``); the overall rows are sums of
    those."""
    by = list(rows.by)
    gcols = ["candidate", "metric", "level", *by]
    abs_lo, abs_hi = fine.select(pl.col("abs_lo").min(), pl.col("abs_hi").max()).row(0)
    sums = [c for c in fine.columns if c.startswith(("n_", "sum_"))]
    st = _up(fine.select("candidate", "metric", *by, *sums), by, sums, [])
    n_parent = _up(rows.parent_rows(parent), by, ["n_parent"], [])
    st = st.join(n_parent, on=["metric", "level", *by], how="left", nulls_equal=True)
    # the range of the metric's values (either side, any pair): what a dropped value could be
    rng = fine.group_by("metric").agg(pl.col("lo").min(), pl.col("hi").max())
    st = st.join(rng, on="metric", how="left")
    metric = pl.col("metric").cast(pl.String)
    direction = metric.replace_strict(
        {m: dv[0] for m, dv in directions.items()}, default="unknown", return_dtype=pl.String
    )
    source = metric.replace_strict(
        {m: dv[1] for m, dv in directions.items()}, default=None, return_dtype=pl.String
    )
    n = pl.col("n_pairs").cast(pl.Float64)
    known = pl.col("n_pairs") > 0
    down = pl.col("direction") == "minimize"
    st = st.with_columns(direction=direction, direction_source=source).with_columns(
        pl.col("n_pairs").cast(pl.Int64),
        # a win is better in the metric's direction (higher when the direction is unknown)
        candidate_wins=pl.when(down).then("n_neg").otherwise("n_pos").cast(pl.Int64),
        parent_wins=pl.when(down).then("n_pos").otherwise("n_neg").cast(pl.Int64),
        higher_is_better=~down,
        ties=(pl.col("n_pairs") - pl.col("n_pos") - pl.col("n_neg")).cast(pl.Int64),
        n_dropped=(pl.col("n_matched") - pl.col("n_pairs")).cast(pl.Int64),
        # candidate keys the parent lacks, and parent keys the candidate lacks
        n_unmatched=(
            pl.col("n_rows") + pl.col("n_parent").fill_null(0) - 2 * pl.col("n_matched")
        ).cast(pl.Int64),
        is_binary=known & (pl.col("n_nonbinary") == 0),
        mean_candidate=pl.when(known).then(pl.col("sum_c") / n),
        mean_parent=pl.when(known).then(pl.col("sum_p") / n),
        mean_diff=pl.when(known).then(pl.col("sum_d") / n),
        sd_diff=pl.when(n > 1).then(
            ((pl.col("sum_d2") - pl.col("sum_d") ** 2 / n) / (n - 1)).clip(0.0).sqrt()
        ),
    )
    st = _wilcoxon(st, pat, by, (abs_lo, abs_hi), gcols, alternative)
    st = st.drop("n_rows", "n_matched", "n_parent", "sum_c", "sum_p", "sum_d2", "n_nonbinary")
    cw, pw = st["candidate_wins"].to_numpy(), st["parent_wins"].to_numpy()
    unknown = (st["direction"] == "unknown").to_numpy()
    two = mcnemar_p(cw, pw, alternative="two-sided", mid_p=mid_p)
    better = mcnemar_p(cw, pw, alternative="greater", mid_p=mid_p)
    worse = mcnemar_p(pw, cw, alternative="greater", mid_p=mid_p)
    one_sided = alternative == "greater"
    return st.with_columns(
        pl.Series("p_mcnemar", np.where(unknown | (not one_sided), two, better)),
        pl.Series("_mc_worse", np.where(unknown | (not one_sided), two, worse)),
        pl.Series("_mc_two", two),
    )


def _wilcoxon(
    st: pl.DataFrame,
    pat: pl.DataFrame,
    by: list[str],
    abs_range: tuple[float | None, float | None],
    gcols: list[str],
    alt: Alternative,
) -> pl.DataFrame:
    """``st`` with the Wilcoxon signed-rank p of every group (``wilcoxon_p``).

    The pairs are reduced to tie blocks (one per distinct non-zero ``|d|`` of a group, with
    how many differences share it and how many of them are improvements); the overall blocks
    are sums of the per-group blocks. :func:`~hylo_analytics.stats.signed_rank_p` turns the
    blocks into p-values, equal to ``scipy.stats.wilcoxon`` on the oriented differences. When
    every non-zero ``|d|`` is the same (a binary metric) there is one block per group and no
    pass over the pairs is needed.
    """
    lo, hi = abs_range
    st = st.with_row_index("_gid")
    if lo == hi:  # one |d| value (or none): one block per group
        blocks = st.select(
            "_gid",
            t=pl.col("n_pos") + pl.col("n_neg"),
            npos=pl.col("n_pos"),
            hib=pl.col("higher_is_better"),
        ).filter(pl.col("t") > 0)
    else:
        nz = pat.filter(_OK & (_D != 0))
        fine = nz.group_by(["candidate", "metric", *by, _D.abs().alias("a")]).agg(
            t=_N.sum().cast(pl.Int64), npos=_N.filter(_D > 0).sum().cast(pl.Int64)
        )
        blocks = (
            _up(fine, by, ["t", "npos"], [])
            .join(st.select(*gcols, "_gid", hib="higher_is_better"), on=gcols, nulls_equal=True)
            .sort("_gid", "a")
        )
    improved = pl.when("hib").then("npos").otherwise(pl.col("t") - pl.col("npos"))
    blocks = blocks.with_columns(improved=improved)
    p = signed_rank_p(
        blocks["_gid"].to_numpy(),
        blocks["t"].to_numpy(),
        blocks["improved"].to_numpy(),
        st["n_pairs"].to_numpy(),
        alternative=alt,
    )
    return st.drop("_gid").with_columns(pl.Series("wilcoxon_p", p, dtype=pl.Float64))


def _with_ci(
    st: pl.DataFrame,
    paired: PairedRows,
    parent: str,
    ci: CiMethod,
    boot: tuple[int, float, int],
    eq_level: float,
) -> pl.DataFrame:
    """The interval of the difference at ``level`` (``ci_low``/``ci_high``), at ``eq_level``
    (``eq_low``/``eq_high``, the TOST interval) and the verdict's interval
    (``ci_adj_low``/``ci_adj_high`` at ``ci_adj_level``): the two-sided interval whose one
    side is the one-sided test at alpha, Bonferroni-adjusted over the row's family,
    ``1 - (1 - eq_level) / family_size`` (alpha = (1 - eq_level) / 2), so a verdict and the
    interval printed beside it say the same thing; with ``ci_method`` per row."""
    n_resamples, level, seed = boot
    n = st["n_pairs"].to_numpy().astype(np.float64)
    b, c = st["n_pos"].to_numpy(), st["n_neg"].to_numpy()
    binary = st["is_binary"].to_numpy()
    rows = len(st)
    adj = 1 - (1 - eq_level) / st["family_size"].to_numpy().astype(np.float64)
    st = st.with_columns(pl.Series("ci_adj_level", adj, dtype=pl.Float64))
    names = ("ci_low", "ci_high", "eq_low", "eq_high", "ci_adj_low", "ci_adj_high")
    out = {k: np.full(rows, np.nan) for k in names}
    method = np.full(rows, None, dtype=object)
    # the one-sided p-values of the test each interval inverts (the candidate above / below
    # the parent) and its name; none with ci="none" (the exact McNemar decides there)
    tested = (np.full(rows, np.nan), np.full(rows, np.nan), np.full(rows, None, dtype=object))
    t_up, t_down, test = tested
    if ci == "none":
        return _ci_columns(st, out, method, tested).drop("n_11", "sd_diff")
    # (columns, level, rows): the interval at one level for the rows that take it
    every = np.ones(rows, dtype=bool)
    targets = [(("ci_low", "ci_high"), level, every), (("eq_low", "eq_high"), eq_level, every)]
    targets += [(("ci_adj_low", "ci_adj_high"), a, adj == a) for a in np.unique(adj)]
    if ci in ("auto", "score", "newcombe"):
        score = binary & (n > 0)
        for (lo_k, hi_k), lvl, which in targets:
            use = score & which
            if ci == "newcombe":
                a = st["n_11"].to_numpy()
                lo, hi = newcombe_ci(a[use], b[use], c[use], (n - a - b - c)[use], lvl)
            else:
                lo, hi = tango_ci(b[use], c[use], n[use], lvl)
            out[lo_k][use], out[hi_k][use] = lo, hi
        method[score] = "newcombe" if ci == "newcombe" else "tango"
        # Tango's score test at 0 is the test Tango's interval inverts (Newcombe's hybrid
        # interval inverts none: its rows take the same test, and the verdict checks both)
        t_up[score] = tango_p(b[score], c[score], n[score], 0.0, "greater")
        t_down[score] = tango_p(b[score], c[score], n[score], 0.0, "less")
        test[score] = "tango score"
        rest = ~binary & (n > 0)
        # the percentile bootstrap of paired differences held its coverage best in
        # benchmarks/bench_coverage.py (BCa and bootstrap-t undercover on heavy tails)
        kind: BootstrapMethod = "percentile"
    elif ci == "normal":
        rest = np.zeros(rows, dtype=bool)
        sd = st["sd_diff"].fill_null(0.0).to_numpy()
        mean = st["mean_diff"].to_numpy()
        for (lo_k, hi_k), lvl, which in targets:
            half = z_value(lvl) * sd / np.sqrt(np.where(n > 0, n, np.nan))
            out[lo_k][which], out[hi_k][which] = (mean - half)[which], (mean + half)[which]
        method[n > 0] = "normal"
        with np.errstate(divide="ignore", invalid="ignore"):
            t = mean / (sd / np.sqrt(n))
        t = np.where(np.isfinite(t), t, np.where(mean == 0, 0.0, np.sign(mean) * np.inf))
        t_up[n > 0], t_down[n > 0] = special.ndtr(-t)[n > 0], special.ndtr(t)[n > 0]
        test[n > 0] = "z"
        weak = binary & (n > 0) & (b + c < 10)
        if weak.any():
            warnings.warn(
                f"ci='normal' on {int(weak.sum())} 0/1 comparison(s) with fewer than 10 "
                "discordant pairs: the Wald interval collapses there (0 discordant pairs give "
                "[0, 0]) and covers far less than its level; use ci='auto' (Tango)",
                StatisticsWarning,
                stacklevel=3,
            )
    else:
        rest = n > 0
        kind = {"bootstrap": "percentile", "bca": "bca", "studentized": "studentized"}[ci]  # type: ignore[assignment]
    if rest.any():
        # the paired differences of the bootstrapped groups back to back, in st's row order
        by = list(paired.by)
        gcols = ["candidate", "metric", "level", *by]
        ids = st.with_row_index("_gid").filter(pl.Series(rest)).select(*gcols, "_gid")
        wanted = ids["metric"].cast(pl.String).unique().to_list()
        d = _levels(paired.differences(parent, wanted), by)
        d = d.join(ids, on=gcols, nulls_equal=True).sort("_gid", maintain_order=True)
        gid = d["_gid"].to_numpy()
        sizes = np.bincount(gid, minlength=rows)[rest]
        diffs = d["diff"].to_numpy()
        # one set of resamples for every level (the same draws as one call per level)
        boot_test = bootstrap_test(
            diffs, sizes, levels=[t[1] for t in targets], method=kind,
            n_resamples=n_resamples, seed=seed,
        )  # fmt: skip
        for ((lo_k, hi_k), _, which), (lo, hi) in zip(targets, boot_test.bounds, strict=True):
            take = which[rest]
            out[lo_k][rest & which], out[hi_k][rest & which] = lo[take], hi[take]
        method[rest] = kind
        t_up[rest], t_down[rest] = boot_test.p_greater, boot_test.p_less
        test[rest] = _BOOTSTRAP_TESTS[kind]
    return _ci_columns(st, out, method, tested).drop("n_11", "sd_diff")


TEST_LABELS = {
    "tango score": "Tango score test",
    "exact mcnemar": "exact McNemar test",
    "sign": "exact sign test",
    "bootstrap percentile": "percentile-bootstrap test of the mean",
    "bootstrap bca": "BCa-bootstrap test of the mean",
    "bootstrap-t": "bootstrap-t test of the mean",
    "z": "z test of the mean",
    "stratified sign-flip": "stratified sign-flip test of the pooled difference",
    "stratified bootstrap": "stratified bootstrap test of the pooled difference",
}
"""What each ``test`` code is called on a page."""


def test_label(code: str | None) -> str:
    """The words for a ``test`` code (the code itself when unknown)."""
    return TEST_LABELS.get(code or "", code or "test")


_BOOTSTRAP_TESTS = {
    "percentile": "bootstrap percentile",
    "bca": "bootstrap bca",
    "studentized": "bootstrap-t",
}


def _with_test(st: pl.DataFrame, alternative: Alternative) -> pl.DataFrame:
    """``p_value`` / ``p_worse`` / ``p_two_sided`` from the test the row's interval inverts,
    oriented by the metric's direction (two-sided where it is unknown or asked for); the
    exact McNemar (``p_mcnemar``; the sign test for numeric metrics) where there is none."""
    up, down = pl.col("_t_up"), pl.col("_t_down")
    minimize = pl.col("direction") == "minimize"
    two = pl.min_horizontal(pl.lit(1.0), 2 * pl.min_horizontal(up, down))
    better = pl.when(minimize).then(down).otherwise(up)
    worse = pl.when(minimize).then(up).otherwise(down)
    if alternative != "greater":
        better = worse = two
    unknown = pl.col("direction") == "unknown"
    has = up.is_not_null()
    exact = pl.when("is_binary").then(pl.lit("exact mcnemar")).otherwise(pl.lit("sign"))
    return st.with_columns(
        p_value=pl.when(has)
        .then(pl.when(unknown).then(two).otherwise(better))
        .otherwise("p_mcnemar"),
        p_worse=pl.when(has)
        .then(pl.when(unknown).then(two).otherwise(worse))
        .otherwise("_mc_worse"),
        p_two_sided=pl.when(has).then(two).otherwise("_mc_two"),
        test=pl.when(has).then("test").otherwise(exact),
    ).drop("_t_up", "_t_down", "_mc_worse", "_mc_two")


def _with_tost(st: pl.DataFrame, rule: Rule) -> pl.DataFrame:
    """``p_tost``: the larger of the two one-sided score tests of equivalence within the
    rule's margin, for 0/1 metrics (the p that decides "unchanged"; others decide by the
    interval alone)."""
    margin = st.select(rule.margin_expr().alias("m"))["m"].to_numpy()
    b, c = st["n_pos"].to_numpy(), st["n_neg"].to_numpy()
    n = st["n_pairs"].to_numpy()
    use = st["is_binary"].to_numpy() & np.isfinite(margin) & (n > 0)
    p = np.full(len(st), np.nan)
    if use.any():
        m = margin[use]
        p[use] = np.maximum(
            tango_p(b[use], c[use], n[use], -m, "greater"),
            tango_p(b[use], c[use], n[use], m, "less"),
        )
    return st.with_columns(pl.Series("p_tost", p).fill_nan(None)).drop("n_pos", "n_neg")


def _ci_columns(
    st: pl.DataFrame,
    out: dict[str, npt.NDArray[np.float64]],
    method: npt.NDArray[Any],
    tested: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[Any]],
) -> pl.DataFrame:
    t_up, t_down, test = tested
    return st.with_columns(
        *(pl.Series(k, v, dtype=pl.Float64).fill_nan(None) for k, v in out.items()),
        pl.Series("ci_method", method.tolist(), dtype=pl.String),
        pl.Series("_t_up", t_up, dtype=pl.Float64).fill_nan(None),
        pl.Series("_t_down", t_down, dtype=pl.Float64).fill_nan(None),
        pl.Series("test", test.tolist(), dtype=pl.String),
    )


def _with_drops(
    st: pl.DataFrame, pat: pl.DataFrame, by: list[str], has_reason: bool
) -> pl.DataFrame:
    """What the dropped pairs could change, and why they were dropped.

    ``diff_if_drops_min`` / ``_max``: the mean difference over the pairs plus the dropped
    ones, had every dropped value been the worst / best for the candidate within the range
    of the metric's observed values (0 and 1 for a 0/1 metric).
    """
    gcols = ["candidate", "metric", "level", *by]
    lo, hi = pl.col("lo"), pl.col("hi")
    ncd, npd, nbd = (pl.col(f"n_dropped_{s}") for s in ("candidate", "parent", "both"))
    total = (pl.col("n_pairs") + pl.col("n_dropped")).cast(pl.Float64)
    base = pl.col("sum_d") - pl.col("sum_pv_cd") + pl.col("sum_cv_pd")
    low = (base + ncd * lo - npd * hi + nbd * (lo - hi)) / total
    high = (base + ncd * hi - npd * lo + nbd * (hi - lo)) / total
    up = pl.col("direction") != "minimize"
    drops = pl.col("n_dropped") > 0
    st = st.with_columns(
        pl.col("n_dropped_candidate", "n_dropped_parent", "n_dropped_both").cast(pl.Int64),
        diff_if_drops_min=pl.when(drops & (total > 0)).then(low),
        diff_if_drops_max=pl.when(drops & (total > 0)).then(high),
    )
    if has_reason:
        dropped = pat.filter(pl.col("matched") & ~_OK)
        sides = pl.concat(
            [
                dropped.filter(_V.is_null()).select(
                    "candidate", "metric", *by, "n", side=pl.lit("candidate"), reason="reason"
                ),
                dropped.filter(_PV.is_null()).select(
                    "candidate", "metric", *by, "n", side=pl.lit("parent"), reason="parent_reason"
                ),
            ]
        )
        fine = sides.group_by(
            "candidate", "metric", *by, "side", pl.col("reason").fill_null("(no reason)")
        ).agg(pl.col("n").sum())
        counted = (
            _up(fine, by, ["n"], [])
            .sort("n", "reason", "side", descending=[True, False, False])
            .group_by(gcols, maintain_order=True)
            .agg(
                drop_reasons=pl.format("{}: {} x{}", "side", "reason", pl.col("n").cast(pl.String))
                .head(4)
                .str.join("; ")
            )
        )
        st = st.join(counted, on=gcols, how="left", nulls_equal=True)
    else:
        st = st.with_columns(drop_reasons=pl.lit(None, pl.String))
    one_side = pl.max_horizontal(ncd, npd)
    unbalanced = (ncd + npd >= 3) & (one_side >= 0.75 * (ncd + npd)) & (ncd != npd)
    worst = pl.when(up).then("diff_if_drops_min").otherwise("diff_if_drops_max")
    best = pl.when(up).then("diff_if_drops_max").otherwise("diff_if_drops_min")
    note = pl.format(
        "{} pair(s) dropped ({} candidate, {} parent, {} both abstained): had they counted, "
        "the difference would lie between {} (worst for the candidate) and {} (best)",
        pl.col("n_dropped").cast(pl.String),
        ncd.cast(pl.String),
        npd.cast(pl.String),
        nbd.cast(pl.String),
        worst.round_sig_figs(3).cast(pl.String),
        best.round_sig_figs(3).cast(pl.String),
    )
    warn = pl.format(
        "; unbalanced: the {} abstained far more often, so the comparison may be biased",
        pl.when(ncd > npd).then(pl.lit("candidate")).otherwise(pl.lit("parent")),
    )
    return st.with_columns(
        drop_note=pl.when(drops).then(
            pl.when(unbalanced).then(pl.concat_str(note, warn)).otherwise(note)
        )
    ).drop("lo", "hi", "sum_d", "sum_pv_cd", "sum_cv_pd")


def _family_keys(family: Family) -> list[str]:
    """The columns whose values name a row's multiple-comparison family."""
    return ["level"] if family == "level" else ["candidate", "metric", "level"]


def _adjust(out: pl.DataFrame, family: Family, by: list[str]) -> pl.DataFrame:
    """Holm and BH adjusted p-values in each direction, within each family.

    Implemented in numpy (and tested equal to statsmodels' ``multipletests``), because
    ``multipletests(method="holm")`` runs ``gc.collect()``, which costs more than the rest.
    """
    keys = _family_keys(family)
    fam = out.select(pl.concat_str(keys, separator="\x1f").alias("f"))["f"].to_numpy()
    rows = pl.when(pl.col("level") == "overall").then(pl.lit("overall")).otherwise("level")
    whose = "every candidate's" if family == "level" else "this comparison's"
    out = out.with_columns(
        family=pl.format("{} {} row(s)", pl.lit(whose), rows),
    )
    p, w = out["p_value"].to_numpy(), out["p_worse"].to_numpy()
    return out.with_columns(
        pl.Series("p_holm", holm(p, fam), dtype=pl.Float64),
        pl.Series("p_worse_holm", holm(w, fam), dtype=pl.Float64),
        pl.Series("p_bh", benjamini_hochberg(p, fam), dtype=pl.Float64),
        pl.Series("p_worse_bh", benjamini_hochberg(w, fam), dtype=pl.Float64),
    )
