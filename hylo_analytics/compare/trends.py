"""Trends over versions: each task's rate per version, and where it first fell below its best.

:func:`trend_scores` orders a long scores frame's runs by a version column and answers, per
task, "where did it break": :func:`trend_runs` (``Store.trend``) does it on the store's
resolved scores, ordering runs by ``agent_version`` in natural version order (``1.9 < 1.10``,
``1.2.0-rc1 < 1.2.0``) or by a run field such as ``metadata.training_step``. A
:class:`Trend` holds four frames:

- ``rates``: each (task, version)'s rate with its interval, :func:`~hylo_analytics.aggregate.
  aggregate_scores`' (Wilson for 0/1 metrics, the errors policy per run, epochs reduced by
  their mean per key); runs that share a version (seeds, re-runs) are pooled as that
  version's keys: a key's value is the mean over every run and epoch of it, as ``rank``
  pools a policy's runs;
- ``tests``: for each task and each version after its first, the paired comparison with the
  **best earlier version** (the highest rate before it in the metric's direction; a tie goes
  to the earliest version that reached that rate, so a regression is dated from when the
  level was first reached), made by :func:`~hylo_analytics.compare.compare_scores`: keys
  pair across the two versions, Tango's score test and interval for 0/1 metrics (the
  bootstrap for others), one-sided (worse), with its verdict;
- ``regressions``: per task, the **regression point**: the first version whose test says
  ``regressed``, with the best earlier version it fell from, the difference with the
  interval the verdict was decided on, p and adjusted p, and a note (or the closest call
  when no version was worse);
- ``flips``: the keys that flipped at each regression point, both versions' values, and
  whether either side's episode was a harness error (``errored``): under
  ``errors="failure"`` an errored episode counts as a failure, so a "regression" there may
  be a timeout, and the note says so.

Every figure is computed by the modules that compute it for one comparison: this module only
lays the versions out. All (version, best earlier) couples go through the engine in one call:
each version is a candidate run whose keys are prefixed by its position and task, and one
reference run holds, under the same prefixed keys, the values of each task's best earlier
version, so a version's per-task rows are its tests.

**Multiplicity.** ``family="tasks"`` (the default, the issue's "Holm-adjusted over tasks"):
for each version, its tasks' p-values are adjusted together (the engine's family of one
candidate: Holm by default), so at one version the chance of calling any task regressed
when none is stays near alpha. Scanning many versions at alpha each is a *screening*, not a
proof. ``family="scan"`` adjusts over every (task, version) test of the trend at once (the
engine's ``level`` family), at the price of power. Neither corrects for choosing the parent
by its observed rate: the best of many earlier versions is optimistic (the winner's curse),
so a later version of the same true rate looks worse than it. Measured on flat simulated
trends (10 tasks x 50 keys, no true change; ``benchmarks/bench_trends.py --false-alarms``):
``tasks`` gives some task a regression point in 70 % of 10-version trends and in every
200-version trend; ``scan`` in 12 % and 38 % (1.2 % and 5.2 % of the tasks). Read a ``tasks``
regression point as "look here", a ``scan`` one as stronger evidence (not a family-wise
guarantee), and either with its flips (``docs/statistics.md``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from hylo_analytics._harness import Errors
from hylo_analytics._html import text
from hylo_analytics._versions import natural_sorted
from hylo_analytics.aggregate import aggregate_scores
from hylo_analytics.compare._prepare import Reducer, declared_pairs, one_direction
from hylo_analytics.compare._trend_parts import REF, flips, labelled, regressions, stacked
from hylo_analytics.compare.engine import compare_scores
from hylo_analytics.compare.verdicts import Rule, StatisticalRule
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.metrics import Direction, resolve_directions
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL
from hylo_analytics.stats.methods import DEFAULT_RESAMPLES, DEFAULT_SEED, Seed

__all__ = ["FAMILIES", "Trend", "TrendFamily", "trend_scores"]

TrendFamily = Literal["tasks", "scan"]
FAMILIES: tuple[str, ...] = ("tasks", "scan")
_ENGINE_FAMILY = {"tasks": "comparison", "scan": "level"}
_KEEP = ("epoch", "skip_reason", "errored", "_policy", "errors_policy", "source_format", "source")


@dataclass(frozen=True)
class Trend:
    """What :func:`trend_scores` found: ``rates``, ``tests``, ``regressions``, ``flips``.

    ``order`` names what the versions are ordered by and ``order_rule`` how (``natural
    version order`` or ``numeric``); ``versions`` are the version labels in that order
    (``position`` in the frames is the 0-based index into it). ``family``: ``tasks`` (each
    version's tasks adjusted together) or ``scan`` (every test of the trend together).
    """

    rates: pl.DataFrame
    tests: pl.DataFrame
    regressions: pl.DataFrame
    flips: pl.DataFrame
    metric: str
    direction: str
    order: str
    order_rule: str
    versions: tuple[str, ...]
    tasks: tuple[str, ...]
    family: str
    adjust: str
    alpha: float
    level: float
    errors: str

    def describe(self) -> str:
        """One sentence: what was ordered by what, and how the tests were adjusted."""
        word = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "unadjusted"}[self.adjust]
        over = (
            f"{word} over each version's tasks"
            if self.family == "tasks"
            else f"{word} over all {self.tests.height:,} tests of the scan"
        )
        found = int(self.regressions["regressed"].sum())
        return (
            f"{self.metric} over {len(self.versions):,} versions ordered by {self.order} "
            f"({self.order_rule}); each version against the best earlier one per task, "
            f"one-sided, {over}, alpha {self.alpha:g}, errors {self.errors}: "
            f"{found} of {self.regressions.height} task(s) regressed"
        )

    def __repr__(self) -> str:
        cols = ["task_id", "regressed", "version", "best_version", "diff", "p_adjusted"]
        shown = self.regressions.select([c for c in cols if c in self.regressions.columns])
        with pl.Config(tbl_rows=30, float_precision=4):
            return f"Trend({self.describe()})\n{shown}"

    def _repr_html_(self) -> str:
        from hylo_analytics._html import text as esc

        rows = "".join(
            "<tr>" + "".join(f"<td>{esc(v)}</td>" for v in row) + "</tr>"
            for row in self.regressions.select("task_id", "version", "best_version", "note")
            .head(50)
            .iter_rows()
        )
        head = "".join(f"<th>{h}</th>" for h in ("task", "regressed at", "fell from", "note"))
        return (
            f"<div><p>{text(self.describe())}</p><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{rows}</tbody></table></div>"
        )


def trend_scores(
    scores: pl.DataFrame,
    *,
    version: str = "agent_version",
    order_by: str | None = None,
    order_label: str | None = None,
    tasks: Sequence[str] = ("task_id",),
    metric: str = "success",
    directions: Mapping[str, Direction] | None = None,
    rule: Rule | None = None,
    family: TrendFamily = "tasks",
    errors: Errors | None = None,
    reducer: Reducer = "mean",
    level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = DEFAULT_SEED,
    progress: bool | None = False,
) -> Trend:
    """Each task's rate per version and its regression point (see the module docstring).

    Parameters
    ----------
    scores : one row per (run, key[, epoch], metric) with ``run_id``, ``key``, ``metric``,
        ``value``, the ``version`` and ``tasks`` columns, and the engine's optional columns
        (``errored``, ``skip_reason``, ``_policy`` / ``source_format`` for the errors policy,
        ``metadata`` for declared directions).
    version : the column naming each row's version; rows of several runs of one version are
        pooled (keys reduced by their mean over the runs and epochs).
    order_by : a numeric column giving each version's place (a training step); default the
        natural version order of the ``version`` labels. ``order_label``: how ``order`` is
        named in the output (default the column's name).
    tasks : the columns naming a task; keys pair within a task.
    directions, rule, errors, reducer, level, n_resamples, seed : as
        :func:`~hylo_analytics.compare.compare_scores` (``rule``'s ``alpha`` and ``adjust``
        decide the verdicts; default Holm at 0.05).
    family : ``tasks`` (adjust each version's tasks together) or ``scan`` (every test).
    progress : a progress bar on stderr (None: on a terminal only).
    """
    if family not in FAMILIES:
        raise InputError(f"trend: family must be one of {FAMILIES}, got {family!r}")
    rule = rule or StatisticalRule()
    tasks = list(tasks)
    with _phases(progress) as step:
        lay = _layout(scores, version, order_by, tasks, metric, order_label)
        versions, rule_name = lay.versions, lay.rule_name
        direction = _direction(scores, metric, directions)
        options: dict[str, Any] = {"errors": errors, "reducer": reducer}
        rates = _rates(lay, tasks, metric, level, n_resamples, seed, options)
        step()
        couples = _couples(rates, tasks, direction)
        tests = _tests(lay, couples, tasks, metric, direction, rule, family, level,
                       n_resamples, seed, options)  # fmt: skip
        step()
        tests = labelled(tests, versions)
        found = regressions(tests, rates, tasks)
        keys = flips(lay.frame, lay.keys, found, tasks, metric, direction, options, versions)
        step()
    policy = str(tests["errors"][0]) if tests.height else str(rates["errors"][0])
    return Trend(
        rates=rates.drop("_task"),
        tests=tests.drop("_task"),
        regressions=found,
        flips=keys,
        metric=metric,
        direction=direction,
        order=order_label or (order_by or version),
        order_rule=rule_name,
        versions=tuple(versions),
        tasks=tuple(tasks),
        family=family,
        adjust=rule.adjust,
        alpha=rule.alpha,
        level=level,
        errors=policy,
    )


@contextmanager
def _phases(progress: bool | None) -> Iterator[Any]:
    """A three-step bar (rates, tests, regressions and flips) on a terminal or in Jupyter."""
    from hylo_analytics import _progress

    with _progress.progress(3, "trend", enabled=progress) as bar:
        yield lambda: bar.update(1)


@dataclass(frozen=True)
class _Layout:
    """The rows as the engine reads them, and what maps their codes back to names.

    ``frame``: one row per score with ``run_id`` set to its version's position (the runs of
    a version pooled), ``key`` to a code of the (task, key) pair (``keys``), ``_task`` the
    task's code (``tasks``), and the engine's columns; integers, not names, so the million
    rows of 2,000 versions stay small and pair fast.
    """

    frame: pl.DataFrame
    versions: list[str]
    rule_name: str
    tasks: pl.DataFrame  # _task and the task columns
    keys: pl.DataFrame  # key (the code), _task and the original key as _key
    n_runs: pl.DataFrame  # _pos, n_runs


def _layout(
    scores: pl.DataFrame,
    version: str,
    order_by: str | None,
    tasks: list[str],
    metric: str,
    named: str | None,
) -> _Layout:
    """The rows of ``metric`` laid out for the engine (see :class:`_Layout`)."""
    needed = ["run_id", "key", "metric", "value", version, *tasks]
    needed += [order_by] if order_by else []
    missing = [c for c in dict.fromkeys(needed) if c not in scores.columns]
    if missing:
        raise InputError(f"trend: the scores lack column(s) {missing}; they have {scores.columns}")
    # lazily: each frame below is one pass over the rows, never a copy of them all
    rows = scores.lazy().filter(pl.col("metric").cast(pl.String) == metric)
    # one row per (run, version): the order is decided on these, never on the score rows
    units = rows.select("run_id", version, *([order_by] if order_by else [])).unique().collect()
    if units.is_empty():
        held = sorted(scores["metric"].cast(pl.String).unique().drop_nulls().to_list())
        raise SelectionError(f"trend: no scores of {metric!r}; the scores hold {held}")
    units = units.with_columns(_label=pl.col(version).cast(pl.String))
    lacking = units.filter(pl.col("_label").is_null())
    if lacking.height:
        runs = lacking["run_id"].cast(pl.String).unique().sort().to_list()
        raise SelectionError(
            f"trend: {len(runs)} run(s) have no {named or version!r} to order by, e.g. "
            f"{runs[:3]}; select runs that have one (--run) or order by another field"
        )
    versions, rule_name = _order(units, order_by)
    if len(versions) < 2:
        raise SelectionError(
            f"trend: the runs hold {len(versions)} version(s) of {named or version!r}; a trend "
            "needs two"
        )
    at = {v: i for i, v in enumerate(versions)}
    units = units.with_columns(
        _pos=pl.col("_label").replace_strict(at, return_dtype=pl.Int64)
    ).unique(["run_id", version])
    task_codes = (
        rows.select(tasks).unique().sort(tasks, nulls_last=True).with_row_index("_task")
        .with_columns(pl.col("_task").cast(pl.Int64)).collect()
    )  # fmt: skip
    keys = (
        rows.select(*tasks, "key").unique().join(task_codes.lazy(), on=tasks, nulls_equal=True)
        .sort("_task", "key").with_row_index("_k")
        .select(pl.col("_k").cast(pl.Int64), *tasks, "_task", pl.col("key").alias("_key"))
        .collect()
    )  # fmt: skip
    keep = [c for c in _KEEP if c in scores.columns]
    frame = (
        rows.select("run_id", version, *tasks, "key", "value", *keep)
        .join(units.lazy().select("run_id", version, "_pos"), on=["run_id", version],
              nulls_equal=True)
        .join(keys.lazy().rename({"_key": "key"}), on=[*tasks, "key"], nulls_equal=True)
        .select(
            pl.col("_pos").alias("run_id"), pl.col("_k").alias("key"), "_task",
            pl.lit(metric, pl.String).alias("metric"), pl.col("value").cast(pl.Float64), *keep,
        )
        .collect()
    )  # fmt: skip
    n_runs = units.group_by("_pos").agg(n_runs=pl.col("run_id").n_unique().cast(pl.Int64))
    return _Layout(frame, versions, rule_name, task_codes, keys.rename({"_k": "key"}), n_runs)


def _order(units: pl.DataFrame, order_by: str | None) -> tuple[list[str], str]:
    """The distinct version labels (``_label`` of ``units``) in order, and the rule's name."""
    if order_by is None:
        found = units["_label"].unique().to_list()
        return [str(v) for v in natural_sorted(found)], "natural version order"
    if not units.schema[order_by].is_numeric():
        raise InputError(f"trend: order_by {order_by!r} must be a numeric column")
    steps = units.group_by("_label").agg(
        pl.col(order_by).min().alias("lo"), pl.col(order_by).max().alias("hi")
    )
    clash = steps.filter(pl.col("lo") != pl.col("hi"))
    if clash.height or steps["lo"].null_count():
        raise InputError(
            f"trend: each version needs one value of {order_by!r}; "
            f"{clash.height + steps['lo'].null_count()} have several or none"
        )
    nat = {v: i for i, v in enumerate(natural_sorted(steps["_label"].to_list()))}
    steps = steps.with_columns(_nat=pl.col("_label").replace_strict(nat, return_dtype=pl.Int64))
    return steps.sort("lo", "_nat")["_label"].to_list(), "numeric"


def _direction(
    scores: pl.DataFrame, metric: str, directions: Mapping[str, Direction] | None
) -> str:
    """The metric's direction by the engine's one rule; a trend needs one to call "worse"."""
    declared = declared_pairs(scores) if "metadata" in scores.columns else None
    found = resolve_directions([metric], explicit=directions, declared=one_direction(declared))
    if metric not in found:
        raise InputError(
            f"trend: no direction known for {metric!r}, so no version can be called worse; "
            f"give directions={{{metric!r}: 'maximize' | 'minimize'}} (CLI: --direction)"
        )
    return found[metric][0]


def _rates(
    lay: _Layout,
    tasks: list[str],
    metric: str,
    level: float,
    n_resamples: int,
    seed: Seed,
    options: Mapping[str, Any],
) -> pl.DataFrame:
    """Each (task, version)'s rate and interval, aggregate's, with its runs counted.

    A version whose keys have one row each (one run, one epoch) needs no reduction: the
    mean of one value is the value, and aggregate's reduction pass is most of its cost."""
    pooled = lay.frame.select(pl.struct("run_id", "key").n_unique()).item() < lay.frame.height
    agg = aggregate_scores(
        lay.frame,
        by=["_task", "run_id"],
        metrics=[metric],
        statistics=["mean"],
        level=level,
        n_resamples=n_resamples,
        seed=seed,
        errors=options["errors"],
        reducer=options["reducer"] if pooled else None,
    ).rename({"run_id": "_pos"})
    labels = pl.DataFrame({"_pos": range(len(lay.versions)), "version": lay.versions},
                          schema={"_pos": pl.Int64, "version": pl.String})  # fmt: skip
    return (
        agg.join(labels, on="_pos")
        .join(lay.n_runs, on="_pos")
        .join(lay.tasks, on="_task")
        .select(
            *tasks,
            "version",
            pl.col("_pos").alias("position"),
            pl.col("mean").alias("rate"),
            "ci_low",
            "ci_high",
            pl.col("n_valid").alias("n"),
            "n_total",
            "n_errors",
            "n_runs",
            "ci_level",
            "ci_method",
            "errors",
            "_task",
        )
        .sort("_task", "position")
    )


def _couples(rates: pl.DataFrame, tasks: list[str], direction: str) -> pl.DataFrame:
    """Per task and version after the task's first rated one: the best earlier version.

    A running maximum of the rate (minimum when the metric is minimized) over the earlier
    versions with a rate; a record is a version strictly better than every one before it,
    so among equal rates the earliest is the best (the level is dated from when it was first
    reached)."""
    oriented = pl.col("rate") if direction == "maximize" else -pl.col("rate")
    rated = rates.filter(pl.col("rate").is_not_null()).sort("_task", "position")
    before = oriented.cum_max().shift(1).over("_task")
    record = before.is_null() | (oriented > before)
    best = pl.when(record).then(pl.col("position")).forward_fill().shift(1).over("_task")
    return (
        rated.with_columns(_best=best)
        .filter(pl.col("_best").is_not_null())
        .select(*tasks, "_task", "position", pl.col("_best").cast(pl.Int64).alias("best_position"))
    )


def _tests(
    lay: _Layout,
    couples: pl.DataFrame,
    tasks: list[str],
    metric: str,
    direction: str,
    rule: Rule,
    family: TrendFamily,
    level: float,
    n_resamples: int,
    seed: Seed,
    options: Mapping[str, Any],
) -> pl.DataFrame:
    """Every (version, best earlier) couple through the engine in one call."""
    if couples.is_empty():
        return _no_tests(tasks)
    cands = [str(p) for p in couples["position"].unique().sort().to_list()]
    out = compare_scores(
        stacked(lay.frame, couples, lay.keys.height),
        candidates=cands,
        parent=REF,
        metrics=[metric],
        by=["_task"],
        directions={metric: direction},  # type: ignore[dict-item]
        rule=rule,
        family=_ENGINE_FAMILY[family],  # type: ignore[arg-type]
        errors=options["errors"],
        reducer=options["reducer"],
        level=level,
        n_resamples=n_resamples,
        seed=seed,
    ).filter(pl.col("level") != "overall")
    worse = "p_worse" if rule.adjust == "none" else f"p_worse_{rule.adjust}"
    return (
        out.with_columns(pl.col("candidate").cast(pl.Int64).alias("position"))
        .join(couples, on=["_task", "position"])
        .select(
            *tasks,
            "_task",
            "position",
            "best_position",
            pl.col("mean_candidate").alias("rate"),
            pl.col("mean_parent").alias("best_rate"),
            pl.col("mean_diff").alias("diff"),
            "ci_low",
            "ci_high",
            "ci_adj_low",
            "ci_adj_high",
            "ci_adj_level",
            "n_pairs",
            pl.col("candidate_wins").alias("wins"),
            pl.col("parent_wins").alias("losses"),
            "ties",
            "n_dropped",
            "test",
            "p_worse",
            pl.col(worse).alias("p_adjusted"),
            "family_size",
            "verdict",
            "verdict_note",
            "errors",
        )
        .sort("_task", "position")
    )


def _no_tests(tasks: list[str]) -> pl.DataFrame:
    """The tests frame of a trend with nothing to test (every task rated once at most)."""
    floats = ["rate", "best_rate", "diff", "ci_low", "ci_high", "ci_adj_low", "ci_adj_high",
              "ci_adj_level", "p_worse", "p_adjusted"]  # fmt: skip
    ints = ["_task", "position", "best_position", "n_pairs", "wins", "losses", "ties",
            "n_dropped", "family_size"]  # fmt: skip
    schema: dict[str, Any] = {t: pl.String for t in tasks}
    schema |= {c: pl.Int64 for c in ints} | {c: pl.Float64 for c in floats}
    schema |= {c: pl.String for c in ("test", "verdict", "verdict_note", "errors")}
    order = [*tasks, "_task", "position", "best_position", "rate", "best_rate", "diff",
             "ci_low", "ci_high", "ci_adj_low", "ci_adj_high", "ci_adj_level", "n_pairs",
             "wins", "losses", "ties", "n_dropped", "test", "p_worse", "p_adjusted",
             "family_size", "verdict", "verdict_note", "errors"]  # fmt: skip
    return pl.DataFrame(schema=schema).select(order)
