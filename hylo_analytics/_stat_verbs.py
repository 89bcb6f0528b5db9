"""Store's verbs of the statistics beyond a mean and a paired difference, kept out of ``api.py``.

:class:`StatVerbs` is a mixin of :class:`~hylo_analytics.api.Store` (``api.py`` holds the
pipeline's verbs and is at its 600 lines): ``pareto`` (the cost-quality front and each
policy's probability of being on it), ``critical_difference`` (average ranks, Friedman,
Nemenyi or Wilcoxon-Holm cliques), ``shrink`` (per-task rates shrunk toward their suite),
``pass_at_k`` (pass@k and pass^k curves over the items of repeated samples) and
``epochs_plan`` (a difference's variance split and the epochs that halve its interval). Like every verb, each method names the keywords of the stage function it
calls and imports its stage on first use, so opening a store stays cheap. It sits in the
interface stage, so it may hand a result the chart that draws it: the compare stage imports
no chart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import altair as alt
    import polars as pl

    from hylo_analytics._harness import Errors
    from hylo_analytics.compare.calibration import Calibration
    from hylo_analytics.compare.critical_difference import CriticalDifference
    from hylo_analytics.compare.engine import Reducer
    from hylo_analytics.compare.pareto import ParetoFront
    from hylo_analytics.metrics import Direction, MetricRegistry
    from hylo_analytics.stats.bootstrap import Seed
    from hylo_analytics.stats.critical_difference import CDTest
    from hylo_analytics.stats.pareto import Pairing
    from hylo_analytics.stats.reducers import Reducer as EpochReducer
    from hylo_analytics.stats.repeated import CurveMethod
    from hylo_analytics.stats.shrinkage import ShrinkInterval
    from hylo_analytics.store import ParquetStore

__all__ = ["DEFAULT_PARETO_RESAMPLES", "StatVerbs"]

DEFAULT_LEVEL = 0.95  # stats.closed_form.DEFAULT_LEVEL (tests pin it)
DEFAULT_RESAMPLES = 10_000  # stats.methods.DEFAULT_RESAMPLES (pinned there too)
DEFAULT_PARETO_RESAMPLES = 1_000  # stats.pareto.DEFAULT_PARETO_RESAMPLES (tests pin both)


class StatVerbs:
    """The statistics verbs of a store holding :attr:`parquet`."""

    parquet: ParquetStore

    def pareto(
        self,
        runs: Sequence[str] | None = None,
        *,
        cost: str,
        quality: str = "success",
        policy: str = "agent_name",
        strata: Sequence[str] = ("benchmark_id", "split"),
        source: str | None = None,
        policies: Sequence[str] | None = None,
        directions: Mapping[str, Direction] | None = None,
        errors: Errors | None = None,
        reducer: Reducer | None = "mean",
        pairing: Pairing = "auto",
        n_resamples: int = DEFAULT_PARETO_RESAMPLES,
        level: float = DEFAULT_LEVEL,
        seed: Seed = 0,
    ) -> ParetoFront:
        """The cost-quality Pareto front of the policies (default the agents): each one's
        mean ``quality`` and ``cost`` with percentile intervals, whether it is on the front
        of the means and its probability of being on it, from a bootstrap of keys within
        suites (paired where the policies share their keys). ``cost``: any metric of the
        store (``steps``, a latency, a token cost derived by ``evaluate``). See
        :func:`hylo_analytics.compare.pareto_runs`; ``.chart()`` draws it.
        """
        from hylo_analytics.compare import pareto_runs

        front = pareto_runs(
            self.parquet, runs, cost=cost, quality=quality, policy=policy, strata=strata,
            source=source, policies=policies, directions=directions, errors=errors,
            reducer=reducer, pairing=pairing, n_resamples=n_resamples, level=level, seed=seed,
        )  # fmt: skip
        return replace(front, draw=_draw_pareto)

    def calibrate(
        self,
        runs: Sequence[str] | None = None,
        *,
        trusted: str = "success",
        judge: str | None = None,
        trusted_source: str | None = None,
        judge_source: str | None = None,
        policy: str = "agent_name",
        strata: Sequence[str] = ("benchmark_id", "split"),
        policies: Sequence[str] | None = None,
        baseline: str | None = None,
        errors: Errors | None = None,
        reducer: Reducer | None = "mean",
        lam: float | None = None,
        level: float = DEFAULT_LEVEL,
    ) -> Calibration:
        """Each policy's rate of the ``trusted`` grade (a person's, an oracle's: on some
        keys) by PPI++ from a judge's grades of every key (``judge`` / ``judge_source``: a
        ``vlm_judge`` named ``judge`` writes ``success`` from source ``grade:judge``), beside
        the classical and the judge-only estimates, and each policy's paired difference from
        ``baseline`` the same way. See :func:`hylo_analytics.compare.calibrate_runs`;
        ``.chart()`` draws it.
        """
        from hylo_analytics.compare import calibrate_runs

        result = calibrate_runs(
            self.parquet, runs, trusted=trusted, judge=judge, trusted_source=trusted_source,
            judge_source=judge_source, policy=policy, strata=strata, policies=policies,
            baseline=baseline, errors=errors, reducer=reducer, lam=lam, level=level,
        )  # fmt: skip
        return replace(result, draw=_draw_calibration)

    def shrink(
        self,
        runs: Sequence[str] | str | None = None,
        *,
        by: Sequence[str] = ("run_id",),
        task: Sequence[str] = ("task_id",),
        suite: Sequence[str] = ("benchmark_id", "split"),
        metric: str = "success",
        errors: Errors | None = None,
        level: float = DEFAULT_LEVEL,
        interval: ShrinkInterval = "hierarchical",
        n_resamples: int = 200,
        seed: Seed = 0,
        source: str | Sequence[str] | None = None,
        registry: MetricRegistry | None = None,
    ) -> pl.DataFrame:
        """Per task, the raw rate beside the rate shrunk toward its suite (empirical-Bayes
        beta-binomial); see :func:`hylo_analytics.aggregate.shrunk_rates` (``runs``: ids,
        prefixes or selectors, default every run)."""
        from hylo_analytics.aggregate.shrinkage import shrunk_rates

        ids = None if runs is None else self.parquet.select_runs(runs)
        return shrunk_rates(
            self.parquet, by=by, task=task, suite=suite, metric=metric, runs=ids, errors=errors,
            level=level, interval=interval, n_resamples=n_resamples, seed=seed, source=source,
            registry=registry,
        )  # fmt: skip

    def pass_at_k(
        self,
        runs: Sequence[str] | str | None = None,
        *,
        k: int | Sequence[int] | None = None,
        by: Sequence[str] = ("run_id",),
        metric: str = "success",
        item: str = "key",
        errors: Errors | None = None,
        ci: CurveMethod = "wilson",
        level: float = DEFAULT_LEVEL,
        n_resamples: int = DEFAULT_RESAMPLES,
        seed: Seed = 0,
        source: str | Sequence[str] | None = None,
        registry: MetricRegistry | None = None,
    ) -> pl.DataFrame:
        """pass@k (unbiased, Chen et al. 2021) and pass^k (tau-bench) of each ``by`` group
        over its items, k = 1 .. the most samples of an item (or ``k``), with intervals over
        items; items with fewer than k samples are counted (``n_items_short``), not used.
        ``item``: ``key`` (its epochs are its samples) or ``task_id`` (its seeds and epochs).
        ``runs``: ids, prefixes or selectors (default every run). See
        :func:`hylo_analytics.aggregate.pass_k_curves`; ``charts.pass_k_curves`` draws it.
        """
        from hylo_analytics.aggregate.repeated import pass_k_curves

        ids = None if runs is None else self.parquet.select_runs(runs)
        return pass_k_curves(
            self.parquet, by=by, metric=metric, item=item, k=k, runs=ids, errors=errors, ci=ci,
            level=level, n_resamples=n_resamples, seed=seed, source=source, registry=registry,
        )  # fmt: skip

    def epochs_plan(
        self,
        candidate: str | Sequence[str],
        parent: str | Sequence[str] | None = None,
        *,
        metric: str = "success",
        item: str = "key",
        errors: Errors | None = None,
        level: float = DEFAULT_LEVEL,
        source: str | Sequence[str] | None = None,
        registry: MetricRegistry | None = None,
    ) -> pl.DataFrame:
        """The variance of ``candidate``'s paired difference to ``parent`` (or of its mean)
        split into the within-item part (the epochs' noise) and the between-item part, and
        the epochs per item, or the items, that would halve its interval (none when the
        between part is over a quarter). ``candidate``, ``parent``: ids, prefixes or
        selectors, a side's runs pooled per item. See
        :func:`hylo_analytics.compare.epochs_plan`.
        """
        from hylo_analytics.compare.epochs import epochs_plan

        return epochs_plan(
            self.parquet, candidate, parent, metric=metric, item=item, errors=errors,
            level=level, source=source, registry=registry,
        )  # fmt: skip

    def critical_difference(
        self,
        runs: Sequence[str] | str | None = None,
        *,
        policy: str = "agent_name",
        blocks: str | Sequence[str] = "task_id",
        metric: str = "success",
        test: CDTest = "nemenyi",
        alpha: float = 0.05,
        policies: Sequence[str] | None = None,
        directions: Mapping[str, Direction] | None = None,
        errors: Errors | None = None,
        reducer: str | EpochReducer | None = "mean",
        source: str | Sequence[str] | None = None,
        registry: MetricRegistry | None = None,
    ) -> CriticalDifference:
        """Average ranks across tasks or suites, Friedman, Nemenyi or Wilcoxon-Holm cliques and
        ``.chart()``, the diagram: :func:`hylo_analytics.compare.critical_difference_scores`."""
        from hylo_analytics.compare import critical_difference_scores

        result = critical_difference_scores(
            self.parquet, runs=runs, policy=policy, blocks=blocks, metric=metric, test=test,
            alpha=alpha, policies=policies, directions=directions, errors=errors,
            reducer=reducer, source=source, registry=registry,
        )  # fmt: skip
        return replace(result, draw=_draw_cd)


def _draw_calibration(result: Calibration, **options: Any) -> alt.LayerChart:
    """:func:`~hylo_analytics.charts.calibration.calibration_intervals` of ``result``."""
    from hylo_analytics.charts.calibration import calibration_intervals

    return calibration_intervals(result, **options)


def _draw_pareto(front: ParetoFront, **options: Any) -> alt.LayerChart:
    """:func:`~hylo_analytics.charts.pareto.pareto_intervals` of ``front`` (altair is
    imported when a chart is asked for, not with the result)."""
    from hylo_analytics.charts.pareto import pareto_intervals

    return pareto_intervals(front, **options)


def _draw_cd(result: CriticalDifference, **options: Any) -> alt.LayerChart:
    """:func:`~hylo_analytics.charts.critical_difference.critical_difference_diagram` of
    ``result`` (altair is imported when a chart is asked for, not with the result)."""
    from hylo_analytics.charts.critical_difference import critical_difference_diagram

    return critical_difference_diagram(result, **options)
