"""The user-facing store: the Parquet store plus the pipeline's verbs.

:class:`~hylo_analytics.store.ParquetStore` is persistence only (tables, commits, the lock,
SQL), so every stage can depend on it without an import cycle. :class:`Store` adds the verbs a
user reaches for (``ingest``, ``score``, ``aggregate``, ``scorecard``, ``summarize``, ``compare``,
``flips``, ``rank``, ``declare_parent``, ``report``) as thin calls into the stages; it sits above all of them and nothing in the
package imports it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hylo_analytics.store import ParquetStore

if TYPE_CHECKING:  # each verb imports its stage on first use: opening a store stays cheap
    import polars as pl

    from hylo_analytics._harness import Errors
    from hylo_analytics.aggregate.scorecard import MetricsArg, Scorecard
    from hylo_analytics.aggregate.summaries import TaskSummaries
    from hylo_analytics.compare.ranking import Ranking
    from hylo_analytics.ingest import IngestReport
    from hylo_analytics.report import ComparisonReport
    from hylo_analytics.scoring import ScorersArg, ScoringReport
    from hylo_analytics.scoring.graders import Grader, GradingReport

__all__ = ["Store", "open_store"]


class Store(ParquetStore):
    """A store you can ingest into, score, aggregate and compare (see the module docstring)."""

    def ingest(
        self,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        strict: bool = False,
        progress: bool = True,
        replace: bool = False,
        lock_timeout: float | None = None,
        workers: int = 1,
        shard: tuple[int, int] | None = None,
    ) -> IngestReport:
        """Read EvalLogs (and their traces) from files and folders into the store.

        A changed file replaces the run it holds. A file whose ``run_id`` is stored from
        another file (with other content) is quarantined, naming both paths, unless
        ``replace=True``: then it replaces that run. ``lock_timeout``: seconds to wait for
        another writer (default: the store's). ``workers``: worker processes sharing a claim
        table (the lock is taken only to publish); ``shard=(i, n)``: only the i-th of n
        shards of the files, for one machine of n sharing the filesystem. Either resumes a
        killed run of the same call; see ``docs/scale-out.md``.
        """
        from hylo_analytics.ingest import ingest_paths

        if isinstance(paths, str | os.PathLike):
            paths = [paths]
        with self.lock_timeout_for(lock_timeout):
            return ingest_paths(
                self,
                [Path(p) for p in paths],
                strict=strict,
                progress=progress,
                replace=replace,
                workers=workers,
                shard=shard,
            )

    def score(
        self,
        scorers: ScorersArg = None,
        runs: Sequence[str] | None = None,
        *,
        lock_timeout: float | None = None,
    ) -> ScoringReport:
        """Re-score ``runs`` from stored events; see :func:`hylo_analytics.scoring.score_store`.

        ``lock_timeout``: seconds to wait for another writer (default: the store's).
        """
        from hylo_analytics.scoring import score_store

        with self.lock_timeout_for(lock_timeout):
            return score_store(self, scorers, runs)

    def grade(
        self,
        grader: Grader,
        runs: Sequence[str] | None = None,
        *,
        rescore: bool = True,
        lock_timeout: float | None = None,
    ) -> GradingReport:
        """Run ``grader`` over the stored episodes and commit its grade events; see
        :func:`hylo_analytics.scoring.graders.run_grader`."""
        from hylo_analytics.scoring.graders import run_grader

        with self.lock_timeout_for(lock_timeout):
            return run_grader(self, grader, runs, rescore=rescore)

    def aggregate(self, by: Sequence[str] = ("run_id",), **options: Any) -> pl.DataFrame:
        """:func:`~hylo_analytics.aggregate.aggregate_scores` over the resolved scores."""
        from hylo_analytics.aggregate import aggregate_scores

        return aggregate_scores(self, by, **options)

    def scorecard(
        self, runs: Sequence[str] | str | None = None, metrics: MetricsArg = None, **options: Any
    ) -> Scorecard:
        """Each run's metrics as their specs declare (aggregator, statistics, weight, primary)
        and one weighted score per run; see :func:`hylo_analytics.aggregate.scorecard`."""
        from hylo_analytics.aggregate.scorecard import scorecard

        return scorecard(self, runs, metrics, **options)

    def summarize(
        self,
        runs: Sequence[str] | str | None = None,
        *,
        by: Sequence[str] = ("agent_name",),
        metric: str = "success",
        errors: Errors | None = None,
        **options: Any,
    ) -> TaskSummaries:
        """Each ``by`` group's IQM and mean across tasks, performance profile and P(X > Y),
        with stratified bootstrap intervals; see :func:`hylo_analytics.aggregate.task_summaries`.

        ``runs``: ids, prefixes or selectors, a selector naming all the runs it matches
        (``agent=pi05`` is pi05 on every suite); default every run.
        """
        from hylo_analytics.aggregate.summaries import select_runs, task_summaries

        ids = None if runs is None else select_runs(self, runs)
        return task_summaries(self, by=by, metric=metric, runs=ids, errors=errors, **options)

    def compare(
        self,
        candidates: Sequence[str] | str,
        parent: str,
        *,
        metrics: Sequence[str] | None = ("success",),
        by: Sequence[str] = (),
        source: str | None = None,
        force: bool = False,
        **options: Any,
    ) -> pl.DataFrame:
        """Every candidate run against ``parent``, overall and per ``by`` group, in one join.

        See :func:`hylo_analytics.compare.compare_runs` for the options and the gate.
        """
        from hylo_analytics.compare import compare_runs

        return compare_runs(
            self, candidates, parent, metrics=metrics, by=by, source=source, force=force, **options
        )

    def rank(
        self,
        runs: Sequence[str] | None = None,
        *,
        policy: str = "agent_name",
        strata: Sequence[str] = ("benchmark_id", "split"),
        metric: str = "success",
        **options: Any,
    ) -> Ranking:
        """N policies ranked with the uncertainty of the ranking: the pairwise matrix (Holm
        over all pairs), rank sets and Bradley-Terry strengths with bootstrap intervals.

        See :func:`hylo_analytics.compare.rank_runs` (and ``rank_policies`` for the options).
        """
        from hylo_analytics.compare import rank_runs

        return rank_runs(self, runs, policy=policy, strata=strata, metric=metric, **options)

    def flips(
        self,
        candidates: Sequence[str] | str,
        parent: str,
        *,
        metrics: Sequence[str] | None = ("success",),
        source: str | None = None,
        force: bool = False,
        **options: Any,
    ) -> pl.DataFrame:
        """The keys that flipped between ``parent`` and each candidate, per task, each with
        its links (episode ids, sample id, source files): the rows behind :meth:`compare`'s
        wins and losses. See :func:`hylo_analytics.compare.flip_runs`."""
        from hylo_analytics.compare import flip_runs

        return flip_runs(
            self, candidates, parent, metrics=metrics, source=source, force=force, **options
        )

    def pooled_compare(
        self,
        candidate: str,
        parent: str,
        *,
        metrics: Sequence[str] = ("success",),
        weights: Literal["suite", "episodes"] = "suite",
        source: str | None = None,
        force: bool = False,
        **options: Any,
    ) -> pl.DataFrame:
        """The runs ``candidate`` selects (``agent=xvla``) against those ``parent`` selects,
        paired by suite (benchmark, split) and by key: the suite rows and one pooled row.

        See :func:`hylo_analytics.compare.pooled_compare_runs`.
        """
        from hylo_analytics.compare import pooled_compare_runs

        return pooled_compare_runs(
            self, candidate, parent, metrics=tuple(metrics), weights=weights, source=source,
            force=force, **options,
        )  # fmt: skip

    def declare_parent(
        self,
        candidates: Sequence[str] | str,
        parent: str,
        *,
        lock_timeout: float | None = None,
    ) -> int:
        """Declare ``parent`` the parent of each candidate, so ``mart_compare`` holds the pair.

        The SQL pairing views hold only declared pairs (this, and ``parent_run_id`` in an
        EvalLog), never every pair of runs: 1,000 runs of one benchmark would be ~1e6 pairs.
        Runs are named as :meth:`resolve_run` names them (an unknown one is an error, nothing
        is written, as when no candidate but the parent is named); a pair declared twice is one. :meth:`compare` needs no declaration.
        Returns the batch's sequence number.
        """
        import pyarrow as pa

        if isinstance(candidates, str):
            candidates = [candidates]
        ids = self.resolve_runs([parent, *candidates])
        parent_id, cands = ids[0], [c for c in ids[1:] if c != ids[0]]
        if not cands:
            raise ValueError(f"no candidate other than the parent {parent_id!r}: nothing declared")
        now = datetime.now(UTC)
        table = pa.table(
            {
                "run_id": pa.array(cands, pa.string()),
                "parent_run_id": pa.array([parent_id] * len(cands), pa.string()),
                "declared_at": pa.array([now] * len(cands), pa.timestamp("us", tz="UTC")),
            }
        )
        with self.lock_timeout_for(lock_timeout), self.lock():
            return self.commit({"comparisons": table})

    def report(self, candidate: str, parent: str, **options: Any) -> ComparisonReport:
        """The comparison report of ``candidate`` against ``parent`` (see ``build_report``)."""
        from hylo_analytics.report import build_report

        return build_report(self, candidate, parent, **options)


def open_store(
    path: str | os.PathLike[str],
    *,
    threads: int | None = None,
    create: bool = True,
    lock_timeout: float | None = None,
) -> Store:
    """Open the store at ``path``; reading never creates one.

    ``threads``: DuckDB's thread count (default: ``HYLO_ANALYTICS_THREADS``, else every core).
    A folder that holds no store opens as an empty store and nothing is written to disk: its
    folder, batches and manifest are made by the first write (``ingest``, ``score``, a
    commit), so a typo in a path leaves nothing behind. With ``create=False`` a folder that
    holds no store raises :class:`~hylo_analytics.store.StoreNotFoundError` instead. Opening
    writes nothing, so a read-only store can be queried. ``lock_timeout``:
    seconds a write waits for another writer, then
    :class:`~hylo_analytics.store.StoreLockedError` (default ``HYLO_ANALYTICS_LOCK_TIMEOUT``,
    else no limit).
    """
    return Store(path, threads=threads, create=create, lock_timeout=lock_timeout)
