"""``Store.compare``: the engine over the store's resolved scores, behind a comparability gate."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
import pyarrow as pa

from hylo_analytics.compare.engine import compare_scores
from hylo_analytics.resolution import preferred_scores, success_metric
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
    scores = preferred_scores(
        store,
        runs=runs,
        metrics=None if metrics is None else list(metrics),
        source=source,
        pending=pending,
    )
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
            scores = preferred_scores(store, runs=runs, metrics=metrics, source=source)
    if scores.filter(pl.col("run_id") == parent).is_empty():
        raise ValueError(
            f"parent {parent!r} has no scores"
            + (f" of source {source!r}" if source else "")
            + f" for {metrics}"
        )
    problems = _gate(meta, scores, cands, parent)
    if problems and not force:
        detail = "; ".join(f"{c}: {why}" for c, why in problems.items())
        raise ComparabilityError(
            f"refusing to compare with parent {parent!r}: {detail}. "
            "Pass force=True (--force) to compare anyway; the rows are then marked forced."
        )
    return compare_scores(
        scores.drop("source"),
        candidates=cands,
        parent=parent,
        metrics=metrics,
        by=by,
        forced=problems,
        **options,  # type: ignore[arg-type]
    )


def _gate(
    meta: pl.DataFrame, scores: pl.DataFrame, cands: list[str], parent: str
) -> dict[str, str]:
    """Candidate -> what differs from the parent (benchmark digest, split, scorer versions).

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
    versions = (
        scores.filter(pl.col("valid"))
        .group_by("run_id", "metric", "source")
        .agg(v=pl.col("scorer_version").fill_null("").unique().sort().str.join(","))
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
