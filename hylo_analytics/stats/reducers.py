"""Reducers: one value per key from several episodes (epochs) of it, before aggregating.

When a run scores the same key (task and seed) more than once, the epochs are not independent
samples of the benchmark: averaging them first keeps each key's weight equal and keeps the
interval honest. A reducer is applied per ``(group, run_id, key, metric)``; abstained epochs are
ignored, and a key with no valid epoch stays an abstention with its skip reason.

- ``mean``, ``median``, ``max``, ``min``: of the valid epochs (``mean`` is what the SQL view
  ``int_key_scores`` does; a test holds the two equal);
- ``at_least(k)``: 1 when at least ``k`` valid epochs have a value > 0, else 0;
- ``pass_at_k(k)``: the unbiased pass@k of Chen et al. (2021), ``1 - C(n - c, k) / C(n, k)``
  with ``n`` valid epochs of which ``c`` have a value > 0; a key with fewer than ``k`` valid
  epochs abstains (reason ``fewer_than_k_epochs``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from hylo_analytics._text import did_you_mean
from hylo_analytics.errors import InputError

__all__ = ["REDUCERS", "Reducer", "at_least", "pass_at_k", "reduce_epochs", "reducer"]

REDUCERS = ("mean", "median", "max", "min", "at_least", "pass_at_k")
_PATTERN = re.compile(r"^(at_least|pass_at_k|pass@)\(?(\d+)\)?$")


@dataclass(frozen=True)
class Reducer:
    """A named reduction of a key's epochs; ``k`` only for ``at_least`` and ``pass_at_k``."""

    name: str
    k: int | None = None

    def __post_init__(self) -> None:
        if self.name not in REDUCERS:
            raise InputError(
                f"unknown reducer {self.name!r}{did_you_mean([self.name], REDUCERS)}; known: "
                f"{', '.join(REDUCERS)}"
            )
        needs_k = self.name in ("at_least", "pass_at_k")
        if needs_k != (self.k is not None) or (self.k is not None and self.k < 1):
            raise InputError(f"reducer {self.name!r}: k must be {'>= 1' if needs_k else 'None'}")

    def __str__(self) -> str:
        return self.name if self.k is None else f"{self.name}({self.k})"


def at_least(k: int) -> Reducer:
    """1 when at least ``k`` epochs succeeded (value > 0)."""
    return Reducer("at_least", k)


def pass_at_k(k: int) -> Reducer:
    """Unbiased pass@k over the epochs of a key."""
    return Reducer("pass_at_k", k)


def reducer(spec: str | Reducer) -> Reducer:
    """Parse ``"mean"``, ``"at_least(2)"``, ``"pass_at_k(3)"`` or ``"pass@3"``."""
    if isinstance(spec, Reducer):
        return spec
    text = spec.strip().replace(" ", "")
    m = _PATTERN.match(text)
    if m:
        name = "pass_at_k" if m.group(1) == "pass@" else m.group(1)
        return Reducer(name, int(m.group(2)))
    return Reducer(text)


def reduce_epochs(frame: pl.DataFrame, keys: Sequence[str], how: Reducer) -> pl.DataFrame:
    """One row per ``keys`` with the reduced ``_value``, ``_valid`` and ``_reason``.

    ``frame`` carries ``_value`` (null for an abstention), ``_valid``, ``_reason`` and
    ``_errored`` (null when unknown); a key with no valid epoch is errored when any epoch was.
    """
    v = pl.col("_value").filter(pl.col("_valid"))
    hit = (v > 0).sum()
    n_valid = pl.col("_valid").sum()
    stats = {
        "mean": v.mean(),
        "median": v.median(),
        "max": v.max(),
        "min": v.min(),
        "at_least": (hit >= (how.k or 0)).cast(pl.Float64),
        "pass_at_k": pl.lit(None, dtype=pl.Float64),
    }
    out = frame.group_by(list(keys), maintain_order=True).agg(
        _value=stats[how.name],
        _n=n_valid,
        _c=hit,
        _reason=pl.col("_reason").drop_nulls().min(),
        _errored=pl.col("_errored").any(ignore_nulls=False)
        if "_errored" in frame.columns
        else pl.lit(None, pl.Boolean),
    )
    need = how.k if how.name == "pass_at_k" and how.k is not None else 1
    ok = pl.col("_n") >= need
    if how.name == "pass_at_k":
        out = out.with_columns(_value=pl.Series(_pass_at_k(out["_n"], out["_c"], need)))
    reason = "fewer_than_k_epochs" if how.name == "pass_at_k" else "no_valid_epoch"
    return out.with_columns(
        _value=pl.when(ok).then(pl.col("_value")),
        _valid=ok,
        _reason=pl.when(ok).then(None).otherwise(pl.col("_reason").fill_null(reason)),
        _errored=~ok & pl.col("_errored"),
    ).drop("_n", "_c")


def _pass_at_k(n: pl.Series, c: pl.Series, k: int) -> np.ndarray:
    """The estimator of :func:`hylo_analytics.stats.repeated.pass_at` (one implementation);
    NaN where fewer than ``k`` epochs are valid."""
    from hylo_analytics.stats.repeated import pass_at

    return pass_at(n.to_numpy(), c.to_numpy(), k)
