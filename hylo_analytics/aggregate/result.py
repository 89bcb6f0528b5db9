"""``AggregateResult``: one aggregate row as the WorldFoundry contract, for people and JSON.

:func:`hylo_analytics.aggregate.aggregate_scores` returns a polars frame (the fast, composable form);
``AggregateResult.from_row`` turns one of its rows into this frozen object and
``AggregateResult.to_rows`` turns a sequence of them back into a frame, so the two views
round-trip.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

import polars as pl

from hylo_analytics._html import text
from hylo_analytics.errors import InputError

__all__ = ["AGGREGATE_RESULT_SCHEMA_VERSION", "AggregateResult", "results_from_frame"]

AGGREGATE_RESULT_SCHEMA_VERSION = "worldfoundry.aggregate_result/v1"

_RAW = ("mean", "std", "median", "p95", "min", "max", "iqm", "optimality_gap")
_COUNTS = ("n_total", "n_valid", "n_skipped")
_CI = ("ci_low", "ci_high", "ci_level", "ci_method")
_DIAG = (
    "coverage",
    "n_errors",
    "errors",
    "reducer",
    "higher_is_better",
    "n_clusters",
    "stderr_clustered",
    "stderr_clustered_corrected",
)
_KNOWN = {"metric", "skip_breakdown", "stderr", "normalized_mean", *_RAW, *_COUNTS, *_CI, *_DIAG}


def _frozen(d: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(d))


@dataclass(frozen=True)
class AggregateResult:
    """Counts, statistics and the interval of one metric over one group of scores.

    ``group`` holds the group-by values (for example ``{"run_id": ...}``); the other fields are
    WorldFoundry's. ``raw_stats`` holds mean, std, median, p95, min, max, iqm and
    optimality_gap; ``confidence_interval`` holds low, high, level and method.
    """

    metric_id: str
    n_total: int = 0
    n_valid: int = 0
    n_skipped: int = 0
    raw_stats: Mapping[str, Any] = field(default_factory=dict)
    normalized_stats: Mapping[str, Any] = field(default_factory=dict)
    confidence_interval: Mapping[str, Any] = field(default_factory=dict)
    stderr: float | None = None
    skip_breakdown: Mapping[str, int] = field(default_factory=dict)
    valid: bool = True
    diagnostics: Mapping[str, Any] = field(default_factory=dict)
    group: Mapping[str, Any] = field(default_factory=dict)
    schema_version: str = AGGREGATE_RESULT_SCHEMA_VERSION

    def __post_init__(self) -> None:
        for name in (
            "raw_stats",
            "normalized_stats",
            "confidence_interval",
            "skip_breakdown",
            "diagnostics",
            "group",
        ):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        # the spec lets a metric give n_skipped without a breakdown by reason
        skipped = sum(self.skip_breakdown.values()) if self.skip_breakdown else self.n_skipped
        if self.n_total != self.n_valid + skipped:
            raise InputError(
                f"AggregateResult {self.metric_id!r}: n_total={self.n_total} != n_valid="
                f"{self.n_valid} + skipped {dict(self.skip_breakdown)}; count every sample "
                "once, as valid or in skip_breakdown"
            )

    def to_dict(self) -> dict[str, Any]:
        """The spec's fields (and ``group``) as JSON-ready plain data."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: dict(v) if isinstance(v, Mapping) else v for k, v in out.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AggregateResult:
        """Build from :meth:`to_dict`'s form (or WorldFoundry's JSON); unknown keys are an error."""
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise InputError(
                f"AggregateResult: unknown fields {unknown}; known: "
                f"{', '.join(f.name for f in fields(cls))}"
            )
        return cls(**{k: v for k, v in data.items() if v is not None or k == "stderr"})

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> AggregateResult:
        """Build from one row (a dict) of :func:`aggregate_scores`'s frame."""
        group = {k: v for k, v in row.items() if k not in _KNOWN}
        skips = {d["reason"]: int(d["count"]) for d in row.get("skip_breakdown") or []}
        norm = row.get("normalized_mean")
        return cls(
            metric_id=str(row["metric"]),
            n_total=int(row["n_total"]),
            n_valid=int(row["n_valid"]),
            n_skipped=int(row["n_skipped"]),
            raw_stats={k: row[k] for k in _RAW if k in row},
            normalized_stats={} if norm is None else {"mean": norm},
            confidence_interval={k[3:]: row[k] for k in _CI if k in row},
            stderr=row.get("stderr"),
            skip_breakdown=skips,
            valid=int(row["n_valid"]) > 0,
            diagnostics={k: row[k] for k in _DIAG if k in row},
            group=group,
        )

    def to_row(self) -> dict[str, Any]:
        """The flat row :func:`aggregate_scores` would produce (group columns first)."""
        row: dict[str, Any] = {**self.group, "metric": self.metric_id}
        row.update(n_total=self.n_total, n_valid=self.n_valid, n_skipped=self.n_skipped)
        row["skip_breakdown"] = [{"reason": r, "count": c} for r, c in self.skip_breakdown.items()]
        row.update(self.raw_stats)
        row["stderr"] = self.stderr
        row["normalized_mean"] = self.normalized_stats.get("mean")
        row.update({f"ci_{k}": v for k, v in self.confidence_interval.items()})
        row.update(self.diagnostics)
        return row

    @staticmethod
    def to_rows(results: Sequence[AggregateResult]) -> pl.DataFrame:
        """A frame with one row per result (the inverse of :func:`results_from_frame`)."""
        return pl.DataFrame([r.to_row() for r in results])

    def _interval_text(self) -> str:
        ci = self.confidence_interval
        if ci.get("low") is None or ci.get("high") is None:
            return "no interval"
        return f"{_fmt(ci['low'])} .. {_fmt(ci['high'])} ({_fmt(ci.get('level', 0) * 100)} % {ci.get('method')})"

    def __str__(self) -> str:
        group = ", ".join(f"{k}={v}" for k, v in self.group.items())
        skips = ", ".join(f"{r}: {c}" for r, c in self.skip_breakdown.items()) or "none"
        lines = [
            f"AggregateResult {self.metric_id}" + (f" [{group}]" if group else ""),
            f"  mean {_fmt(self.raw_stats.get('mean'))} +/- {_fmt(self.stderr)} (stderr), "
            f"{self._interval_text()}",
            f"  n_total {self.n_total}, n_valid {self.n_valid}, n_skipped {self.n_skipped} "
            f"(coverage {_fmt(self.diagnostics.get('coverage'))}); skipped: {skips}",
        ]
        errors = self.diagnostics.get("errors")
        if errors is not None:
            n = self.diagnostics.get("n_errors")
            counted = "counted as failures" if errors == "failure" else "left out"
            lines.append(
                f"  errors: {errors} ({n if n is not None else 'unknown'} errored, {counted})"
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        row = {
            **self.group,
            "metric": self.metric_id,
            "mean": _fmt(self.raw_stats.get("mean")),
            "stderr": _fmt(self.stderr),
            "interval": self._interval_text(),
            "n_valid / n_total": f"{self.n_valid} / {self.n_total}",
            "skipped": ", ".join(f"{r}: {c}" for r, c in self.skip_breakdown.items()) or "none",
        }
        head = "".join(f"<th>{text(str(k))}</th>" for k in row)
        cells = "".join(f"<td>{text(str(v))}</td>" for v in row.values())
        return f"<table><thead><tr>{head}</tr></thead><tbody><tr>{cells}</tr></tbody></table>"


def results_from_frame(frame: pl.DataFrame) -> list[AggregateResult]:
    """One :class:`AggregateResult` per row of :func:`aggregate_scores`'s frame."""
    return [AggregateResult.from_row(r) for r in frame.iter_rows(named=True)]


def _fmt(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)
