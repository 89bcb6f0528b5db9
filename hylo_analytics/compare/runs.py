"""``Store.compare``: the engine over the store's resolved scores, behind a comparability gate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from hylo_analytics._text import did_you_mean
from hylo_analytics.compare._counts import PairedRows
from hylo_analytics.compare.engine import compare_scores
from hylo_analytics.errors import ComparabilityError, InputError, RunSelectionError, SelectionError
from hylo_analytics.resolution import (
    preferred_query,
    registered,
    run_filter,
    success_metric,
)
from hylo_analytics.store import ParquetStore, pinned

__all__ = [
    "ComparabilityError",
    "PairedInputs",
    "candidate_runs",
    "compare_runs",
    "in_run_order",
    "paired_inputs",
]

_GATE_FIELDS = ("benchmark_digest", "split")


@pinned
def compare_runs(
    store: ParquetStore,
    candidates: Sequence[str] | str,
    parent: str,
    *,
    metrics: Sequence[str] | None = ("success",),
    by: Sequence[str] = (),
    source: str | None = None,
    force: bool = False,
    pending: pa.Table | None = None,
    **options: object,
) -> pl.DataFrame:
    """:func:`~hylo_analytics.compare.compare_scores` on the store's scores, behind the gate.

    Scores are the resolved ones (:mod:`hylo_analytics.resolution`: one per episode, by the
    precedence rule), or those of one ``source`` when given; epochs are paired as the engine's
    ``reducer`` / ``pair_on_epoch`` options say (default: reduced by their mean per key).
    ``success`` of runs that have none is their success metric (``int_success_metric``: an
    inspect-robots pair compares ``success_at_end``), the one the success marts report.

    The gate refuses runs whose benchmark digest, split or scorer version (per metric, over
    the values that are compared) differ from the parent's, naming what differs;
    ``force=True`` compares them anyway and marks their rows ``forced`` with the difference
    in ``gate_note``. ``pending``: score rows not yet committed (an analysis dry run), read
    as if they were.

    Runs are named by id, unique id prefix or selector (:func:`candidate_runs`): ``parent``
    names one run, and a candidate selector every run it matches but the parent
    (``agent=octo-ft`` against ``version=1.0.0``: the agent's other runs). Rows come by
    candidate in natural run order (that of ``Store.runs``), then metric, level and ``by``.
    """
    cands, parent = candidate_runs(store, candidates, parent)
    with registered(store, pending) as rel:
        got = paired_inputs(store, cands, parent, rel, metrics, by, source, force, options)
        out = compare_scores(
            got.scores,
            declared=got.declared,
            candidates=cands,
            parent=parent,
            metrics=got.metrics,
            by=by,
            forced=got.forced,
            **options,  # type: ignore[arg-type]
        )
    return in_run_order(out, cands)


def candidate_runs(
    store: ParquetStore, candidates: Sequence[str] | str, parent: str
) -> tuple[list[str], str]:
    """The runs a comparison names: the one ``parent`` names (several are refused, listing
    them) and every run ``candidates`` name (:meth:`ParquetStore.select_runs`: a selector
    such as ``agent=octo-ft`` names each run it matches but the parent), in run order."""
    parent = store.resolve_run(parent)
    return store.select_runs(candidates, exclude=parent), parent


def in_run_order(frame: pl.DataFrame, cands: list[str]) -> pl.DataFrame:
    """``frame``'s rows by candidate in the order of ``cands`` (natural run order: 2.3.0
    before 2.294.0), each candidate's rows in the order they had."""
    rank = pl.col("candidate").replace_strict(
        {c: i for i, c in enumerate(cands)}, default=None, return_dtype=pl.UInt32
    )
    return frame.sort(rank, maintain_order=True, nulls_last=True)


@dataclass(frozen=True)
class PairedInputs:
    """What the engine pairs for a comparison of stored runs (:func:`paired_inputs`)."""

    scores: pl.DataFrame | PairedRows
    declared: pl.DataFrame
    metrics: Sequence[str] | None
    forced: dict[str, str]


def paired_inputs(
    store: ParquetStore,
    cands: list[str],
    parent: str,
    pending: str | None,
    metrics: Sequence[str] | None,
    by: Sequence[str],
    source: str | None,
    force: bool,
    options: Mapping[str, object],
) -> PairedInputs:
    """:func:`compare_runs` once the runs are resolved and pending rows registered: the
    gate, then the scores for the engine where they lie (or as a frame, when epochs must be
    reduced or errors counted as failures first: a run's errors policy is ``errors``, else
    its harness's convention). :func:`~hylo_analytics.compare.flips.flip_runs` pairs the
    same inputs."""
    runs = [*cands, parent]
    read = _Reader(store, runs, source, pending, options, by)
    have = read.columns(metrics)
    missing = [b for b in by if b not in have]
    if missing:
        raise InputError(
            f"compare: the scores have no column(s) {missing}{did_you_mean(missing, have)} "
            f"(by= takes a score column: {', '.join(have)})"
        )
    cluster = options.get("cluster")
    if cluster is not None and (cluster not in have or cluster == "source"):
        raise InputError(
            f"compare: the scores have no column {cluster!r}{did_you_mean([str(cluster)], have)}"
            f" (cluster= takes a score column, e.g. task_id: {', '.join(have)})"
        )
    kinds = read.kinds(metrics)
    meta = store.sql(
        "SELECT run_id, benchmark_digest, split, run_errors(errors_policy, source_format) AS _policy "
        "FROM stg_runs WHERE list_contains($runs, run_id)",
        {"runs": runs},
    )
    missing = sorted(set(runs) - set(meta["run_id"]))
    if missing:
        raise RunSelectionError(f"no run(s) {missing} in the store (see 'hylo-analytics runs')")
    if kinds.filter(pl.col("run_id") == parent).is_empty() and metrics and "success" in metrics:
        # runs whose success has another name (inspect-robots: success_at_end), by the one rule
        named = success_metric(store, runs)
        if named is not None and named != "success":
            metrics = [named if m == "success" else m for m in metrics]
            read = _Reader(store, runs, source, None, options, by)
            kinds = read.kinds(metrics)
    if kinds.filter(pl.col("run_id") == parent).is_empty():
        if source is not None:
            sources = store.sql(
                "select distinct source from stg_scores where run_id = $p order by 1",
                {"p": parent},
            )["source"].to_list()
            if source not in sources:
                raise SelectionError(
                    f"parent {parent!r} has no scores of source {source!r}"
                    f"{did_you_mean([source], sources)}; its sources are "
                    f"{', '.join(sources) or 'none'}"
                )
        held = store.sql(
            "select distinct metric from int_scores_preferred where run_id = $p order by 1",
            {"p": parent},
        )["metric"].to_list()
        raise SelectionError(
            f"parent {parent!r} has no scores"
            + (f" of source {source!r}" if source else "")
            + f" for {metrics}"
            + (did_you_mean(metrics or [], held) if held else "")
            + (f"; it has scores of {', '.join(held)}" if held else "")
        )
    _refuse_unkeyed(read, metrics)
    problems = _gate(meta, kinds.filter(pl.col("valid")), cands, parent)
    if problems and not force:
        detail = "; ".join(f"{c}: {why}" for c, why in problems.items())
        raise ComparabilityError(
            f"refusing to compare with parent {parent!r}: {detail}. "
            "Pass force=True (--force) to compare anyway; the rows are then marked forced."
        )
    epochs = kinds["n_key_epochs"].max() or 1
    errors, as_failures = options.get("errors"), options.get("errors_as_failures")
    failing = errors == "failure" or (
        errors is None and (as_failures or (as_failures is None and "failure" in meta["_policy"]))
    )
    in_sql = not failing and (bool(options.get("pair_on_epoch")) or epochs == 1)
    scores = read.rows(metrics) if in_sql else None
    policy = dict(zip(meta["run_id"].to_list(), meta["_policy"].to_list(), strict=True))
    return PairedInputs(
        scores if scores is not None else read.scores(metrics, policy),
        read.declared(metrics),
        metrics,
        problems,
    )


class _Reader:
    """The resolved scores of ``runs``, read as the engine and the gate need them.

    The engine reads the few columns it uses (not the explanations and metadata of every
    episode); the gate's scorer versions and the declared directions are group-bys in SQL
    over the same rows.
    """

    def __init__(
        self,
        store: ParquetStore,
        runs: list[str],
        source: str | None,
        pending: str | None,
        options: Mapping[str, object],
        by: Sequence[str],
    ) -> None:
        self.store, self.runs, self.source, self.pending = store, runs, source, pending
        self.filter = run_filter(store, runs)  # None: the runs are the whole store
        self.options, self.by = options, list(by)
        cluster = options.get("cluster")
        self.cluster = None if cluster is None else str(cluster)
        self._have: list[str] | None = None

    def _query(self, metrics: Sequence[str] | None, select: str) -> str:
        query = preferred_query(
            runs=self.filter is not None,
            metrics=metrics is not None,
            sources=self.source is not None,
            pending=self.pending,
        )
        return select.format(scores=f"({query})")

    def _params(self, metrics: Sequence[str] | None) -> dict[str, object]:
        params: dict[str, object] = {} if self.filter is None else {"runs": self.filter}
        if metrics is not None:
            params["metrics"] = list(metrics)
        if self.source is not None:
            params["sources"] = [self.source]
        return params

    def _sql(self, metrics: Sequence[str] | None, select: str) -> pl.DataFrame:
        return self.store.sql(self._query(metrics, select), self._params(metrics))

    def columns(self, metrics: Sequence[str] | None) -> list[str]:
        if self._have is None:
            self._have = self._sql(metrics, "select * from {scores} limit 0").columns
        return self._have

    def rows(self, metrics: Sequence[str] | None) -> PairedRows | None:
        """The scores as SQL for the engine to pair where they lie (None: a ``by`` column
        the scores lack, which the frame path names)."""
        have = self.columns(metrics)
        if any(b not in have or b == "source" for b in self.by):
            return None
        pk = ("key", "epoch") if self.options.get("pair_on_epoch") else ("key",)
        kept = [self.cluster] if self.cluster else []
        cols = list(
            dict.fromkeys(
                ["run_id", "key", "epoch", "metric", "value", "skip_reason", *self.by, *kept]
            )
        )
        err = (
            ', (value is null and coalesce(errored, false)) as "_err"' if "errored" in have else ""
        )
        relation = self._query(metrics, f"(select {_listed(cols)}{err} from {{scores}})")
        store = self.store

        def run(query: str, params: Mapping[str, object]) -> pl.DataFrame:
            return store.sql(query, {k: v for k, v in params.items() if f"${k}" in query})

        # the resolved rows are stored by run, metric, key and epoch: the order a frame read
        # of them has, and so the order a bootstrap reads their differences in
        return PairedRows(
            run, relation, pk, tuple(self.by), True, ("key", "epoch"), self._params(metrics),
            has_errored=bool(err), cluster=self.cluster,
        )  # fmt: skip

    def scores(self, metrics: Sequence[str] | None, policy: Mapping[str, str]) -> pl.DataFrame:
        """The engine's columns as a frame: ids, value, skip reason, errored, each run's
        errors convention (``_policy``, from ``policy``) and epoch and ``by`` if used, for
        what the engine pairs only from a frame (epochs to reduce, errors counted as
        failures)."""
        have = self.columns(metrics)
        wanted = ["run_id", "key", "metric", "value", "skip_reason", "errored"]
        if self.options.get("pair_on_epoch"):
            wanted.append("epoch")
        kept = [self.cluster] if self.cluster else []
        cols = [c for c in dict.fromkeys([*wanted, *self.by, *kept])
                if c in have and c != "source"]  # fmt: skip
        frame = self._sql(metrics, f"select {_listed(cols)} from {{scores}}")
        return frame.with_columns(
            _policy=pl.col("run_id").replace_strict(dict(policy), default="exclude")
        )

    def kinds(self, metrics: Sequence[str] | None) -> pl.DataFrame:
        """Per (run, metric, source, scorer version, valid): the rows and the most epochs a
        key has. One scan answers the gate (the versions of the valid values), whether the
        parent has scores, and whether epochs must be reduced before pairing."""
        return self._sql(
            metrics,
            "select run_id, metric, source, scorer_version, valid, count(*) as n, "
            "max(n_key_epochs) as n_key_epochs from {scores} group by all",
        )

    def unkeyed(self, metrics: Sequence[str] | None) -> pl.DataFrame:
        """Per (run, metric) whose every row is a figure without per-sample keys
        (:mod:`hylo_analytics.ingest._counted`): how it was stored and its count."""
        return self._sql(
            metrics,
            "select run_id, metric, any_value(json_extract_string(metadata, '$.hylo_unkeyed')) "
            "as kind, max(cast(json_extract(metadata, '$.n') as bigint)) as n from {scores} "
            "group by all having bool_and(coalesce(metadata like '%\"hylo_unkeyed\"%', false)) "
            "order by run_id, metric",
        )

    def declared(self, metrics: Sequence[str] | None) -> pl.DataFrame:
        """Per metric, the directions its rows' metadata declare (the engine keeps one)."""
        return self._sql(
            metrics,
            "select distinct metric, json_extract_string(metadata, '$.direction') as direction "
            # only a document naming a direction can declare one (a cheap test before parsing)
            """from {scores} where metadata like '%"direction"%' and json_valid(metadata)""",
        )


def _refuse_unkeyed(read: _Reader, metrics: Sequence[str] | None) -> None:
    """No pairing of a metric a run holds only as a published figure (a rate and its count,
    or a score alone): which samples it counted is not known, so there is nothing to pair,
    whatever ``force`` says."""
    found = read.unkeyed(metrics)
    if found.is_empty():
        return
    what = "; ".join(
        f"{run!r} holds {metric!r} only as "
        + (f"a rate of {n} samples" if kind == "counted" else "a published figure")
        for run, metric, kind, n in found.iter_rows()
    )
    raise ComparabilityError(
        f"cannot pair: {what}, without per-sample keys (an aggregate without its samples: "
        "an Every Eval Ever file without instances, a lm-eval task run without "
        "--log_samples). A paired comparison needs the samples both runs were scored on: "
        "ingest them, or compare the rates unpaired with aggregate (or rank)."
    )


def _listed(columns: Sequence[str]) -> str:
    return ", ".join('"' + c.replace('"', '""') + '"' for c in columns)


def _gate(
    meta: pl.DataFrame, versions: pl.DataFrame, cands: list[str], parent: str
) -> dict[str, str]:
    """Candidate -> what differs from the parent (benchmark digest, split, scorer versions).

    ``versions``: the (run_id, metric, source, scorer_version) of the valid values.

    Scorer versions are compared per metric and source, over the valid values: the same
    scorer at two versions measures two things, while an abstention has no scorer to
    disagree and a source only one run has (a grader that judged only some episodes) is no
    version conflict.
    """
    par = meta.filter(pl.col("run_id") == parent)
    cand = meta.filter(pl.col("run_id").is_in(cands))
    found = []
    for f in _GATE_FIELDS:  # a handful of fields, each checked for all candidates at once
        pv = par[f].item()
        bad = cand.filter(pl.col(f).ne_missing(pl.lit(pv, pl.String)))
        found.append(  # the values are log text: arguments of the format, never part of it
            bad.select(
                "run_id",
                why=pl.format(
                    "{} '{}' != parent's {}",
                    pl.lit(f),
                    pl.col(f).fill_null("None"),
                    pl.lit(repr(pv)),
                ),
            )
        )
    versions = versions.group_by("run_id", "metric", "source").agg(
        v=pl.col("scorer_version").fill_null("").unique().sort().str.join(",")
    )
    pv = versions.filter(pl.col("run_id") == parent).select("metric", "source", pv="v")
    vd = versions.filter(pl.col("run_id") != parent).join(pv, on=["metric", "source"])
    found.append(
        vd.filter(pl.col("v") != pl.col("pv")).select(
            "run_id",
            why=pl.format(
                "scorer_version of '{}' ({}) '{}' != parent's '{}'", "metric", "source", "v", "pv"
            ),
        )
    )
    problems = pl.concat(found).sort("run_id", "why").group_by("run_id", maintain_order=True)
    rows = problems.agg(pl.col("why").str.join(", ")).rows()
    return {str(r): str(w) for r, w in rows}
