"""The server's reads: every figure comes from a store view or verb, paged in DuckDB.

One :class:`StoreReader` per server. It holds one open store behind a lock (a DuckDB
connection is not for concurrent use) and knows the store's data version, the number of the
newest batch folder: a commit adds a folder, so a changed number means new data. The views
expand their Parquet globs at query time, so new batches are read without reopening.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from hylo_analytics._harness import FAILURE_FORMATS, Errors, check_errors, default_errors
from hylo_analytics._sql import query_sql
from hylo_analytics.api import Store, open_store
from hylo_analytics.errors import InputError, UnknownRunError
from hylo_analytics.serve._jobs import Job
from hylo_analytics.store.runs import natural_order

if TYPE_CHECKING:
    from hylo_analytics.ingest.formats.inspect.transcript import Transcript

__all__ = [
    "EVENT_PAGE",
    "FIELD_CHARS",
    "LONG_FIELDS",
    "MAX_CANDIDATES",
    "MAX_PAGE",
    "MAX_TRANSCRIPTS",
    "NAME_CHARS",
    "PAGE_SIZE",
    "SORTS",
    "TRANSCRIPT_CHARS",
    "DataVersion",
    "Job",
    "Page",
    "StoreReader",
    "UnknownRunError",
    "errors_label",
    "parse_errors",
]

# Bounds that keep a page small and the server's work finite whatever the logs hold
# (docs/security.md lists them).
PAGE_SIZE = 50  # rows per page of runs, of a task's episodes and of a comparison's tasks
EVENT_PAGE = 500  # trace events per page and side of an episode
MAX_PAGE = 100_000  # a larger ?page= is refused (DuckDB's OFFSET overflows on 10**30)
MAX_CANDIDATES = 50  # candidates per comparison (each is a comparison and a forest plot)
NAME_CHARS = 256  # a name or value shown in a page is cut here (links carry it whole)
FIELD_CHARS = 4096  # a trace field (an explanation) is cut here, with a link to the whole
LONG_FIELDS = ("reason", "status", "grader", "name", "explanation")  # cut and linked
TRANSCRIPT_CHARS = 20_000  # a message of a transcript is cut here (the log has the whole)
MAX_TRANSCRIPTS = 10  # epochs of one key whose transcripts an episode page reads
_CUT = NAME_CHARS + 1  # names read from DuckDB one character past the cut: the page marks it
_CACHE = 32  # comparisons kept per data version (a comparison is the costly read)

# sort key -> ORDER BY expression; only these reach SQL ("agent" and "version" sort in
# natural version order, in polars: 2.3.0 before 2.294.0, 1.2.0-rc1 before 1.2.0)
SORTS: dict[str, str] = {
    "ingested": "ingested_at DESC, run_id",
    "run": "run_id",
    "agent": "agent_name, agent_version, run_id",
    "version": "agent_name, agent_version, run_id",
    "benchmark": "benchmark_id, split, run_id",
    "episodes": "n_samples DESC, run_id",
    "success": "success DESC NULLS LAST, run_id",
    "coverage": "coverage ASC NULLS LAST, run_id",
}

# sorts on a mart_runs column run in DuckDB; success and coverage sort the cached success
_STAT_SORTS = {"success": ("success", True), "coverage": ("coverage", False)}

_RUNS_SQL = query_sql("serve_runs")

_SUCCESS_SQL = query_sql("serve_success")

# the policy's columns of _SUCCESS_SQL, as the runs page shows them
_POLICY_COLUMNS: dict[str | None, tuple[str, str, str, str]] = {
    None: ("success_rate", "ci_low", "ci_high", "coverage"),
    "failure": (
        "success_rate_errors_as_failures",
        "errors_as_failures_ci_low",
        "errors_as_failures_ci_high",
        "coverage_as_failures",
    ),
    "exclude": (
        "success_rate_errors_excluded",
        "errors_excluded_ci_low",
        "errors_excluded_ci_high",
        "coverage_excluded",
    ),
}


def parse_errors(raw: str | None) -> Errors | None:
    """A page's ``?errors=``: ``failure``, ``exclude``, or empty / absent for each run's
    harness convention; anything else is a :class:`ValueError` that says why."""
    return check_errors(raw or None, "errors")


def errors_label(errors: str | None, convention: bool = False) -> str:
    """What a page says of the errors policy it applies (``errors``: the one applied, or None
    for each run's harness convention; ``mixed`` when two runs' conventions differ);
    ``convention``: ``errors`` is the runs' harness convention, not asked for."""
    whose = "the runs' harness convention: " if convention else ""
    if errors == "failure":
        return f"errors: failure ({whose}an errored episode of a 0/1 metric counts as a failure)"
    if errors == "exclude":
        return f"errors: exclude ({whose}an errored episode is left out)"
    if errors == "mixed":
        return "errors: mixed (each run under its harness's convention, and they differ)"
    failing = ", ".join(FAILURE_FORMATS)
    return f"errors: each harness's convention ({failing}: failure; Inspect, hylo: exclude)"


_SIDE_SQL = query_sql("serve_side")

_ZERO_ONE_SQL = query_sql("serve_zero_one")

_ERRORED_SQL = query_sql("serve_errored")

_STATUS_SQL = query_sql("serve_status")

_OUTCOME_ORDER = {"candidate won": 0, "parent won": 1, "dropped": 2, "tie": 3}

# long text is cut in DuckDB (a 50 MB explanation never reaches polars or the page); its
# length says whether the page links to the whole
_EVENTS_SQL = query_sql(
    "serve_events",
    long_fields=", ".join(f"left({c}, $cut) AS {c}, length({c}) AS {c}_chars" for c in LONG_FIELDS),
)


_TRANSCRIPT_SQL = query_sql("serve_transcript")


@dataclass(frozen=True)
class DataVersion:
    """The newest batch number and when it was committed (the folder's time)."""

    seq: int
    committed_at: dt.datetime | None
    complete: bool = True  # success per run already read at this version

    @property
    def tag(self) -> str:
        """What pages poll for: changes on a new batch and when its success read is done."""
        return str(self.seq) if self.complete else f"{self.seq}.pending"

    def text(self) -> str:
        when = self.committed_at.strftime("%Y-%m-%d %H:%M:%S UTC") if self.committed_at else "-"
        return f"{when} (batch {self.seq})"


@dataclass(frozen=True)
class Page:
    """One page of a longer table: the rows, the matching total and where the page starts."""

    rows: pl.DataFrame
    total: int
    page: int
    size: int
    counts: tuple[tuple[str, int], ...] = ()  # a task page's outcomes (every page)
    policy: str | None = None  # the errors policy the page's figures follow

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))


class StoreReader:
    """Read-only access to one store for the server's threads.

    Success per run (``mart_aggregate_run``, a pass over every score) is read once per data
    version in a background thread; until it is ready the runs page shows the previous
    version's figures and leaves new runs blank, so the page never waits for it.
    """

    def __init__(self, store: Store | str | os.PathLike[str], *, background: bool = True) -> None:
        self._store: Store = store if isinstance(store, Store) else open_store(store, create=False)
        self.root = Path(self._store.root)
        self._lock = threading.Lock()
        self._memo_lock = threading.Lock()
        self._work_lock = threading.Lock()
        self._worker: Store | None = None  # the background jobs' connection (opened on use)
        self._memo: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._success: tuple[int, pl.DataFrame] | None = None
        self._pending: int | None = None
        self._background = background
        self.success()

    # -- the data version ---------------------------------------------------------------

    def version(self) -> DataVersion:
        """The newest published commit: the manifest, no query (polled every few seconds)."""
        seq = self._store.data_version()
        if seq == 0:
            return DataVersion(0, None)
        published = self.root / "manifest.json"
        if not published.exists():  # a store older than the manifest
            published = self.root / "batches" / f"{seq:020d}"
        when = dt.datetime.fromtimestamp(published.stat().st_mtime, tz=dt.UTC)
        ready = getattr(self, "_success", None)
        return DataVersion(seq, when, ready is not None and ready[0] == seq)

    # -- queries ------------------------------------------------------------------------

    def sql(self, query: str, params: dict[str, Any] | None = None) -> pl.DataFrame:
        with self._lock:
            return self._store.sql(query, params)

    def memo(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        """``make()`` kept per data version (the comparison and its chart are the costly
        reads); ``make`` runs outside the lock, its reads take it."""
        key = (self.version().seq, *key)
        with self._memo_lock:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
        value = make()
        with self._memo_lock:
            self._memo[key] = value
            while len(self._memo) > _CACHE:
                self._memo.popitem(last=False)
        return value

    def background(self, key: tuple[Any, ...], read: Callable[[Store], Any]) -> Job:
        """``read(store)`` run once in a thread of its own and kept per data version as
        :meth:`memo` keeps its values: a page too slow to wait for (a ranking of 2,000
        policies) asks for its job and shows "computing" until it is done; every request
        meanwhile finds the same job. The job reads through a second connection to the
        store (one job at a time), so the other pages keep answering while it runs."""
        key = (self.version().seq, *key)
        with self._memo_lock:
            job = self._memo.get(key)
            if job is None:
                job = self._memo[key] = Job()
                threading.Thread(target=job.run, args=(lambda: self._work(read),),
                                 daemon=True).start()  # fmt: skip
            self._memo.move_to_end(key)
            while len(self._memo) > _CACHE:
                self._memo.popitem(last=False)
        assert isinstance(job, Job)
        return job

    def _work(self, read: Callable[[Store], Any]) -> Any:
        with self._work_lock:
            if self._worker is None:  # the views are a cached catalog: opening is cheap
                self._worker = open_store(self.root, create=False)
            return read(self._worker)

    def cached(self, key: tuple[Any, ...]) -> Any:
        """What :meth:`memo` holds for ``key`` at this version, or None."""
        with self._memo_lock:
            return self._memo.get((self.version().seq, *key))

    def check_runs(self, runs: Sequence[str]) -> None:
        """Raise :class:`UnknownRunError` unless every id in ``runs`` is a stored run."""
        if not runs:
            raise UnknownRunError("no run given")
        found = set(
            self.sql("SELECT run_id FROM runs WHERE list_contains($ids, run_id)", {"ids": runs})[
                "run_id"
            ].to_list()
        )
        missing = [r for r in runs if r not in found]
        if missing:
            raise UnknownRunError(f"no run {', '.join(missing)} in this store")

    def success(self) -> pl.DataFrame:
        """Success per run with its Wilson interval and coverage, from the newest ready read."""
        seq = self.version().seq
        ready = self._success
        if ready is None or not self._background:
            if ready is None or ready[0] != seq:
                self._read_success(seq)
        elif ready[0] != seq and self._pending != seq:
            self._pending = seq
            threading.Thread(target=self._read_success, args=(seq,), daemon=True).start()
        assert self._success is not None
        return self._success[1]

    def _read_success(self, seq: int) -> None:
        frame = self.sql(_SUCCESS_SQL)
        if self._success is None or self._success[0] <= seq:
            self._success = (seq, frame)

    def success_under(self, errors: Errors | None = None) -> pl.DataFrame:
        """Success per run under one errors policy: ``run_id``, ``errors`` (the policy each
        row follows), ``run_n_errors``, ``success``, ``ci_low``, ``ci_high``, ``coverage``.
        ``errors`` None is each run's harness convention (``mart_success_rates``' own rate)."""
        rate, low, high, coverage = _POLICY_COLUMNS[errors]
        frame = self.success()
        policy = pl.col("errors") if errors is None else pl.lit(errors, pl.String)
        return frame.select(
            "run_id",
            policy.alias("errors"),
            pl.col("n_errors").alias("run_n_errors"),
            pl.col(rate).alias("success"),
            pl.col(low).alias("ci_low"),
            pl.col(high).alias("ci_high"),
            pl.col(coverage).alias("coverage"),
        )

    def runs_page(
        self,
        *,
        q: str | None,
        sort: str,
        page: int,
        size: int = PAGE_SIZE,
        errors: Errors | None = None,
    ) -> Page:
        """One page of the runs table, filtered and sorted in DuckDB, with success joined
        under the errors policy ``errors`` (None: each run's harness convention)."""
        offset = max(page - 1, 0) * size
        params: dict[str, Any] = {"q": q or None, "cut": _CUT}
        stat = _STAT_SORTS.get(sort)
        if sort in ("agent", "version"):  # every matching run (the runs table), then a page
            frame = (
                natural_order(self.sql(_RUNS_SQL, params))
                .slice(offset, size)
                .join(self.success_under(errors), on="run_id", how="left", maintain_order="left")
            )
        elif stat is None:
            order = SORTS.get(sort, SORTS["ingested"])
            query = f"{_RUNS_SQL} ORDER BY {order} LIMIT $limit OFFSET $offset"
            frame = self.sql(query, {**params, "limit": size, "offset": offset})
            frame = frame.join(self.success_under(errors), on="run_id", how="left")
        else:  # every matching run's id (no more than the runs table), sorted by the statistic
            column, descending = stat
            frame = (
                self.sql(_RUNS_SQL, params)
                .join(self.success_under(errors), on="run_id", how="left")
                .sort([column, "run_id"], descending=[descending, False], nulls_last=True)
                .slice(offset, size)
            )
        total = int(frame["n_matching"][0]) if frame.height else 0
        return Page(frame.drop("n_matching"), total, page, size, policy=errors)

    def labels(self, runs: Sequence[str]) -> dict[str, str]:
        """What a person calls each run (:func:`hylo_analytics.report.run_labels`)."""
        from hylo_analytics.report import run_labels

        frame = self.sql(
            "SELECT run_id, agent_name, agent_version FROM runs WHERE list_contains($ids, run_id)",
            {"ids": list(runs)},
        )
        return run_labels(frame)

    def compare(
        self,
        candidates: Sequence[str],
        parent: str,
        errors: Errors | None = None,
        metric: str = "success",
    ) -> pl.DataFrame:
        """``store.compare`` per task on ``metric`` (default success) under the errors policy
        ``errors`` (None: each run's harness convention), kept per data version."""

        def make() -> pl.DataFrame:
            with self._lock:
                return self._store.compare(
                    list(candidates), parent, metrics=[metric], by=["task_id"], errors=errors
                )

        key = ("compare", parent, tuple(candidates), errors, metric)
        frame: pl.DataFrame = self.memo(key, make)
        return frame

    def pooled(self, candidate: str, parent: str, errors: Errors | None = None) -> pl.DataFrame:
        """``store.pooled_compare`` on success (selectors of one run per suite), kept per
        data version."""

        def make() -> pl.DataFrame:
            with self._lock:
                return self._store.pooled_compare(candidate, parent, errors=errors)

        frame: pl.DataFrame = self.memo(("pooled", parent, candidate, errors), make)
        return frame

    def compared(
        self,
        candidates: Sequence[str],
        parent: str,
        errors: Errors | None = None,
        metric: str = "success",
    ) -> pl.DataFrame | None:
        """The comparison if it was already computed at this version (else None)."""
        key = ("compare", parent, tuple(candidates), errors, metric)
        frame: pl.DataFrame | None = self.cached(key)
        return frame

    def errored(self, runs: Sequence[str], metric: str = "success") -> dict[str, int]:
        """The errored keys of each run's ``metric`` (``int_key_scores``), kept per version."""

        def make() -> dict[str, int]:
            return {
                r: int(self.sql(_ERRORED_SQL, {"run": r, "metric": metric})["n_errors"][0] or 0)
                for r in runs
            }

        counts: dict[str, int] = self.memo(("errored", tuple(runs), metric), make)
        return counts

    def _fails(self, run: str, errors: Errors | None, metric: str) -> tuple[str, bool]:
        """The policy ``run``'s side follows and whether its errored success abstentions
        count as failures under it: as ``Store.compare`` decides (the policy is ``errors``,
        else the run's harness convention; a failure only where the metric is 0/1 for the
        run: not declared otherwise, every valid value 0 or 1)."""
        from hylo_analytics.metrics import default_registry

        formats = self.sql("SELECT source_format FROM runs WHERE run_id = $run", {"run": run})
        policy = errors or default_errors(formats["source_format"][0] if formats.height else None)
        reg = default_registry()
        if policy != "failure" or (metric in reg and reg.get(metric).kind != "binary"):
            return policy, False
        zero_one = self.memo(
            ("zero_one", run, metric),
            lambda: bool(self.sql(_ZERO_ONE_SQL, {"run": run, "metric": metric})["zero_one"][0]),
        )
        return policy, bool(zero_one)

    def _side(self, run: str, task: str, role: str, fails: bool, metric: str) -> pl.DataFrame:
        params = {"run": run, "task": task, "cut": _CUT, "metric": metric}
        scores = self.sql(_SIDE_SQL, params)
        status = self.sql(_STATUS_SQL, {"run": run, "task": task, "cut": _CUT})
        # under "failure" an errored abstention is a failure (0), as the comparison counts it
        fill = pl.col("value").is_null() & pl.col("errored") & pl.lit(fails)
        value = scores.filter(pl.col("metric") == metric).select(
            "key",
            "seed",
            pl.when(fill).then(0.0).otherwise(pl.col("value")).alias(f"{role}_value"),
            pl.when(fill).then(None).otherwise(pl.col("skip_reason")).alias(f"{role}_skip"),
            pl.col("errored").alias(f"{role}_errored"),
        )
        steps = scores.filter(pl.col("metric") == "steps").select(
            "key", pl.col("value").alias(f"{role}_steps")
        )
        elapsed = scores.filter(pl.col("metric") == "elapsed_sec").select(
            "key", pl.col("value").alias(f"{role}_elapsed_sec")
        )
        return (
            value.join(steps, on="key", how="left")
            .join(elapsed, on="key", how="left")
            .join(status.rename({"status": f"{role}_status"}), on="key", how="left")
        )

    def task_page(
        self,
        candidate: str,
        parent: str,
        task: str,
        *,
        page: int,
        size: int = PAGE_SIZE,
        errors: Errors | None = None,
        metric: str = "success",
    ) -> Page:
        """The paired keys of one task on ``metric`` (default success), discordant pairs
        first (one task: ~a hundred rows), each side's errored abstentions read under
        ``errors`` as the comparison reads them (None: each run's harness convention);
        ``counts`` holds every outcome's count."""
        c_policy, c_fails = self._fails(candidate, errors, metric)
        p_policy, p_fails = self._fails(parent, errors, metric)
        c = self._side(candidate, task, "candidate", c_fails, metric)
        p = self._side(parent, task, "parent", p_fails, metric)
        c_val, p_val = pl.col("candidate_value"), pl.col("parent_value")
        paired = (
            c.join(p, on="key", how="full", coalesce=True)
            .with_columns(pl.coalesce("seed", "seed_right").alias("seed"))
            .drop("seed_right")
            .with_columns(
                pl.when(c_val.is_null() | p_val.is_null())
                .then(pl.lit("dropped"))
                .when(c_val > p_val)
                .then(pl.lit("candidate won"))
                .when(c_val < p_val)
                .then(pl.lit("parent won"))
                .otherwise(pl.lit("tie"))
                .alias("outcome")
            )
            .sort(
                [pl.col("outcome").replace_strict(_OUTCOME_ORDER), "seed", "key"],
            )
        )
        offset = max(page - 1, 0) * size
        found = dict(paired["outcome"].value_counts().iter_rows())
        counts = (
            *((o, int(found.get(o, 0))) for o in _OUTCOME_ORDER),
            *((f"{r} errored", int(paired[f"{r}_errored"].fill_null(False).sum()))
              for r in ("candidate", "parent")),
        )  # fmt: skip
        policy = errors or (c_policy if c_policy == p_policy else "mixed")
        return Page(paired.slice(offset, size), paired.height, page, size, counts, policy)

    def episode(self, run: str, key: str, *, page: int = 1, size: int = EVENT_PAGE) -> Page:
        """One page of the trace events of ``run``'s episode at ``key`` (every epoch, in
        order), each of :data:`LONG_FIELDS` cut at :data:`FIELD_CHARS`."""
        params = {"run": run, "key": key, "cut": FIELD_CHARS, "limit": size}
        frame = self.sql(_EVENTS_SQL, {**params, "offset": max(page - 1, 0) * size})
        if frame.height:
            total = int(frame["n_matching"][0])
        else:  # no rows on this page: count the whole (0, or a page past the end)
            count = "SELECT count(*) AS n FROM events WHERE run_id = $run AND key = $key"
            total = int(self.sql(count, {"run": run, "key": key})["n"][0])
        return Page(frame.drop("n_matching"), total, page, size)

    def field(self, run: str, key: str, episode: str, idx: int, name: str) -> str | None:
        """The whole text of one trace field (the link from a cut one), or None."""
        if name not in LONG_FIELDS:
            raise InputError(f"no field {name!r}; give one of {', '.join(LONG_FIELDS)}")
        frame = self.sql(
            f"SELECT {name} AS v FROM events WHERE run_id = $run AND key = $key "
            "AND episode_id = $episode AND idx = $idx LIMIT 1",
            {"run": run, "key": key, "episode": episode, "idx": idx},
        )
        value: str | None = frame["v"][0] if frame.height else None
        return value

    def key_samples(self, run: str, key: str) -> pl.DataFrame:
        """The stored sample rows of ``run``'s episode at ``key`` (every epoch): what the log
        said of the episode (status, trace status, the fields kept in ``extra``), each text
        cut at :data:`FIELD_CHARS` in DuckDB."""
        return self.sql(
            query_sql("serve_key_samples"),
            {"run": run, "key": key, "cut": FIELD_CHARS, "limit": EVENT_PAGE},
        )

    def transcripts(self, run: str, key: str) -> list[Transcript | str] | None:
        """The Inspect transcript of each epoch of ``run``'s episode at ``key`` (at most
        :data:`MAX_TRANSCRIPTS`), read from the run's source log on demand (ingest keeps no
        messages) and kept per data version; an epoch whose log cannot be read is the
        message that says why. None: the run is not an Inspect log."""
        from hylo_analytics.ingest.formats.inspect.transcript import FORMATS

        rows = self.sql(_TRANSCRIPT_SQL, {"run": run, "key": key, "limit": MAX_TRANSCRIPTS})
        if rows.is_empty() or rows["source_format"][0] not in FORMATS:
            return None

        def make() -> list[Transcript | str]:
            return [_transcript(path, sid, epoch) for _f, path, epoch, sid in rows.iter_rows()]

        found: list[Transcript | str] = self.memo(("transcripts", run, key), make)
        return found

    def key_scores(self, runs: Sequence[str], key: str) -> pl.DataFrame:
        """Every metric of ``key`` for each of ``runs`` (``int_key_scores``, one run a query)."""
        frames = [
            self.sql(
                query_sql("serve_key_scores"),
                {"run": run, "key": key, "cut": _CUT, "limit": EVENT_PAGE},
            )
            for run in runs
        ]
        return pl.concat(frames)


def _transcript(path: str | None, sample_id: str, epoch: int) -> Transcript | str:
    """One epoch's transcript, or why it cannot be read."""
    from hylo_analytics.ingest.formats.inspect.transcript import (
        TranscriptUnavailable,
        read_transcript,
    )

    if not path:
        return "no source file is recorded for this run: its transcript cannot be read"
    try:
        return read_transcript(path, sample_id, int(epoch))
    except TranscriptUnavailable as exc:
        return str(exc)
