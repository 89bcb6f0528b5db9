"""Sequential comparison on a store: look after every ingest, stop when the evidence is in.

:func:`sequential_compare` reads the current paired counts of two runs (the overall row of
:func:`~hylo_analytics.compare.compare_runs`, so the same pairs, gate and resolution as
``Store.compare``) and evaluates the e-process of :mod:`hylo_analytics.stats.sequential` on
them. A single look is valid on its own, since the e-value depends only on the counts; "stop at
the first look past ``1/alpha``" needs the history, which :class:`SequentialMonitor` keeps:
re-ingest the growing EvalLogs (same ``run_id``: the store supersedes the run's old rows), call
``monitor = monitor.look(store)``, and stop once ``monitor.stopped``. Nothing is written to the
store.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import polars as pl

from hylo_analytics._harness import Errors
from hylo_analytics.compare.runs import compare_runs
from hylo_analytics.errors import SelectionError
from hylo_analytics.stats.sequential import (
    DEFAULT_PRIOR,
    SequentialAlternative,
    SequentialTest,
    sequential_test,
)
from hylo_analytics.store import ParquetStore

__all__ = ["SequentialMonitor", "paired_counts", "sequential_compare"]


def paired_counts(
    store: ParquetStore,
    candidate: str,
    parent: str,
    *,
    metric: str = "success",
    source: str | None = None,
    force: bool = False,
    errors: Errors | None = None,
) -> tuple[int, int, int]:
    """``(n_pairs, candidate_wins, parent_wins)`` of ``candidate`` vs ``parent`` on ``metric``.

    Wins follow the metric's direction (for ``steps`` fewer is better); ties are the rest.
    The pairs are ``Store.compare``'s under the errors policy ``errors`` (default: each run's
    harness convention; :mod:`hylo_analytics._harness`).
    """
    frame = compare_runs(
        store, [candidate], parent, metrics=[metric], source=source, force=force, ci="none",
        errors=errors,
    )  # fmt: skip
    row = frame.filter((pl.col("level") == "overall") & (pl.col("metric") == metric))
    if row.height != 1:
        raise SelectionError(
            f"expected one overall row for metric {metric!r}, got {row.height}: "
            f"does {candidate!r} share scored keys with {parent!r}?"
        )
    n, w, lo = row.select("n_pairs", "candidate_wins", "parent_wins").row(0)
    return int(n), int(w), int(lo)


def sequential_compare(
    store: ParquetStore,
    candidate: str,
    parent: str,
    *,
    metric: str = "success",
    alpha: float = 0.05,
    alternative: SequentialAlternative = "greater",
    prior: tuple[float, float] = DEFAULT_PRIOR,
    source: str | None = None,
    force: bool = False,
    errors: Errors | None = None,
) -> SequentialTest:
    """The e-process at this one look, from the store's current paired counts.

    ``result.rejected[0]`` says whether the evidence has reached ``1/alpha`` now; to know
    whether it did at an earlier look (where you should have stopped), keep the looks with
    :class:`SequentialMonitor`.
    """
    n, w, lo = paired_counts(
        store, candidate, parent, metric=metric, source=source, force=force, errors=errors
    )
    return sequential_test(
        [w], [lo], n_pairs=[n], alpha=alpha, alternative=alternative, prior=prior
    )


@dataclass(frozen=True)
class SequentialMonitor:
    """The looks taken so far at one comparison; :meth:`look` returns a monitor with one more.

    The counts of every look are kept (tuples, one entry per look) and the e-process is
    recomputed from them (:attr:`result`), so a monitor can be rebuilt from a log of counts.
    The settings must not change between looks: a test chosen after peeking is not valid.
    """

    candidate: str
    parent: str
    metric: str = "success"
    alpha: float = 0.05
    alternative: SequentialAlternative = "greater"
    prior: tuple[float, float] = DEFAULT_PRIOR
    errors: Errors | None = None  # the errors policy of every look (None: the harnesses')
    n_pairs: tuple[int, ...] = ()
    wins: tuple[int, ...] = ()
    losses: tuple[int, ...] = ()

    def look(
        self, store: ParquetStore, *, source: str | None = None, force: bool = False
    ) -> SequentialMonitor:
        """A monitor with the store's current counts appended as the next look.

        Raises when the counts shrank since the last look (the runs' earlier pairs changed).
        """
        n, w, lo = paired_counts(
            store, self.candidate, self.parent, metric=self.metric, source=source, force=force,
            errors=self.errors,
        )  # fmt: skip
        nxt = replace(
            self, n_pairs=(*self.n_pairs, n), wins=(*self.wins, w), losses=(*self.losses, lo)
        )
        nxt.result  # noqa: B018 - validates the history now, not at the next read
        return nxt

    @property
    def result(self) -> SequentialTest:
        """The e-process over every look taken so far."""
        return sequential_test(
            self.wins,
            self.losses,
            n_pairs=self.n_pairs,
            alpha=self.alpha,
            alternative=self.alternative,
            prior=self.prior,
        )

    @property
    def stopped_at(self) -> int | None:
        """The first look whose e-value reached ``1/alpha`` (0-based), or None."""
        return self.result.stopped_at if self.wins else None

    @property
    def stopped(self) -> bool:
        """Whether the evidence is in: stop sampling and reject "no difference"."""
        return self.stopped_at is not None

    def to_frame(self) -> pl.DataFrame:
        """One row per look (see :meth:`SequentialTest.to_frame`), with the runs and metric."""
        frame = self.result.to_frame()
        return frame.select(
            pl.lit(self.candidate).alias("candidate"),
            pl.lit(self.parent).alias("parent"),
            pl.lit(self.metric).alias("metric"),
            pl.all(),
        )
