"""Item x run flip matrices: each key's outcome in each of a set of runs, ordered.

:func:`flip_matrix` (``Store.flip_matrix``) answers, for a set of runs of a suite (a
benchmark and split: keys of different suites are different items), "which keys fail
everywhere, which are hardest, which broke in the latest run". It reads the one score
resolution at the key level (``int_key_outcomes``: ``int_key_scores``' epochs reduced by
their mean, each run's errors policy applied) and names every cell by what it says:

- ``success`` (1), ``failure`` (0), ``partial`` (the mean of several epochs, between 0 and 1);
- ``error``: no valid epoch, and one errored (a harness error). Under ``errors="failure"``
  its ``value`` is 0 (it counts in ``n_valid`` and the solve rate as a failure), but its
  outcome stays ``error``: a harness error is never shown as the policy's failure, fix or
  regression (``newly_broken`` needs a real ``failure``; ``newly_errored`` is its own flag);
- ``abstained``: no valid epoch for another reason (no trace, a grader that abstained);
- ``missing``: the run has no row for a key other runs of its suite have.

**The order of the runs** is explicit, and named in :attr:`FlipMatrix.order`: ``"version"``
(default) is the natural version order of ``agent_version`` (:mod:`hylo_analytics._versions`:
``1.9 < 1.10``, ``1.2.0-rc1 < 1.2.0``), then ``ingested_at``, then ``run_id``; ``"ingested"``
is ``ingested_at`` then ``run_id``; ``"given"`` is the order of ``runs`` as passed. Each
suite's last run in that order is its **latest**, the one before it its **previous**.

**Per key** (:attr:`FlipMatrix.keys`, one row per suite and key, hardest first): the counts
of each outcome over the suite's runs (``n_runs`` = the sum of them), ``n_valid`` (the runs
with a value under their errors policy: ``n_success + n_failure + n_partial +
n_errored_as_failure``), ``solve_rate`` = the mean value over ``n_valid`` (``n_success /
n_valid`` for 0/1 values; classical test theory's item difficulty, lower is harder; null when
no run has a value) and ``difficulty_rank`` (1 = the hardest of the suite; ties share a rank);
``always_fails`` (no run solved it, even partly, and at least one failed it: errored runs
alone never make a key fail everywhere), ``always_solved`` (every valid value 1); the latest
and previous runs' outcomes, and ``newly_broken`` (success in the previous run, failure in
the latest), ``newly_fixed`` (the reverse), ``newly_errored`` (success, then an error),
``broken_since_solved`` (failure in the latest, success in any earlier run: a regression
older than one step) with ``last_solved_run``. These order-free counts are the view
``mart_flip_matrix``'s (a test holds them equal on the runs of a suite).

**Per run** (:attr:`FlipMatrix.runs`, in the order): its ``position``, its place in its suite,
``is_latest``, the outcome counts, ``solve_rate`` (the run's success rate under its errors
policy, as ``mart_success_rates``), and ``n_broken`` / ``n_fixed`` against the run before it
in its suite. Everything is computed by DuckDB and polars expressions over the long frame (a
2,000-run x 500-key matrix is one million rows), never row by row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from hylo_analytics._harness import Errors, check_errors
from hylo_analytics._sql import view_query
from hylo_analytics._versions import version_ranks
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.resolution import preferred_query, run_filter, success_metric
from hylo_analytics.store import FEW_RUNS, ParquetStore, pinned

__all__ = ["ORDERS", "OUTCOMES", "FlipMatrix", "flip_matrix"]

#: The outcomes of a cell, in the order a chart's legend lists them.
OUTCOMES = ("success", "partial", "failure", "error", "abstained", "missing")
#: The orders of the runs :func:`flip_matrix` knows.
ORDERS = ("version", "ingested", "given")
Order = Literal["version", "ingested", "given"]

OUTCOME = pl.Enum(OUTCOMES)
SUITE = ["benchmark_id", "split"]
KEY_VIEW = "int_key_outcomes"
KEY_SCORES = "int_key_scores"
_ORDER_TEXT = {
    "version": "natural version order of agent_version, then ingested_at, then run_id",
    "ingested": "ingested_at, then run_id",
    "given": "the order the runs were given in",
}
_VALUE = {None: "value", "exclude": "value_errors_excluded", "failure": "value_errors_as_failures"}
_KEY_COLUMNS = (
    *SUITE, "key", "task_id", "errors", "n_runs", "n_valid", "n_success", "n_failure",
    "n_partial", "n_errored", "n_errored_as_failure", "n_abstained", "n_missing", "solve_rate",
    "difficulty_rank", "always_fails", "always_solved", "latest_outcome", "previous_outcome",
    "newly_broken", "newly_fixed", "newly_errored", "broken_since_solved", "last_solved_run",
)  # fmt: skip
_RUN_COLUMNS = "run_id, agent_name, agent_version, benchmark_id, split, ingested_at, "


@dataclass(frozen=True)
class FlipMatrix:
    """What :func:`flip_matrix` found (see the module docstring for every column).

    - ``outcomes``: one row per (run, key of its suite): ``benchmark_id``, ``split``,
      ``run_id``, ``position``, ``key``, ``task_id``, ``outcome`` (an enum of
      :data:`OUTCOMES`), ``value`` (under the errors policy; null when it has none) and
      ``skip_reason``;
    - ``keys``: one row per (suite, key), hardest first;
    - ``runs``: one row per run, in the order;
    - ``suites``: one row per suite: its runs, keys, latest and previous run, and how many
      keys always fail, are newly broken, fixed or errored;
    - ``left_out``: runs asked for but not in the matrix, with the reason (no score of the
      metric, or values outside [0, 1]);
    - ``metric``, ``order`` (the order of the runs, in words), ``errors`` (the policy asked
      for; None: each run's harness convention, in ``runs.errors``).
    """

    outcomes: pl.DataFrame
    keys: pl.DataFrame
    runs: pl.DataFrame
    suites: pl.DataFrame
    left_out: pl.DataFrame
    metric: str
    order: str
    errors: Errors | None

    def wide(self, values: Literal["outcome", "value"] = "outcome") -> pl.DataFrame:
        """The matrix as one row per (suite, key) and one column per run, in the order
        (keys as :attr:`keys` sorts them): for a spreadsheet or a quick look."""
        if values not in ("outcome", "value"):
            raise InputError(f"wide: values={values!r}; expected 'outcome' or 'value'")
        cells = self.outcomes.select(*SUITE, "key", "run_id", pl.col(values))
        if values == "outcome":
            cells = cells.with_columns(pl.col("outcome").cast(pl.String))
        out = cells.pivot("run_id", index=[*SUITE, "key"], values=values)
        order = self.keys.select(*SUITE, "key").with_row_index("_row")
        ordered = order.join(out, on=[*SUITE, "key"], how="left", nulls_equal=True)
        runs = [r for r in self.runs["run_id"].to_list() if r in out.columns]
        return ordered.sort("_row").select(*SUITE, "key", *runs)


@pinned
def flip_matrix(
    store: ParquetStore,
    runs: Sequence[str] | str | None = None,
    *,
    metric: str = "success",
    order: Order = "version",
    errors: Errors | None = None,
    source: str | Sequence[str] | None = None,
) -> FlipMatrix:
    """Each key's outcome in each of ``runs``, with its difficulty and what flipped last.

    ``runs``: ids, unique prefixes or selectors, a selector naming every run it matches
    (``agent=octo-ft``); default every run of the store. ``metric``: a metric whose values
    lie in [0, 1] (``success``: an inspect-robots run's ``success_at_end`` when the runs have
    no ``success``). ``order``: ``"version"``, ``"ingested"`` or ``"given"`` (see the module
    docstring). ``errors``: ``"failure"``, ``"exclude"``, or None for each run's harness
    convention. ``source``: read that source's scores instead of the resolved ones.
    """
    if order not in ORDERS:
        raise InputError(f"flip_matrix: order={order!r}; expected one of {', '.join(ORDERS)}")
    policy = check_errors(errors, "flip_matrix: errors")
    ids = None if runs is None else _select(store, runs)
    if order == "given" and ids is None:
        raise InputError("flip_matrix: order='given' needs the runs, in order (runs=[...])")
    meta = _ordered(_run_rows(store, ids), order, ids)
    if policy is not None:
        meta = meta.with_columns(errors=pl.lit(policy))
    cells, metric = _read_cells(store, meta["run_id"].to_list(), ids, metric, policy, source)
    left_out = _left_out(store, meta, cells, metric)
    meta = meta.filter(~pl.col("run_id").is_in(left_out["run_id"].implode()))
    if meta.is_empty():
        raise SelectionError(
            f"flip_matrix: no run has {metric!r} scores in [0, 1] "
            f"({left_out.height} run(s) asked for); pick a 0/1 metric such as success"
        )
    meta = _positions(meta)
    outcomes = _complete(cells, meta)
    keys = _keys(outcomes, meta)
    return FlipMatrix(
        outcomes=outcomes,
        keys=keys,
        runs=_runs(outcomes, meta),
        suites=_suites(keys, meta),
        left_out=left_out,
        metric=metric,
        order=_ORDER_TEXT[order],
        errors=policy,
    )


def _select(store: ParquetStore, runs: Sequence[str] | str) -> list[str]:
    from hylo_analytics.aggregate.summaries import select_runs

    specs = [runs] if isinstance(runs, str) else list(runs)
    known = frozenset(store.sql("select run_id from stg_runs")["run_id"].to_list())
    # run ids only (2,000 of them): no query per name; else prefixes and selectors, a selector
    # naming every run it matches
    ids = list(dict.fromkeys(specs)) if known.issuperset(specs) else select_runs(store, specs)
    if not ids:
        raise SelectionError("flip_matrix: no runs given (runs=[]); pass None for every run")
    return ids


def _run_rows(store: ParquetStore, ids: list[str] | None) -> pl.DataFrame:
    """The runs' fields the order and the frames need, with each run's errors convention."""
    query = (
        f"select {_RUN_COLUMNS} run_errors(errors_policy, source_format) as errors from stg_runs"
    )
    if ids is None:
        return store.sql(query)
    return store.sql(query + " where list_contains($runs, run_id)", {"runs": ids})


def _ordered(meta: pl.DataFrame, order: str, ids: list[str] | None) -> pl.DataFrame:
    """``meta`` sorted by ``order`` (ties never left to chance: run_id last)."""
    if order == "given":
        assert ids is not None
        given = pl.DataFrame({"run_id": ids}).with_row_index("_given")
        return meta.join(given, on="run_id").sort("_given").drop("_given")
    by = ["ingested_at", "run_id"]
    if order == "version":
        meta = meta.with_columns(_version=version_ranks(meta["agent_version"]))
        return meta.sort(["_version", *by], nulls_last=False).drop("_version")
    return meta.sort(by, nulls_last=False)


def _read_cells(
    store: ParquetStore,
    runs: list[str],
    ids: list[str] | None,
    metric: str,
    policy: Errors | None,
    source: str | Sequence[str] | None,
) -> tuple[pl.DataFrame, str]:
    """The key-level outcomes of ``runs`` from ``int_key_outcomes`` (the resolution's view),
    and the metric read (``success`` falls back to the runs' own success metric)."""
    cells = _cells(store, ids, metric, policy, source)
    if cells.is_empty() and metric == "success" and runs:
        named = success_metric(store, runs)
        if named is not None and named != metric:
            return _cells(store, ids, named, policy, source), named
    return cells, metric


def _cells(
    store: ParquetStore,
    ids: list[str] | None,
    metric: str,
    policy: Errors | None,
    source: str | Sequence[str] | None,
) -> pl.DataFrame:
    """The cells of ``int_key_outcomes``: the view itself (a filter of many runs is applied
    at its end), the view over a few runs' keys only, or with ``source`` the resolution's rule over that
    source's rows (:func:`~hylo_analytics.resolution.preferred_query`)."""
    runs = run_filter(store, ids)
    params: dict[str, Any] = {"metric": metric}
    where = ["metric = $metric"]
    if source is None and runs is not None and len(runs) < FEW_RUNS:
        # a few runs: their keys alone, read once (the view's per-run grouping then reads
        # them, not the store's every run)
        few = f"select * from main.{KEY_SCORES} where list_contains($runs, run_id)"
        relation = f"({view_query(KEY_VIEW, {KEY_SCORES: few})})"
    elif source is None:
        relation = KEY_VIEW
        if runs is not None:
            where.append("list_contains($runs, run_id)")
    else:
        query = preferred_query(KEY_VIEW, runs=runs is not None, metrics=True, sources=True)
        relation = f"({query})"
        params["metrics"] = [metric]
        params["sources"] = [source] if isinstance(source, str) else list(source)
    if runs is not None:
        params["runs"] = runs
    got = store.sql(
        f"select run_id, key, task_id, outcome, {_VALUE[policy]} as value, skip_reason "
        f"from {relation} where {' and '.join(where)}",
        params,
    )
    return got.with_columns(pl.col("outcome").cast(OUTCOME))


def _left_out(
    store: ParquetStore, meta: pl.DataFrame, cells: pl.DataFrame, metric: str
) -> pl.DataFrame:
    """The runs asked for that have no cell, and why (no score of the metric, or a value
    outside [0, 1], which ``int_key_outcomes`` leaves out)."""
    absent = meta.filter(~pl.col("run_id").is_in(cells["run_id"].unique().implode()))
    if absent.is_empty():
        return pl.DataFrame(schema={"run_id": pl.String, "reason": pl.String})
    found = store.sql(
        "select run_id, count(*) as n, count(*) filter (where value < 0 or value > 1) as n_out "
        "from int_key_scores where metric = $metric and list_contains($runs, run_id) "
        "group by run_id",
        {"metric": metric, "runs": absent["run_id"].to_list()},
    )
    reasons = absent.select("run_id").join(found, on="run_id", how="left")
    reason = (
        pl.when(pl.col("n").is_null())
        .then(pl.format("no {} scores", pl.lit(metric)))
        .otherwise(pl.format("{} of its {} values outside [0, 1]", "n_out", "n"))
    )
    return reasons.select("run_id", reason.alias("reason"))


def _positions(meta: pl.DataFrame) -> pl.DataFrame:
    """Each run's place: ``position`` overall, ``suite_position`` within its suite."""
    return meta.with_row_index("position").with_columns(
        suite_position=(pl.col("position").rank("ordinal").over(SUITE) - 1).cast(pl.UInt32),
        n_suite_runs=pl.len().over(SUITE).cast(pl.UInt32),
    )


def _complete(cells: pl.DataFrame, meta: pl.DataFrame) -> pl.DataFrame:
    """Every (run, key of its suite), a key a run lacks as ``missing``, in matrix order.

    Each run's fields are looked up by run id (no join: a join copies the million cells)."""
    have = cells.with_columns(
        pl.col("run_id").replace_strict(_by_run(meta, c), return_dtype=meta.schema[c]).alias(c)
        for c in (*SUITE, "position")
    )
    keys = have["key"].unique()
    n_runs = meta.group_by(SUITE).len("n_runs")
    if n_runs.height == 1:  # one suite (the usual case): its keys without hashing every cell
        expected = keys.len() * meta.height
    else:
        n_keys = have.group_by(SUITE).agg(n_keys=pl.col("key").n_unique())
        both = n_keys.join(n_runs, on=SUITE, nulls_equal=True)
        expected = int((both["n_keys"] * both["n_runs"]).sum())
    if have.height < expected:
        suite_keys = have.select(*SUITE, "key", "task_id").unique([*SUITE, "key"])
        place = meta.select("run_id", *SUITE, "position")
        grid = place.join(suite_keys, on=SUITE, nulls_equal=True)
        missing = grid.join(have, on=["run_id", "key"], how="anti").with_columns(
            outcome=pl.lit("missing", OUTCOME),
            value=pl.lit(None, pl.Float64),
            skip_reason=pl.lit(None, pl.String),
        )
        have = pl.concat([have, missing.select(have.columns)])
    cols = [*SUITE, "run_id", "position", "key", "task_id", "outcome", "value", "skip_reason"]
    # sorted on integers (a suite's index, a key's rank among the keys, the position): a sort
    # on the strings themselves costs twice the memory at a million cells
    suites = meta.select(SUITE).unique().sort(SUITE, nulls_last=False).with_row_index("_suite")
    suite_of = _by_run(meta.join(suites, on=SUITE, nulls_equal=True), "_suite")
    ranked = pl.Enum(sorted(keys.drop_nulls().to_list()))
    return have.select(cols).sort(
        pl.col("run_id").replace_strict(suite_of), pl.col("key").cast(ranked), "position"
    )


def _by_run(meta: pl.DataFrame, column: str) -> dict[str, Any]:
    return dict(zip(meta["run_id"].to_list(), meta[column].to_list(), strict=True))


def _counts() -> list[pl.Expr]:
    """The outcome counts and solve rate of a group of cells (the view's definitions)."""
    o = pl.col("outcome")
    n = {f"n_{name}": (o == name).sum() for name in ("success", "failure", "partial")}
    return [
        pl.col("value").count().alias("n_valid"),
        *(expr.alias(name) for name, expr in n.items()),
        (o == "error").sum().alias("n_errored"),
        ((o == "error") & pl.col("value").is_not_null()).sum().alias("n_errored_as_failure"),
        (o == "abstained").sum().alias("n_abstained"),
        (o == "missing").sum().alias("n_missing"),
        pl.when(pl.col("value").count() > 0)
        .then(pl.col("value").sum() / pl.col("value").count())
        .alias("solve_rate"),
    ]


def _keys(outcomes: pl.DataFrame, meta: pl.DataFrame) -> pl.DataFrame:
    """One row per (suite, key): counts, difficulty, the latest flips (module docstring)."""
    ends = meta.filter(pl.col("suite_position") >= pl.col("n_suite_runs") - 2)
    last = ends.filter(pl.col("suite_position") == pl.col("n_suite_runs") - 1)["position"]
    prev = ends.filter(pl.col("suite_position") == pl.col("n_suite_runs") - 2)["position"]
    o, pos = pl.col("outcome"), pl.col("position")
    is_last, is_prev = pos.is_in(last.implode()), pos.is_in(prev.implode())
    applied = pl.col("run_id").replace_strict(_by_run(meta, "errors")).filter(o != "missing")
    latest = o.filter(is_last).first()
    previous = o.filter(is_prev).first()
    earlier = (o == "success") & ~is_last
    keys = outcomes.group_by([*SUITE, "key"]).agg(
        pl.col("task_id").first(),
        pl.len().alias("n_runs"),
        pl.when(applied.n_unique() == 1)
        .then(applied.first())
        .otherwise(pl.lit("mixed"))
        .alias("errors"),
        *_counts(),
        pl.col("value").min().alias("_min"),
        latest.alias("latest_outcome"),
        previous.alias("previous_outcome"),
        earlier.any().alias("_solved_before"),
        pl.col("run_id")
        .filter(earlier)
        .sort_by(pos.filter(earlier))
        .last()
        .alias("last_solved_run"),
    )
    lo, po = pl.col("latest_outcome"), pl.col("previous_outcome")
    keys = keys.with_columns(
        always_fails=(pl.col("n_success") == 0)
        & (pl.col("n_partial") == 0)
        & (pl.col("n_failure") > 0),
        always_solved=(pl.col("n_valid") > 0) & (pl.col("_min") == 1).fill_null(False),
        newly_broken=((po == "success") & (lo == "failure")).fill_null(False),
        newly_fixed=((po == "failure") & (lo == "success")).fill_null(False),
        newly_errored=((po == "success") & (lo == "error")).fill_null(False),
        broken_since_solved=(lo == "failure") & pl.col("_solved_before"),
        difficulty_rank=pl.col("solve_rate").rank("min").over(SUITE).cast(pl.UInt32),
    )
    return keys.select(_KEY_COLUMNS).sort([*SUITE, "solve_rate", "key"], nulls_last=True)


def _runs(outcomes: pl.DataFrame, meta: pl.DataFrame) -> pl.DataFrame:
    """One row per run in the order: counts, solve rate, flips against the run before."""
    o = pl.col("outcome")
    before = o.shift(1).over([*SUITE, "key"])  # outcomes are sorted by suite, key, position
    flips = outcomes.with_columns(
        broken=(before == "success") & (o == "failure"),
        fixed=(before == "failure") & (o == "success"),
    )
    counts = flips.group_by("run_id").agg(
        (pl.len() - (o == "missing").sum()).alias("n_keys"),
        *_counts(),
        pl.col("broken").sum().alias("n_broken"),
        pl.col("fixed").sum().alias("n_fixed"),
    )
    placed = meta.with_columns(is_latest=pl.col("suite_position") == pl.col("n_suite_runs") - 1)
    return (
        placed.join(counts, on="run_id", how="left")
        .sort("position")
        .select(
            "run_id",
            "agent_name",
            "agent_version",
            *SUITE,
            "ingested_at",
            "errors",
            "position",
            "suite_position",
            "is_latest",
            *counts.columns[1:],
        )
    )


def _suites(keys: pl.DataFrame, meta: pl.DataFrame) -> pl.DataFrame:
    """One row per suite: its runs, keys, latest and previous runs, and the key counts."""
    ends = meta.group_by(SUITE).agg(
        pl.len().alias("n_runs"),
        pl.col("run_id").sort_by("position").last().alias("latest_run"),
        pl.col("run_id")
        .sort_by("position")
        .reverse()
        .get(1, null_on_oob=True)
        .alias("previous_run"),
    )
    counted = keys.group_by(SUITE).agg(
        pl.len().alias("n_keys"),
        *(pl.col(c).sum().alias(f"n_{c}") for c in (
            "always_fails", "always_solved", "newly_broken", "newly_fixed", "newly_errored",
            "broken_since_solved",
        )),
    )  # fmt: skip
    return ends.join(counted, on=SUITE, how="left", nulls_equal=True).sort(SUITE)
