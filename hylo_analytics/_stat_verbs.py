"""Store's verbs of the across-policy statistics (the Pareto front), kept out of ``api.py``.

:class:`StatVerbs` is a mixin of :class:`~hylo_analytics.api.Store` (``api.py`` holds the
pipeline's verbs and is at its 600 lines); like every verb, each method names the keywords of
the stage function it calls and imports its stage on first use, so opening a store stays
cheap. It sits in the interface stage, so it may hand a result the chart that draws it: the
compare stage imports no chart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import altair as alt

    from hylo_analytics._harness import Errors
    from hylo_analytics.compare.engine import Reducer
    from hylo_analytics.compare.pareto import ParetoFront
    from hylo_analytics.metrics import Direction
    from hylo_analytics.stats.bootstrap import Seed
    from hylo_analytics.stats.pareto import Pairing
    from hylo_analytics.store import ParquetStore

__all__ = ["DEFAULT_PARETO_RESAMPLES", "StatVerbs"]

DEFAULT_LEVEL = 0.95  # stats.closed_form.DEFAULT_LEVEL
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


def _draw_pareto(front: ParetoFront, **options: Any) -> alt.LayerChart:
    """:func:`~hylo_analytics.charts.pareto.pareto_intervals` of ``front`` (altair is
    imported when a chart is asked for, not with the result)."""
    from hylo_analytics.charts.pareto import pareto_intervals

    return pareto_intervals(front, **options)
