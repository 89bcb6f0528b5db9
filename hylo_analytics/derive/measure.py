"""Repeated measurement: warm up, sample a callable's duration, summarize, record next to scores.

``measure_callable(fn, budget=MeasurementBudget(warmup=3, repetitions=20, max_seconds=2.0))``
runs ``fn`` ``warmup`` times unrecorded, then up to ``repetitions`` recorded times, stopping early
once the measured time (warmup included) reaches ``max_seconds``; at least one repetition is
always recorded. The budget is counted on what the timer reports, so a fake or remote timer gives
a deterministic, reproducible number of samples.

A *timer* times one call: ``timer(fn) -> seconds``. The default wraps ``time.perf_counter``; a
custom one can synchronize an accelerator, or return the duration a remote system reports,
without the measuring loop knowing about it.

**Relative noise** is ``MAD / median``: the median absolute deviation from the median, as a
fraction of the median. Timing samples are skewed with rare large outliers (a GC pause, a
scheduler hiccup); ``std / mean`` lets one such outlier make a steady benchmark look noisy, and
``(p95 - min) / median`` depends on the sample count. MAD/median ignores up to half the samples
being outliers and is unit-free, so one threshold ("changes under 5% are noise") carries across
benchmarks. It is null when the median is 0.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from hylo_analytics import _schema
from hylo_analytics._config import ConfigError
from hylo_analytics._html import text
from hylo_analytics.errors import InputError
from hylo_analytics.store import ParquetStore, commit_scores

__all__ = [
    "Measurement",
    "MeasurementBudget",
    "Timer",
    "measure_callable",
    "perf_counter_timer",
    "record_measurement",
]

Timer = Callable[[Callable[[], object]], float]
_STATS = ("count", "min", "max", "mean", "median", "p95", "std", "mad", "relative_noise")


def perf_counter_timer(fn: Callable[[], object]) -> float:
    """Wall-clock seconds of one call, by ``time.perf_counter``."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@dataclass(frozen=True)
class MeasurementBudget:
    """How much to measure: unrecorded warmup calls, recorded repetitions, a time cap (seconds)."""

    warmup: int = 3
    repetitions: int = 20
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.warmup < 0:
            raise ConfigError("budget.warmup", f"expected an integer >= 0, got {self.warmup!r}")
        if self.repetitions < 1:
            raise ConfigError(
                "budget.repetitions", f"expected an integer >= 1, got {self.repetitions!r}"
            )
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise ConfigError(
                "budget.max_seconds", f"expected a number > 0 or null, got {self.max_seconds!r}"
            )


@dataclass(frozen=True)
class Measurement:
    """Recorded durations (seconds) and their summary; see the module doc for relative noise."""

    samples: tuple[float, ...]
    count: int
    min: float
    max: float
    mean: float
    median: float
    p95: float
    std: float | None  # sample std (ddof=1); null for a single sample
    mad: float
    relative_noise: float | None
    warmup: int = 0
    stopped_by: str = "repetitions"  # repetitions | max_seconds
    unit: str = field(default="s")

    @classmethod
    def from_samples(
        cls,
        samples: tuple[float, ...] | list[float],
        *,
        warmup: int = 0,
        stopped_by: str = "repetitions",
    ) -> Measurement:
        """Summarize durations (p95 by linear interpolation between order statistics)."""
        x = np.asarray(samples, dtype=np.float64)
        if x.size == 0:
            raise InputError("a measurement needs at least one sample: pass one duration or more")
        median = float(np.median(x))
        mad = float(np.median(np.abs(x - median)))
        return cls(
            samples=tuple(float(v) for v in x),
            count=int(x.size),
            min=float(x.min()),
            max=float(x.max()),
            mean=float(x.mean()),
            median=median,
            p95=float(np.percentile(x, 95)),
            std=float(x.std(ddof=1)) if x.size > 1 else None,
            mad=mad,
            relative_noise=mad / median if median != 0 else None,
            warmup=warmup,
            stopped_by=stopped_by,
        )

    def stats(self) -> dict[str, float | int | None]:
        """The summary statistics by name."""
        return {s: getattr(self, s) for s in _STATS}

    def __str__(self) -> str:
        noise = "n/a" if self.relative_noise is None else f"{self.relative_noise:.1%}"
        return (
            f"Measurement(n={self.count}, median={_fmt(self.median)}, p95={_fmt(self.p95)}, "
            f"min={_fmt(self.min)}, max={_fmt(self.max)}, noise={noise}, "
            f"stopped by {self.stopped_by})"
        )

    def _repr_html_(self) -> str:
        cells = "".join(
            f"<tr><th>{k}</th><td>{text(str(v))}</td></tr>" for k, v in self.stats().items()
        )
        return f"<table><caption>Measurement ({self.unit})</caption>{cells}</table>"


def _fmt(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def measure_callable(
    fn: Callable[[], object],
    budget: MeasurementBudget | None = None,
    *,
    timer: Timer = perf_counter_timer,
) -> Measurement:
    """Time ``fn`` repeatedly within ``budget`` and summarize the recorded durations."""
    budget = budget or MeasurementBudget()
    cap = budget.max_seconds if budget.max_seconds is not None else float("inf")
    spent = 0.0
    for _ in range(budget.warmup):
        spent += timer(fn)
    samples: list[float] = []
    stopped_by = "repetitions"
    while len(samples) < budget.repetitions:
        if samples and spent >= cap:
            stopped_by = "max_seconds"
            break
        elapsed = float(timer(fn))
        samples.append(elapsed)
        spent += elapsed
    return Measurement.from_samples(samples, warmup=budget.warmup, stopped_by=stopped_by)


def record_measurement(
    store: ParquetStore,
    name: str,
    measurements: Measurement | Mapping[str | None, Measurement],
    *,
    run_id: str,
) -> int:
    """Write measurements of one run as score rows with ``source = "measure:<name>"``.

    ``measurements`` is one measurement (run-level, key null) or one per sample key. Each gets
    a row ``<name>`` holding the median (its metadata keeps every statistic and the samples) and
    rows ``<name>.<stat>`` for the other statistics, so policies can name e.g. ``search.p95``.
    Recording again replaces the run's earlier rows of that source.
    """
    by_key = {None: measurements} if isinstance(measurements, Measurement) else measurements
    source = f"measure:{name}"
    rows: list[dict[str, Any]] = []
    # A loop over a handful of keys x statistics: metadata, not data rows.
    for key, m in by_key.items():
        stats = m.stats()
        headline = {**stats, "unit": m.unit, "warmup": m.warmup, "stopped_by": m.stopped_by}
        rows.append(_row(run_id, key, name, m.median, source, {**headline, "samples": m.samples}))
        for stat in _STATS:
            if stat != "median":
                meta = {
                    "stat": stat,
                    "unit": "1" if stat in ("count", "relative_noise") else m.unit,
                }
                rows.append(_row(run_id, key, f"{name}.{stat}", stats[stat], source, meta))
    table = pa.Table.from_pylist(rows)
    return commit_scores(store, _schema.conform(table, "scores"))


def _row(
    run_id: str,
    key: str | None,
    metric: str,
    value: float | int | None,
    source: str,
    meta: dict[str, Any],
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "key": key,
        "metric": metric,
        "value": None if value is None else float(value),
        "valid": value is not None,
        "skip_reason": None if value is not None else "undefined for this sample",
        "source": source,
        "source_kind": "observation",
        "scorer_version": "measure/1",
        "metadata": json.dumps(meta),
    }
