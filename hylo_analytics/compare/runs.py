"""``Store.compare``: the engine over the store's resolved scores, behind a comparability gate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl
import pyarrow as pa

from hylo_analytics.compare.engine import compare_scores
from hylo_analytics.resolution import preferred_query, registered, success_metric
from hylo_analytics.store import ParquetStore, pinned

__all__ = ["ComparabilityError", "compare_runs"]

_GATE_FIELDS = ("benchmark_digest", "split")


class ComparabilityError(ValueError):
    """Runs that measure different things were asked to be compared (see ``force``)."""


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
    """
    cands = [candidates] if isinstance(candidates, str) else list(candidates)
    # a run id, a unique id prefix or a selector such as "agent=xvla,benchmark=libero_spatial"
    cands = store.resolve_runs(cands)  # one read of the runs table for every candidate
    parent = store.resolve_run(parent)
    runs = [*cands, parent]
    read = _Reader(store, runs, source, pending, options, by)
    scores = read.scores(metrics)
    meta = store.sql(
        "SELECT run_id, benchmark_digest, split FROM stg_runs WHERE list_contains($runs, run_id)",
        {"runs": runs},
    )
    missing = sorted(set(runs) - set(meta["run_id"]))
    if missing:
        raise ValueError(f"no run(s) {missing} in the store (see 'hylo-analytics runs')")
    if scores.filter(pl.col("run_id") == parent).is_empty() and metrics and "success" in metrics:
        # runs whose success has another name (inspect-robots: success_at_end), by the one rule
        named = success_metric(store, runs)
        if named is not None and named != "success":
            metrics = [named if m == "success" else m for m in metrics]
            read = _Reader(store, runs, source, None, options, by)
            scores = read.scores(metrics)
    if scores.filter(pl.col("run_id") == parent).is_empty():
        raise ValueError(
            f"parent {parent!r} has no scores"
            + (f" of source {source!r}" if source else "")
            + f" for {metrics}"
        )
    problems = _gate(meta, read.versions(metrics), cands, parent)
    if problems and not force:
        detail = "; ".join(f"{c}: {why}" for c, why in problems.items())
        raise ComparabilityError(
            f"refusing to compare with parent {parent!r}: {detail}. "
            "Pass force=True (--force) to compare anyway; the rows are then marked forced."
        )
    return compare_scores(
        scores,
        declared=read.declared(metrics),
        candidates=cands,
        parent=parent,
        metrics=metrics,
        by=by,
        forced=problems,
        **options,  # type: ignore[arg-type]
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
        pending: pa.Table | None,
        options: Mapping[str, object],
        by: Sequence[str],
    ) -> None:
        self.store, self.runs, self.source, self.pending = store, runs, source, pending
        self.options, self.by = options, list(by)

    def _query(self, metrics: Sequence[str] | None, select: str, rel: str | None) -> str:
        query = preferred_query(
            runs=True, metrics=metrics is not None, sources=self.source is not None, pending=rel
        )
        return select.format(scores=f"({query})")

    def _sql(self, metrics: Sequence[str] | None, select: str) -> pl.DataFrame:
        params: dict[str, object] = {"runs": self.runs}
        if metrics is not None:
            params["metrics"] = list(metrics)
        if self.source is not None:
            params["sources"] = [self.source]
        with registered(self.store, self.pending) as rel:
            return self.store.sql(self._query(metrics, select, rel), params)

    def scores(self, metrics: Sequence[str] | None) -> pl.DataFrame:
        """The engine's columns: ids, value, skip reason (errored, epoch, ``by`` if used)."""
        have = self._sql(metrics, "select * from {scores} limit 0").columns
        wanted = ["run_id", "key", "metric", "value", "skip_reason"]
        if self.options.get("pair_on_epoch"):
            wanted.append("epoch")
        if self.options.get("errors_as_failures"):
            wanted.append("errored")
        cols = [c for c in dict.fromkeys([*wanted, *self.by]) if c in have and c != "source"]
        listed = ", ".join('"' + c.replace('"', '""') + '"' for c in cols)
        return self._sql(metrics, f"select {listed} from {{scores}}")

    def versions(self, metrics: Sequence[str] | None) -> pl.DataFrame:
        """The distinct (run, metric, source, scorer version) of the valid values."""
        return self._sql(
            metrics,
            "select distinct run_id, metric, source, scorer_version from {scores} where valid",
        )

    def declared(self, metrics: Sequence[str] | None) -> pl.DataFrame:
        """Per metric, the directions its rows' metadata declare (the engine keeps one)."""
        return self._sql(
            metrics,
            "select distinct metric, json_extract_string(metadata, '$.direction') as direction "
            "from {scores} where json_valid(metadata)",
        )


def _gate(
    meta: pl.DataFrame, versions: pl.DataFrame, cands: list[str], parent: str
) -> dict[str, str]:
    """Candidate -> what differs from the parent (benchmark digest, split, scorer versions).

    ``versions``: the distinct (run_id, metric, source, scorer_version) of the valid values.

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
        found.append(
            bad.select(
                "run_id",
                why=pl.format(f"{f} '{{}}' != parent's {pv!r}", pl.col(f).fill_null("None")),
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
