"""``Store.pooled_compare``: the runs two selectors name, paired by suite, then pooled.

Each suite's pair is one :func:`~hylo_analytics.compare.compare_runs` (the gate, the
resolved scores, the errors policy), so a suite row is exactly ``Store.compare``'s overall
row; :func:`~hylo_analytics.compare.pooled.pool_suites` adds the pooled row.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from hylo_analytics.compare.pooled import _differences, pool_suites
from hylo_analytics.errors import InputError, RunSelectionError, SelectionError
from hylo_analytics.stats.pooled import Weighting
from hylo_analytics.store import ParquetStore, _selector, pinned

__all__ = ["pooled_compare_runs", "suite_pairs"]

# compare options a pooled comparison fixes, and why
_REFUSED = {
    "by": "by: the suites are the groups",
    "ci": "ci: the pooled interval combines the suites' Tango intervals (0/1 metrics)",
    "family": "family: the suite rows and the pooled row are one family",
    "pair_on_epoch": "pair_on_epoch: pairs are keys (epochs reduced)",
}


@pinned
def pooled_compare_runs(
    store: ParquetStore,
    candidate: str,
    parent: str,
    *,
    metrics: list[str] | tuple[str, ...] = ("success",),
    weights: Weighting = "suite",
    source: str | None = None,
    force: bool = False,
    **options: Any,
) -> pl.DataFrame:
    """``Store.pooled_compare``: the runs ``candidate`` selects (``agent=xvla``) against
    those ``parent`` selects, paired by suite (:func:`suite_pairs`), then by key.

    Each suite is one :func:`~hylo_analytics.compare.compare_runs` (the comparability
    gate, the resolved scores, the errors policy: ``errors=``, else each run's harness
    convention), pooled by :func:`pool_suites`. ``options``: compare_scores' (``errors``,
    ``alternative``, ``directions``, ``n_resamples``, ``level``, ``seed``, ``rule``,
    ``cluster``: CR2 within suites, pooled, ...).
    """
    from hylo_analytics.compare.runs import compare_runs

    refused = sorted((set(options) - {"_other"}) & set(_REFUSED))
    if refused:
        raise InputError(
            f"pooled_compare: {', '.join(refused)} cannot be set: "
            + "; ".join(_REFUSED[k] for k in refused)
        )
    pairs = suite_pairs(store, candidate, parent)
    per_suite = []
    for suite, (cand, par) in pairs.items():
        rows = compare_runs(
            store, cand, par, metrics=metrics, source=source, force=force,
            **{k: v for k, v in options.items() if k != "_other"},
        )  # fmt: skip
        per_suite.append(rows.with_columns(suite=pl.lit(suite)))
    suites = pl.concat(per_suite, how="diagonal_relaxed")
    numeric = suites.filter(~pl.col("is_binary") & (pl.col("n_pairs") > 0))
    diffs = None
    cluster = options.get("cluster")
    if not numeric.is_empty() and cluster is None:  # clustered: the suites' fits are pooled
        if source is not None:
            raise InputError(
                "pooled_compare: source= applies to 0/1 metrics only for now; drop source= or "
                "compare a 0/1 metric"
            )
        runs = [r for cp in pairs.values() for r in cp]
        scores = store.sql(
            "select run_id, key, metric, value from int_key_scores "
            "where list_contains($runs, run_id) and list_contains($metrics, metric)",
            {"runs": runs, "metrics": numeric["metric"].unique().to_list()},
        )
        reducer = options.get("reducer", "mean")
        diffs = _differences(scores, pairs, numeric["metric"].unique().to_list(), reducer)
    keep = ("alternative", "n_resamples", "level", "seed", "rule")
    pooled = pool_suites(
        suites, diffs, candidate=candidate, parent=parent, weights=weights, cluster=cluster,
        **{k: v for k, v in options.items() if k in keep},
    )  # fmt: skip
    if (
        options.get("_other")
        or not (suites["n_errored_candidate"] + suites["n_errored_parent"]).sum()
    ):
        return pooled
    # issue 40: the pooled verdict under the other errors policy, beside it
    from hylo_analytics.compare._other_errors import other_policy

    applied = pooled.filter(pl.col("level") == "pooled")["errors"][0]
    other = other_policy(str(applied))
    again = pooled_compare_runs(
        store, candidate, parent, metrics=metrics, weights=weights, source=source, force=force,
        **{**options, "errors": other, "_other": True},
    ).filter(pl.col("level") == "pooled")  # fmt: skip
    alt = again.select("metric", verdict_p="verdict", mean_diff_p="mean_diff",
                       p_verdict_p="p_verdict")  # fmt: skip
    row = pl.col("level") == "pooled"
    totals = (
        suites.filter(pl.col("level") == "overall")
        .group_by("metric")
        .agg(_c=pl.col("n_errored_candidate").sum(), _p=pl.col("n_errored_parent").sum())
    )
    pooled = pooled.join(alt, on="metric", how="left", maintain_order="left")
    pooled = (
        pooled.join(totals, on="metric", how="left", maintain_order="left")
        .with_columns(
            n_errored_candidate=pl.when(row).then("_c").otherwise("n_errored_candidate"),
            n_errored_parent=pl.when(row).then("_p").otherwise("n_errored_parent"),
        )
        .drop("_c", "_p")
    )
    n_err = pl.col("n_errored_candidate") + pl.col("n_errored_parent")
    rests = pl.format(
        "the pooled verdict rests on harness errors: {} errored key(s) over the suites; under "
        "errors='{}' it is {} (difference {}, p {})",
        n_err, pl.lit(other), pl.col("verdict_p"), pl.col("mean_diff_p").round_sig_figs(3),
        pl.col("p_verdict_p").round_sig_figs(3),
    )  # fmt: skip
    same = pl.format("{} errored key(s) over the suites; the pooled verdict is the same under "
                     "errors='{}'", n_err, pl.lit(other))  # fmt: skip
    return pooled.with_columns(
        errors_other=pl.when(row).then(pl.lit(other)).otherwise("errors_other"),
        verdict_other=pl.when(row).then("verdict_p").otherwise("verdict_other"),
        mean_diff_other=pl.when(row).then("mean_diff_p").otherwise("mean_diff_other"),
        p_verdict_other=pl.when(row).then("p_verdict_p").otherwise("p_verdict_other"),
        errors_note=pl.when(row & pl.col("verdict_p").ne_missing(pl.col("verdict")))
        .then(rests)
        .when(row)
        .then(same)
        .otherwise("errors_note"),
    ).drop("verdict_p", "mean_diff_p", "p_verdict_p")


def suite_pairs(store: ParquetStore, candidate: str, parent: str) -> dict[str, tuple[str, str]]:
    """Suite -> (candidate run, parent run), a suite being a (benchmark, split) and named
    by its split (else its benchmark). Each selector must name one run per suite and the
    two must cover the same suites: a pooled effect over different suites is no effect."""
    runs = store.sql(
        "SELECT run_id, agent_name, agent_version, benchmark_id, split, source_format "
        "FROM stg_runs ORDER BY run_id"
    ).with_columns(suite=pl.coalesce("split", "benchmark_id"))
    sides = {}
    for name, spec in (("candidate", candidate), ("parent", parent)):
        hits = runs.filter(_selector(spec) if "=" in spec else pl.col("run_id") == spec)
        if hits.is_empty():
            raise RunSelectionError(
                f"pooled_compare: {name} {spec!r} selects no run (see 'hylo-analytics runs')"
            )
        several = hits.group_by("benchmark_id", "split").len().filter(pl.col("len") > 1)
        if not several.is_empty():
            raise RunSelectionError(
                f"pooled_compare: {name} {spec!r} selects several runs of suite(s) "
                f"{sorted(several['split'].fill_null('').to_list())}: add a field "
                "(version=...) so each suite has one"
            )
        sides[name] = hits
    joined = sides["candidate"].join(
        sides["parent"], on=["benchmark_id", "split"], how="full", nulls_equal=True,
        suffix="_p",
    )  # fmt: skip
    lone = joined.filter(pl.col("run_id").is_null() | pl.col("run_id_p").is_null())
    if not lone.is_empty():
        names = pl.coalesce("suite", "suite_p")
        raise SelectionError(
            f"pooled_compare: suite(s) {sorted(lone.select(names)['suite'].to_list())} have "
            f"a run on one side only ({candidate!r} vs {parent!r}); select the same suites"
        )
    rows = joined.sort("suite").select("suite", "run_id", "run_id_p").rows()
    return {str(s): (str(c), str(p)) for s, c, p in rows}
