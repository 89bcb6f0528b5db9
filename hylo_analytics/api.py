"""The user-facing store: a facade holding a Parquet store, with the pipeline's verbs.

:class:`~hylo_analytics.store.ParquetStore` is persistence only (tables, commits, the lock,
SQL), so every stage can depend on it without an import cycle. :class:`Store` holds one (as
:attr:`Store.parquet`, for power users and tests) and exposes only the verbs a user reaches for
(``ingest``, ``score``, ``aggregate``, ``scorecard``, ``summarize``, ``compare``, ``flips``,
``rank``, ``pareto``, ``trend``, ``declare_parent``, ``report``, ``sql``, ``register``, ...), each with the
explicit keywords of the stage function it calls; it sits above all of them and nothing in the
package imports it. Committing, publishing, the lock and the raw DuckDB connection are not verbs.
    from hylo_analytics.compare.item_matrix import FlipMatrix, Order
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hylo_analytics._stat_verbs import StatVerbs
from hylo_analytics.errors import SelectionError
from hylo_analytics.store import CompactionReport, ParquetStore

if TYPE_CHECKING:  # each verb imports its stage on first use: opening a store stays cheap
    import polars as pl
    import pyarrow as pa

    from hylo_analytics._harness import Errors
    from hylo_analytics.aggregate._engine import CIMethod
    from hylo_analytics.aggregate.scorecard import MetricsArg, Scorecard
    from hylo_analytics.aggregate.summaries import TaskSummaries
    from hylo_analytics.compare.engine import CiMethod, Family, Reducer
    from hylo_analytics.compare.item_matrix import FlipMatrix, Order
    from hylo_analytics.compare.ranking import Ranking, StrengthCI
    from hylo_analytics.compare.trends import Trend, TrendFamily
    from hylo_analytics.compare.verdicts import Rule
    from hylo_analytics.ingest import IngestReport
    from hylo_analytics.metrics import Direction, MetricRegistry
    from hylo_analytics.report import ComparisonReport
    from hylo_analytics.scoring import ScorersArg, ScoringReport
    from hylo_analytics.scoring.graders import Grader, GradingReport
    from hylo_analytics.stats.bootstrap import Seed
    from hylo_analytics.stats.reducers import Reducer as EpochReducer
    from hylo_analytics.stats.significance import Alternative

__all__ = ["Store", "open_store"]

# The engine's defaults, as plain values: importing them would import scipy on open_store.
# Pinned to the engine's own by tests/test_api.py.
DEFAULT_LEVEL = 0.95  # stats.closed_form.DEFAULT_LEVEL
DEFAULT_RESAMPLES = 10_000  # stats.bootstrap.DEFAULT_RESAMPLES
DEFAULT_PENALTY = 0.01  # stats.bradley_terry.DEFAULT_PENALTY
TASK_COLUMNS = ("benchmark_id", "split", "task_id")  # aggregate.summaries.TASK_COLUMNS
_OMITTED: Any = object()  # a deprecated keyword not given (passed on only when it was)


class Store(StatVerbs):
    """A store you can ingest into, score, aggregate and compare (see the module docstring).

    ``Store(path)`` opens the store at ``path`` as :func:`open_store` does (same keywords).
    :attr:`parquet` is the :class:`~hylo_analytics.store.ParquetStore` it holds: commits, the
    writer lock and the DuckDB connection, for power users and tests; the stage functions
    (``compare_runs``, ``aggregate_scores``, ...) accept a ``Store`` where they take a store.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        threads: int | None = None,
        create: bool = True,
        lock_timeout: float | None = None,
    ) -> None:
        self.parquet = ParquetStore(root, threads=threads, create=create, lock_timeout=lock_timeout)

    @property
    def root(self) -> Path:
        """The store's folder."""
        return self.parquet.root

    @property
    def exists(self) -> bool:
        """Whether the store is on disk (a store opened at an empty folder is made by its
        first write)."""
        return self.parquet.exists

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"

    if not TYPE_CHECKING:  # at run time only: mypy keeps refusing the names Store lacks

        def __getattr__(self, name: str) -> Any:
            # only for names not found: the persistence layer's, which moved behind .parquet
            if not name.startswith("__") and hasattr(ParquetStore, name):
                raise AttributeError(
                    f"Store.{name} is the persistence layer's: use store.parquet.{name} "
                    "(Store holds the user's verbs; see docs/architecture.md)"
                )
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- reading -------------------------------------------------------------------------

    def sql(
        self, query: str, params: Sequence[Any] | Mapping[str, Any] | None = None
    ) -> pl.DataFrame:
        """Run ``query`` against the store's views (and any :meth:`register`-ed frame) and
        return a polars frame; see :meth:`ParquetStore.sql`."""
        return self.parquet.sql(query, params)

    def table(self, name: str) -> pl.LazyFrame:
        """The current rows of a table (``runs``, ``samples``, ...) or any view, lazily."""
        return self.parquet.table(name)

    def runs(self) -> pl.DataFrame:
        """One row per run with its sample counts, in natural run order: agent, version
        (``2.3.0 < 2.294.0``, ``1.2.0-rc1 < 1.2.0``), benchmark and split, then the newest
        ingest first; see :meth:`ParquetStore.runs`."""
        return self.parquet.runs()

    def resolve_run(self, spec: str) -> str:
        """The one run ``spec`` names: a run id, a unique id prefix, or a selector
        (``agent=xvla,benchmark=libero_spatial``); see :meth:`ParquetStore.resolve_run`."""
        return self.parquet.resolve_run(spec)

    def resolve_runs(self, specs: Sequence[str]) -> list[str]:
        """Each of ``specs`` resolved by :meth:`resolve_run`, in order, without repeats."""
        return self.parquet.resolve_runs(specs)

    def select_runs(self, specs: str | Sequence[str], *, exclude: str | None = None) -> list[str]:
        """Every run ``specs`` name, in the order of :meth:`runs`: an id or a unique prefix
        names its run, a selector (``agent=octo-ft``) every run it matches, ``exclude`` left
        out of a selector's matches; see :meth:`ParquetStore.select_runs`."""
        return self.parquet.select_runs(specs, exclude=exclude)

    def register(self, name: str, frame: pl.DataFrame | pl.LazyFrame | pa.Table) -> None:
        """Make ``frame`` queryable as ``name`` in :meth:`sql`, beside the store's views.

        For joining rows of your own (a list of episodes, labels) with the store in SQL:
        ``store.register("episodes", frame)`` then ``store.sql("... join episodes ...")``.
        The frame is never written to the store; registering a name again replaces it, and
        a view's name (``runs``) is refused.
        """
        self.parquet.register(name, frame)

    def unregister(self, name: str) -> None:
        """Forget a frame :meth:`register` made queryable."""
        self.parquet.unregister(name)

    @contextmanager
    def snapshot(self) -> Iterator[Store]:
        """Pin one published state for several reads: a commit landing meanwhile is not seen
        (see :meth:`ParquetStore.snapshot`)."""
        with self.parquet.snapshot():
            yield self

    def data_version(self) -> int:
        """The newest published commit: it changes whenever the store's rows may have."""
        return self.parquet.data_version()

    def compact(self, *, lock_timeout: float | None = None) -> CompactionReport:
        """Merge every batch into one under the writer lock; nothing is dropped (see
        :meth:`ParquetStore.compact`)."""
        with self.parquet.lock_timeout_for(lock_timeout), self.parquet.lock():
            return self.parquet.compact()

    # -- the pipeline --------------------------------------------------------------------

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
        with self.parquet.lock_timeout_for(lock_timeout):
            return ingest_paths(
                self.parquet,
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

        with self.parquet.lock_timeout_for(lock_timeout):
            return score_store(self.parquet, scorers, runs)

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

        with self.parquet.lock_timeout_for(lock_timeout):
            return run_grader(self.parquet, grader, runs, rescore=rescore)

    def aggregate(
        self,
        by: Sequence[str] = ("run_id",),
        metrics: Sequence[str] | None = None,
        statistics: Sequence[str] | None = None,
        ci: CIMethod | Mapping[str, CIMethod] = "auto",
        level: float = DEFAULT_LEVEL,
        *,
        seed: Seed = 0,
        n_resamples: int = DEFAULT_RESAMPLES,
        reducer: str | EpochReducer | None = "mean",
        stratify: str | None = None,
        cluster: str | None = None,
        optimality_threshold: float = 1.0,
        source: str | Sequence[str] | None = None,
        registry: MetricRegistry | None = None,
        runs: Sequence[str] | None = None,
        errors: Errors | None = None,
        reduce: Any = _OMITTED,
    ) -> pl.DataFrame:
        """:func:`~hylo_analytics.aggregate.aggregate_scores` over the resolved scores (the
        keywords are its own; ``reduce=`` is the deprecated name of ``reducer=``)."""
        from hylo_analytics.aggregate import aggregate_scores

        old = {} if reduce is _OMITTED else {"reduce": reduce}
        return aggregate_scores(
            self.parquet, by, metrics, statistics, ci, level, seed=seed, n_resamples=n_resamples,
            reducer=reducer, stratify=stratify, cluster=cluster,
            optimality_threshold=optimality_threshold, source=source, registry=registry,
            runs=runs, errors=errors, **old,
        )  # fmt: skip

    def scorecard(
        self,
        runs: Sequence[str] | str | None = None,
        metrics: MetricsArg = None,
        *,
        registry: MetricRegistry | None = None,
        ci: CIMethod = "auto",
        level: float = DEFAULT_LEVEL,
        seed: Seed = 0,
        n_resamples: int = DEFAULT_RESAMPLES,
        reducer: str | None = "mean",
        source: str | Sequence[str] | None = None,
        reduce: Any = _OMITTED,
    ) -> Scorecard:
        """Each run's metrics as their specs declare (aggregator, statistics, weight, primary)
        and one weighted score per run; see :func:`hylo_analytics.aggregate.scorecard`."""
        from hylo_analytics.aggregate.scorecard import scorecard

        old = {} if reduce is _OMITTED else {"reduce": reduce}
        return scorecard(
            self.parquet, runs, metrics, registry=registry, ci=ci, level=level, seed=seed,
            n_resamples=n_resamples, reducer=reducer, source=source, **old,
        )  # fmt: skip

    def summarize(
        self,
        runs: Sequence[str] | str | None = None,
        *,
        by: Sequence[str] = ("agent_name",),
        metric: str = "success",
        errors: Errors | None = None,
        task: Sequence[str] = TASK_COLUMNS,
        taus: Sequence[float] | None = None,
        level: float = DEFAULT_LEVEL,
        n_resamples: int = DEFAULT_RESAMPLES,
        seed: Seed = 0,
        source: str | Sequence[str] | None = None,
        registry: MetricRegistry | None = None,
        progress: bool | None = None,
    ) -> TaskSummaries:
        """Each ``by`` group's IQM and mean across tasks, performance profile and P(X > Y),
        with stratified bootstrap intervals; see :func:`hylo_analytics.aggregate.task_summaries`.

        ``runs``: ids, prefixes or selectors, a selector naming all the runs it matches
        (``agent=pi05`` is pi05 on every suite); default every run.
        """
        from hylo_analytics.aggregate.summaries import select_runs, task_summaries

        ids = None if runs is None else select_runs(self.parquet, runs)
        return task_summaries(
            self.parquet, by=by, metric=metric, runs=ids, errors=errors, task=task, taus=taus,
            level=level, n_resamples=n_resamples, seed=seed, source=source, registry=registry,
            progress=progress,
        )  # fmt: skip

    def compare(
        self,
        candidates: Sequence[str] | str,
        parent: str,
        *,
        metrics: Sequence[str] | None = ("success",),
        by: Sequence[str] = (),
        source: str | None = None,
        force: bool = False,
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
        cluster: str | None = None,
    ) -> pl.DataFrame:
        """Every candidate run against ``parent``, overall and per ``by`` group, in one join.

        Runs are named by id, unique prefix or selector: ``parent`` names one run, and a
        candidate selector every run it matches but the parent (``compare(["agent=octo-ft"],
        "version=1.0.0")``: the agent's other runs); rows come in the order of :meth:`runs`.
        See :func:`hylo_analytics.compare.compare_runs` for the gate and
        :func:`~hylo_analytics.compare.compare_scores` for the other keywords.
        """
        from hylo_analytics.compare import compare_runs

        return compare_runs(
            self.parquet, candidates, parent, metrics=metrics, by=by, source=source, force=force,
            reducer=reducer, pair_on_epoch=pair_on_epoch, alternative=alternative, mid_p=mid_p,
            directions=directions, ci=ci, n_resamples=n_resamples, level=level, seed=seed,
            rule=rule, family=family, errors=errors, errors_as_failures=errors_as_failures,
            cluster=cluster,
        )  # fmt: skip

    def rank(
        self,
        runs: Sequence[str] | None = None,
        *,
        policy: str = "agent_name",
        strata: Sequence[str] = ("benchmark_id", "split"),
        metric: str = "success",
        source: str | None = None,
        policies: Sequence[str] | None = None,
        directions: Mapping[str, Direction] | None = None,
        rule: Rule | None = None,
        errors: Errors | None = None,
        reducer: Reducer | None = "mean",
        penalty: float = DEFAULT_PENALTY,
        strength_ci: StrengthCI = "sandwich",
        n_resamples: int = DEFAULT_RESAMPLES,
        level: float = DEFAULT_LEVEL,
        seed: int = 0,
        progress: bool | None = None,
        cluster: str | None = None,
    ) -> Ranking:
        """N policies ranked with the uncertainty of the ranking: the pairwise matrix (Holm
        over all pairs), rank sets, tie groups and Bradley-Terry strengths with intervals.

        ``runs``: ids, prefixes or selectors, a selector naming every run it matches
        (``agent=pi05``). See :func:`hylo_analytics.compare.rank_runs` (and
        ``rank_policies`` for the keywords); ``progress``: a bar on a terminal or in Jupyter
        (None: when one is watching).
        """
        from hylo_analytics.compare import rank_runs

        return rank_runs(
            self.parquet, runs, policy=policy, strata=strata, metric=metric, source=source,
            policies=policies, directions=directions, rule=rule, errors=errors, reducer=reducer,
            penalty=penalty, strength_ci=strength_ci, n_resamples=n_resamples, level=level,
            seed=seed, progress=progress, cluster=cluster,
        )  # fmt: skip

    def flips(
        self,
        candidates: Sequence[str] | str,
        parent: str,
        *,
        metrics: Sequence[str] | None = ("success",),
        source: str | None = None,
        force: bool = False,
        reducer: Reducer | None = "mean",
        pair_on_epoch: bool = False,
        directions: Mapping[str, Direction] | None = None,
        errors: Errors | None = None,
    ) -> pl.DataFrame:
        """The keys that flipped between ``parent`` and each candidate, per task, each with
        its links (episode ids, sample id, source files): the rows behind :meth:`compare`'s
        wins and losses. See :func:`hylo_analytics.compare.flip_runs`."""
        from hylo_analytics.compare import flip_runs

        return flip_runs(
            self.parquet, candidates, parent, metrics=metrics, source=source, force=force,
            reducer=reducer, pair_on_epoch=pair_on_epoch, directions=directions, errors=errors,
        )  # fmt: skip

    def flip_matrix(
        self,
        runs: Sequence[str] | str | None = None,
        *,
        metric: str = "success",
        order: Order = "version",
        errors: Errors | None = None,
        source: str | Sequence[str] | None = None,
    ) -> FlipMatrix:
        """Each key's outcome in each of ``runs`` (default every run; a selector names every
        run it matches), in an explicit order of the runs (``"version"``: natural version
        order; ``"ingested"``; ``"given"``): per key its solve rate and whether it always
        fails or broke in the latest run, per run its counts and flips. See
        :func:`hylo_analytics.compare.flip_matrix`."""
        from hylo_analytics.compare import flip_matrix

        return flip_matrix(
            self.parquet, runs, metric=metric, order=order, errors=errors, source=source
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
        reducer: Reducer | None = "mean",
        alternative: Alternative = "greater",
        mid_p: bool = False,
        directions: Mapping[str, Direction] | None = None,
        n_resamples: int = DEFAULT_RESAMPLES,
        level: float = DEFAULT_LEVEL,
        seed: int = 0,
        rule: Rule | None = None,
        errors: Errors | None = None,
        errors_as_failures: bool | None = None,
        cluster: str | None = None,
    ) -> pl.DataFrame:
        """The runs ``candidate`` selects (``agent=xvla``) against those ``parent`` selects,
        paired by suite (benchmark, split) and by key: the suite rows and one pooled row.

        See :func:`hylo_analytics.compare.pooled_compare_runs` (``by``, ``ci``, ``family`` and
        ``pair_on_epoch`` are not keywords here: the suites are the groups).
        """
        from hylo_analytics.compare import pooled_compare_runs

        return pooled_compare_runs(
            self.parquet, candidate, parent, metrics=tuple(metrics), weights=weights,
            source=source, force=force, reducer=reducer, alternative=alternative, mid_p=mid_p,
            directions=directions, n_resamples=n_resamples, level=level, seed=seed, rule=rule,
            errors=errors, errors_as_failures=errors_as_failures, cluster=cluster,
        )  # fmt: skip

    def trend(
        self,
        runs: Sequence[str] | str | None = None,
        *,
        order: str = "agent_version",
        metric: str = "success",
        source: str | None = None,
        force: bool = False,
        family: TrendFamily = "tasks",
        rule: Rule | None = None,
        directions: Mapping[str, Direction] | None = None,
        errors: Errors | None = None,
        reducer: Reducer = "mean",
        level: float = DEFAULT_LEVEL,
        n_resamples: int = DEFAULT_RESAMPLES,
        seed: int = 0,
        progress: bool | None = None,
    ) -> Trend:
        """Runs ordered by ``order`` (``agent_version`` in natural version order, or a run
        field such as ``metadata.training_step``): each task's rate per version, and the
        first version significantly worse than the best earlier one (Holm over each
        version's tasks; ``family="scan"``: over every test), with the keys that flipped.

        See :func:`hylo_analytics.compare.trend_runs` and ``trend_scores`` for the keywords.
        """
        from hylo_analytics.compare import trend_runs

        return trend_runs(
            self.parquet, runs, order=order, metric=metric, source=source, force=force,
            family=family, rule=rule, directions=directions, errors=errors, reducer=reducer,
            level=level, n_resamples=n_resamples, seed=seed, progress=progress,
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
        Runs are named as :meth:`compare` names them (``parent`` one run, a candidate
        selector every run it matches but the parent; an unknown one is an error, nothing
        is written, as when no candidate but the parent is named); a pair declared twice is one. :meth:`compare` needs no declaration.
        Returns the batch's sequence number.
        """
        import pyarrow as pa

        from hylo_analytics.compare.runs import candidate_runs

        ids, parent_id = candidate_runs(self.parquet, candidates, parent)
        cands = [c for c in ids if c != parent_id]
        if not cands:
            raise SelectionError(
                f"no candidate other than the parent {parent_id!r}: nothing declared"
            )
        now = datetime.now(UTC)
        table = pa.table(
            {
                "run_id": pa.array(cands, pa.string()),
                "parent_run_id": pa.array([parent_id] * len(cands), pa.string()),
                "declared_at": pa.array([now] * len(cands), pa.timestamp("us", tz="UTC")),
            }
        )
        with self.parquet.lock_timeout_for(lock_timeout), self.parquet.lock():
            return self.parquet.commit({"comparisons": table})

    def report(
        self,
        candidate: str,
        parent: str,
        *,
        metric: str = "success",
        redact: bool = False,
        rule: Rule | None = None,
        n_resamples: int = DEFAULT_RESAMPLES,
        seed: int = 0,
        force: bool = False,
        directions: Mapping[str, Direction] | None = None,
        family: Family = "comparison",
        errors: Errors | None = None,
    ) -> ComparisonReport:
        """The comparison report of ``candidate`` against ``parent``; see
        :func:`~hylo_analytics.report.build_report` and ``report_frames`` for the keywords."""
        from hylo_analytics.report import build_report

        return build_report(
            self.parquet, candidate, parent, metric=metric, redact=redact, rule=rule,
            n_resamples=n_resamples, seed=seed, force=force, directions=directions,
            family=family, errors=errors,
        )  # fmt: skip


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
