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
``int_key_scores``) before pairing, unless ``pair_on_epoch``. The parts: ``_prepare.py`` (the
rows paired), ``_sums.py`` (counts and sums), ``_columns.py`` (tests, drops, adjustments);
every interval is :func:`hylo_analytics.stats.paired_interval`'s.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import cast

import numpy as np
import numpy.typing as npt
import polars as pl

from hylo_analytics._harness import Errors
from hylo_analytics.compare._clusters import (
    ClusterFits,
    clustered_method,
    fit_columns,
    one_cluster_note,
    pattern_fits,
)
from hylo_analytics.compare._columns import (
    Family,
    _adjust,
    _ci_columns,
    _family_keys,
    _with_drops,
    _with_test,
    _with_tost,
)
from hylo_analytics.compare._counts import PairedRows, frame_rows
from hylo_analytics.compare._other_errors import (
    errored_counts,
    other_patterns,
    other_policy,
    with_other,
)
from hylo_analytics.compare._prepare import (
    Reducer,
    _errors_option,
    declared_pairs,
    one_direction,
    prepare_scores,
)
from hylo_analytics.compare._sums import _aggregate, _levels, _sums
from hylo_analytics.compare.verdicts import Rule, StatisticalRule, add_verdicts
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.metrics import Direction, resolve_directions
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL, StatisticsWarning
from hylo_analytics.stats.clustered import ClusterRobust
from hylo_analytics.stats.interval import IntervalSpec, PairedInterval, paired_interval
from hylo_analytics.stats.methods import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    PAIRED_METHODS,
    CIMethod,
    Seed,
    check_method,
)
from hylo_analytics.stats.significance import Alternative

__all__ = [
    "COLUMNS",
    "TEST_LABELS",
    "CiMethod",
    "Family",
    "Reducer",
    "compare_scores",
    "test_label",
]

# the one vocabulary (stats.methods); compare takes its paired subset. CiMethod: the old name
CiMethod = CIMethod
_CI_METHODS = PAIRED_METHODS
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
    seed: Seed = DEFAULT_SEED,
    rule: Rule | None = None,
    family: Family = "comparison",
    errors: Errors | None = None,
    errors_as_failures: bool | None = None,
    forced: Mapping[str, str] | None = None,
    declared: pl.DataFrame | None = None,
    cluster: str | None = None,
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
        ``percentile`` (``bootstrap``: its deprecated alias), ``bca``, ``studentized``,
        ``normal`` (Wald; warns where it is known to fail) or ``none``; at ``level``. Every
        interval is :func:`hylo_analytics.stats.paired_interval`'s.
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
    cluster : a column of the scores whose values are clusters of keys (``task_id``: the
        seeds of a task; null values together one cluster) when the population is the
        clusters: every row's interval and test are then the CR2 cluster-robust ones on
        Bell-McCaffrey df (``ci_method`` ``cr2``, ``test`` ``cr2 t``; ``ci`` must be
        ``auto`` or ``cr2``), the rows gain ``cluster``, ``n_clusters``, ``ci_se`` and
        ``ci_df``, and a row of one cluster has no interval and p 1.
    """
    cands = [candidates] if isinstance(candidates, str) else list(candidates)
    if parent in cands:
        raise InputError(
            f"parent {parent!r} is also listed as a candidate; drop it from the candidates"
        )
    ci = cast(CIMethod, clustered_method(check_method(ci, _CI_METHODS, "compare"), cluster))
    if family not in ("comparison", "level"):
        raise InputError(f"family must be 'comparison' or 'level', got {family!r}")
    rule = rule or StatisticalRule()
    errors = _errors_option(errors, errors_as_failures)
    if isinstance(scores, PairedRows):
        if scores.cluster != cluster:
            raise InputError(f"compare: the paired rows are clustered by {scores.cluster!r}, "
                             f"not cluster={cluster!r}")  # fmt: skip
        if errors == "failure":
            raise InputError("errors='failure' needs the scores frame (see Store.compare)")
        policy: str = errors or "exclude"
        out, _ = _compare(scores, cands, parent, declared, directions, alternative, mid_p,
                          IntervalSpec(ci, level, n_resamples, seed), rule, family, policy)  # fmt: skip
        dtypes: dict[str, pl.DataType] = {}
    else:
        pk = ["key", "epoch"] if pair_on_epoch else ["key"]
        keep = [cluster] if cluster else []
        reduced, has_reason, dtypes, policy = prepare_scores(
            scores, cands, parent, metrics, list(by), pk, reducer, errors, keep
        )
        if declared is None and "metadata" in scores.columns:
            declared = declared_pairs(scores)
        spec = IntervalSpec(ci, level, n_resamples, seed)
        # a key some of whose epochs errored has no exact relabelling: pair a second time
        partial = "_err_any" in reduced.columns and bool(
            (reduced["_err_any"] & ~reduced["_err"]).any()
        )
        with frame_rows(reduced, pk, list(by), has_reason, cluster) as rows:
            out, counts = _compare(rows, cands, parent, declared, directions, alternative,
                                   mid_p, spec, rule, family, policy, relabel=not partial)  # fmt: skip
        if partial:
            other, _, _, _ = prepare_scores(scores, cands, parent, metrics, list(by), pk,
                                            reducer, other_policy(policy), keep)  # type: ignore[arg-type]  # fmt: skip
            with frame_rows(other, pk, list(by), has_reason, cluster) as rows:
                alt, _ = _compare(rows, cands, parent, declared, directions, alternative,
                                  mid_p, spec, rule, family, policy, relabel=False)  # fmt: skip
            # the keys a policy counts differently: those with any errored epoch
            anyway = reduced.with_columns(_err=pl.col("_err_any"))
            with frame_rows(anyway, pk, list(by), has_reason, cluster) as rows:
                counts = errored_counts(rows.patterns(parent), list(by))
            out = with_other(out, counts, alt, list(by), policy)
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
    if cluster is not None:
        out = out.with_columns(pl.lit(cluster).alias("cluster"))
    first = ["candidate", "parent", "metric", "level", *by, *COLUMNS]
    return out.select(*first, pl.exclude(first)).sort(
        "candidate", "metric", "level", *by, nulls_last=False
    )


def _compare(
    rows: PairedRows,
    cands: list[str],
    parent: str,
    declared: pl.DataFrame | None,
    directions: Mapping[str, Direction] | None,
    alternative: Alternative,
    mid_p: bool,
    spec: IntervalSpec,
    rule: Rule,
    family: Family,
    policy: str,
    relabel: bool = True,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every statistic of the comparison, from the counts of ``rows``' pairs, and each row's
    errored keys; with ``relabel`` the rows also hold the verdict under the other errors
    policy, from the same patterns relabelled (:mod:`hylo_analytics.compare._other_errors`)."""
    by = list(rows.by)
    pat = rows.patterns(parent)
    args = (cands, parent, declared, directions, alternative, mid_p, spec, rule, family)
    out = _statistics(rows, pat, *args)
    counts = errored_counts(pat, by)
    errored = bool(counts.select(pl.sum_horizontal("n_errored_candidate",
                                                   "n_errored_parent").sum()).item())  # fmt: skip
    if not relabel:
        return out, counts
    alt = _statistics(rows, other_patterns(pat, other_policy(policy)), *args) if errored else None
    return with_other(out, counts, alt, by, policy), counts


def _statistics(
    rows: PairedRows,
    pat: pl.DataFrame,
    cands: list[str],
    parent: str,
    declared: pl.DataFrame | None,
    directions: Mapping[str, Direction] | None,
    alternative: Alternative,
    mid_p: bool,
    spec: IntervalSpec,
    rule: Rule,
    family: Family,
) -> pl.DataFrame:
    """The comparison's statistics from the pair patterns ``pat`` of ``rows``."""
    by = list(rows.by)
    fine = _sums(pat, by)
    missing = set(cands) - set(fine["candidate"].cast(pl.String).to_list())
    if missing:
        raise SelectionError(
            f"candidate(s) {sorted(missing)} have no scores to compare; check the run ids and "
            "metrics (see 'hylo-analytics runs')"
        )
    present = fine["metric"].cast(pl.String).unique().to_list()
    dirs = resolve_directions(present, explicit=directions, declared=one_direction(declared))
    out = _aggregate(rows, pat, fine, parent, dirs, alternative, mid_p)
    # the family each row's p is adjusted in, so its interval can be adjusted the same way
    out = out.with_columns(family_size=pl.len().over(_family_keys(family)).cast(pl.Int64))
    clusters = pattern_fits(pat, by) if rows.cluster is not None else None
    out = _with_ci(out, _pair_differences(rows, parent), spec, rule.equivalence_level,
                   clusters=clusters)  # fmt: skip
    out = _with_test(out, alternative)
    out = _with_tost(out, rule)
    out = _with_drops(out, pat, by, rows.has_reason)
    out = _adjust(out, family, by)
    return one_cluster_note(add_verdicts(out, rule), rows.cluster)


Differences = Callable[
    [pl.DataFrame, npt.NDArray[np.bool_]], tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]
]
"""``(st, rows)`` -> the paired differences of ``st``'s ``rows`` back to back, in the rows'
order (each row's in the order a bootstrap reads them), and how many each row has."""


def _pair_differences(paired: PairedRows, parent: str) -> Differences:
    """The differences of a comparison's bootstrapped rows, read from its paired rows."""

    def read(
        st: pl.DataFrame, rest: npt.NDArray[np.bool_]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        by = list(paired.by)
        gcols = ["candidate", "metric", "level", *by]
        ids = st.with_row_index("_gid").filter(pl.Series(rest)).select(*gcols, "_gid")
        wanted = ids["metric"].cast(pl.String).unique().to_list()
        d = _levels(paired.differences(parent, wanted), by)
        d = d.join(ids, on=gcols, nulls_equal=True).sort("_gid", maintain_order=True)
        sizes = np.bincount(d["_gid"].to_numpy(), minlength=len(st))[rest]
        return sizes.astype(np.int64), d["diff"].to_numpy()

    return read


def _with_ci(
    st: pl.DataFrame,
    differences: Differences,
    spec: IntervalSpec,
    eq_level: float,
    numeric: str = "percentile",
    clusters: ClusterFits | None = None,
) -> pl.DataFrame:
    """The interval of the difference at ``level`` (``ci_low``/``ci_high``), at ``eq_level``
    (``eq_low``/``eq_high``, the TOST interval) and the verdict's interval
    (``ci_adj_low``/``ci_adj_high`` at ``ci_adj_level``): the two-sided interval whose one
    side is the one-sided test at alpha, Bonferroni-adjusted over the row's family,
    ``1 - (1 - eq_level) / family_size`` (alpha = (1 - eq_level) / 2), so a verdict and the
    interval printed beside it say the same thing; with ``ci_method`` per row.

    ``differences`` reads the paired differences of the rows a bootstrap resamples;
    ``numeric`` is what ``ci="auto"`` gives the rows that are not 0/1 (``percentile``, or
    ``normal`` when a ranking has too many pairs to resample: its z interval from the rows'
    ``mean_diff`` and ``sd_diff``); ``clusters`` reads the CR2 fit of the rows ``ci="cr2"``
    takes (every row with a pair), whose ``n_clusters``, ``ci_se`` and ``ci_df`` become
    columns."""
    ci = spec.method
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
    if ci == "none":
        return _ci_columns(st, out, method, tested).drop("n_11", "sd_diff")
    # (columns, level, rows): the interval at one level for the rows that take it
    every = np.ones(rows, dtype=bool)
    targets = [(("ci_low", "ci_high"), spec.level, every), (("eq_low", "eq_high"), eq_level, every)]
    targets += [(("ci_adj_low", "ci_adj_high"), a, adj == a) for a in np.unique(adj)]
    levels = [t[1] for t in targets]

    def put(use: npt.NDArray[np.bool_], got: PairedInterval) -> None:
        """The rows ``use`` take ``got`` (computed for those rows only) at their levels."""
        for ((lo_k, hi_k), _, which), (lo, hi) in zip(targets, got.bounds, strict=True):
            take = which[use]
            out[lo_k][use & which], out[hi_k][use & which] = lo[take], hi[take]
        method[use] = got.ci_method
        tested[0][use], tested[1][use], tested[2][use] = got.p_greater, got.p_less, got.test

    fitted: ClusterRobust | None = None
    if ci == "cr2":
        rest = np.zeros(rows, dtype=bool)
        if clusters is None:
            raise InputError("ci='cr2' needs the rows' clusters (cluster=)")
        some = n > 0
        fitted = clusters(st, some)
        put(some, paired_interval("cr2", levels, n[some], clusters=fitted))
        for k in names:  # a difference of rates stays in [-1, 1] (clipping keeps coverage)
            out[k] = np.where(binary, np.clip(out[k], -1.0, 1.0), out[k])
    elif ci in ("auto", "score", "newcombe"):
        score = binary & (n > 0)
        kind = "newcombe" if ci == "newcombe" else "score"
        both = st["n_11"].to_numpy()[score]
        put(
            score,
            paired_interval(kind, levels, n[score], wins=b[score], losses=c[score], both=both),
        )
        rest = ~binary & (n > 0)
        # the percentile bootstrap of paired differences held its coverage best in
        # benchmarks/bench_coverage.py (BCa and bootstrap-t undercover on heavy tails)
        boot = numeric
        if numeric == "normal" and rest.any():
            sd = st["sd_diff"].fill_null(0.0).to_numpy()[rest]
            mean = st["mean_diff"].to_numpy()[rest]
            put(rest, paired_interval("normal", levels, n[rest], mean=mean, sd=sd))
            rest = np.zeros(rows, dtype=bool)
    elif ci == "normal":
        rest = np.zeros(rows, dtype=bool)
        sd = st["sd_diff"].fill_null(0.0).to_numpy()
        mean = st["mean_diff"].to_numpy()
        got = paired_interval("normal", levels, n, mean=mean, sd=sd)
        for ((lo_k, hi_k), _, which), (lo, hi) in zip(targets, got.bounds, strict=True):
            out[lo_k][which], out[hi_k][which] = lo[which], hi[which]
        some = n > 0
        method[some] = got.ci_method
        tested[0][some], tested[1][some], tested[2][some] = (
            got.p_greater[some], got.p_less[some], got.test,
        )  # fmt: skip
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
        boot = ci
    if rest.any():
        # the paired differences of the bootstrapped groups back to back, in st's row order
        sizes, diffs = differences(st, rest)
        # one set of resamples for every level (the same draws as one call per level)
        got = paired_interval(
            boot, levels, sizes, differences=diffs,
            n_resamples=spec.n_resamples, seed=spec.seed,
        )  # fmt: skip
        put(rest, got)
    done = _ci_columns(st, out, method, tested).drop("n_11", "sd_diff")
    return done if fitted is None else fit_columns(done, fitted, n > 0)


TEST_LABELS = {
    "tango score": "Tango score test",
    "exact mcnemar": "exact McNemar test",
    "sign": "exact sign test",
    "bootstrap percentile": "percentile-bootstrap test of the mean",
    "bootstrap bca": "BCa-bootstrap test of the mean",
    "bootstrap-t": "bootstrap-t test of the mean",
    "z": "z test of the mean",
    "cr2 t": "CR2 cluster-robust t test of the mean (Bell-McCaffrey df)",
    "stratified sign-flip": "stratified sign-flip test of the pooled difference",
    "stratified bootstrap": "stratified bootstrap test of the pooled difference",
}
"""What each ``test`` code is called on a page."""


def test_label(code: str | None) -> str:
    """The words for a ``test`` code (the code itself when unknown)."""
    return TEST_LABELS.get(code or "", code or "test")


# the names flips.py and ranking.py imported before prepare_scores had a public name
_prepare, _declared_pairs, _one_direction = prepare_scores, declared_pairs, one_direction
