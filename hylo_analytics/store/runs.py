"""Run selection: a run id, a unique prefix or a ``field=value`` selector names runs."""

from __future__ import annotations

import difflib

import polars as pl

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
    raise RunSelectionError(
        f"{spec!r} matches {hits.height} runs, add a field to pick one: {listed}"
    )


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
