"""Run selection: a run id, a unique prefix or a ``field=value`` selector names runs."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import polars as pl

from hylo_analytics._versions import version_ranks
from hylo_analytics.errors import (
    InputError,
    RunSelectionError,
)

# Up to this many runs a run filter is a list of ids (it reaches the scan's row groups); from
# here on a list can cost more than the scan, and readers check whether it names every run.
FEW_RUNS = 64


def _resolve(spec: str, runs: pl.DataFrame, ids: frozenset[str] | None = None) -> str:
    """The rule of :meth:`ParquetStore.resolve_run` over the runs table ``runs`` (ids ``ids``)."""
    if spec in (ids if ids is not None else frozenset(runs["run_id"].to_list())):
        return spec
    if "=" in spec:
        hits = runs.filter(_selector(spec))
    else:
        hits = runs.filter(pl.col("run_id").str.starts_with(spec))
    if hits.height == 1:
        return str(hits["run_id"].item())
    if hits.height == 0:
        known = runs["run_id"].to_list()
        near = difflib.get_close_matches(spec, known, n=3, cutoff=0.4)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise RunSelectionError(
            f"no run matches {spec!r}{hint} (the store holds {len(known)} run(s): "
            "see 'hylo-analytics runs'; select by agent=, version=, benchmark=, split=)"
        )
    listed = ", ".join(
        f"{r['run_id']} (agent {r['agent_name']}, version {r['agent_version']}, "
        f"benchmark {r['benchmark_id']}, split {r['split']})"
        for r in hits.head(5).iter_rows(named=True)
    )
    first = "the first 5: " if hits.height > 5 else ""
    raise RunSelectionError(
        f"{spec!r} matches {hits.height} runs, add a field to pick one: {first}{listed}"
    )


def _select(specs: Sequence[str], runs: pl.DataFrame, exclude: str | None) -> list[str]:
    """The rule of :meth:`ParquetStore.select_runs` over ``runs`` (in :func:`natural_order`)."""
    ids = frozenset(runs["run_id"].to_list())
    if ids.issuperset(specs):  # only ids (1,999 candidates named one by one): no rule to run
        chosen = set(specs)
    else:
        chosen = set()
        for spec in specs:  # a few selectors and prefixes, each one filter of the runs table
            if spec in ids or "=" not in spec:
                chosen.add(_resolve(spec, runs, ids))
                continue
            other = pl.lit(True) if exclude is None else pl.col("run_id") != exclude
            hits = runs.filter(_selector(spec), other)["run_id"]
            if hits.is_empty():
                if exclude is None or runs.filter(_selector(spec)).is_empty():
                    _resolve(spec, runs, ids)  # raises: no run matches, the nearest ids
                raise RunSelectionError(
                    f"{spec!r} matches only the parent run {exclude!r}: no candidate to "
                    "compare with it; name other runs (see 'hylo-analytics runs')"
                )
            chosen.update(hits.to_list())
    return runs.filter(pl.col("run_id").is_in(list(chosen)))["run_id"].to_list()


# the columns of the runs table that place a run in natural order, the tie-breaks last
_ORDER = ("agent_name", "agent_version", "benchmark_id", "split", "ingested_at", "run_id")


def natural_order(runs: pl.DataFrame) -> pl.DataFrame:
    """``runs`` (rows of the runs table) in natural run order: agent, version in natural
    version order (``2.3.0 < 2.294.0``, ``1.2.0-rc1 < 1.2.0``), benchmark and split, then
    the newest ingest first (a re-run of one version on one suite) and the id."""
    by = [c for c in _ORDER if c in runs.columns]
    descending = [c == "ingested_at" for c in by]
    if "agent_version" not in runs.columns:
        return runs.sort(by, descending=descending, nulls_last=False)
    ranked = runs.with_columns(version_ranks(runs["agent_version"]).alias("__version"))
    by = ["__version" if c == "agent_version" else c for c in by]
    return ranked.sort(by, descending=descending, nulls_last=False).drop("__version")


RUN_FIELDS: dict[str, tuple[str, ...]] = {
    "run": ("run_id",),
    "agent": ("agent_name",),
    "version": ("agent_version",),
    "benchmark": ("benchmark_id", "split"),
    "split": ("split",),
    "format": ("source_format",),
}


def _selector(spec: str) -> pl.Expr:
    cond = pl.lit(True)
    for part in spec.split(","):
        field, sep, value = part.partition("=")
        field, value = field.strip(), value.strip()
        if not sep or field not in RUN_FIELDS or not value:
            raise InputError(
                f"run selector {spec!r}: expected field=value pairs joined by commas, fields "
                f"{', '.join(RUN_FIELDS)}; got {part.strip()!r}"
            )
        cond &= pl.any_horizontal(pl.col(c) == value for c in RUN_FIELDS[field])
    return cond
