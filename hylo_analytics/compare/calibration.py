"""Judge calibration: each policy's rate (and its difference from a baseline) by PPI++.

:func:`calibrate_runs` (``Store.calibrate``) reads two grades of the same keys through the
ranking's reader (:func:`~hylo_analytics.compare._rank_store.store_values`: the errors policy,
a key's epochs and a policy's runs reduced, keys within suites), once per grade with one key
coding: the **trusted** grade (a person's, a simulation oracle's) on some keys, and the
**judge**'s grade (``Store.grade``'s ``vlm_judge`` or any grader, or a metric of its own) on
all of them. Per (policy, suite) it hands the keys to :func:`~hylo_analytics.stats.ppi.ppi_mean`
(and per (policy, baseline, suite) the keys both share to
:func:`~hylo_analytics.stats.ppi.ppi_paired`): the PPI++ estimate beside the classical mean of
the trusted grades and the judge's own mean, with the gain in labels (``effective_n``).

A key the judge abstained on (or never graded) stays in: its judge value is the policy's mean
judge grade in the suite, a constant prediction PPI's rectifier corrects like any other
(dropping the key would bias the rate when abstentions follow failures).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import polars as pl

from hylo_analytics._harness import Errors, check_errors
from hylo_analytics._html import text
from hylo_analytics.compare._prepare import Reducer
from hylo_analytics.compare._rank_store import SEP, store_values
from hylo_analytics.compare.pareto import _rows
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL, _check_level
from hylo_analytics.stats.ppi import PPIEstimate, ppi_mean, ppi_paired
from hylo_analytics.store import ParquetStore, pinned

if TYPE_CHECKING:
    import altair as alt

__all__ = ["Calibration", "calibrate_runs"]

_RUN_COLUMNS = ("run_id", "agent_name", "agent_version", "benchmark_id", "split")
_REDUCERS = ("mean", "max", "min")
_SHOWN = 50
ESTIMATES = ("estimate", "low", "high", "stderr", "lam", "classical", "classical_low",
             "classical_high", "judge_only", "judge_only_low", "judge_only_high", "n_labelled",
             "n_unlabelled", "effective_n", "width_ratio")  # fmt: skip
CI_METHOD = "ppi++"


@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate_runs` found.

    ``rates``: one row per (policy, suite): ``policy``, the suite's fields (``strata``),
    PPI++'s ``estimate, low, high, stderr`` and its tuned ``lam``, the ``classical`` mean of
    the trusted grades with its interval, the ``judge_only`` mean over every key with its
    interval (biased by the judge's error: shown to see it, never to trust), ``n_labelled`` /
    ``n_unlabelled`` keys (with / without a trusted grade), ``n_judge_filled`` (keys the judge
    left ungraded), ``effective_n`` (the trusted grades the classical mean would need for
    PPI++'s width), ``width_ratio`` (PPI++'s width over the classical one's) and
    ``ci_method``. ``differences``: one row per (policy, baseline, suite) with the same
    columns for ``policy - baseline`` over the keys both hold (labelled: both trusted) and a
    two-sided ``p_value``; empty without a baseline. ``notes``: what was filled or left out,
    in words; ``left_out``: runs it could not hold (``run_id``, ``reason``).
    """

    rates: pl.DataFrame
    differences: pl.DataFrame
    trusted: str
    judge: str
    trusted_source: str | None
    judge_source: str | None
    baseline: str | None
    level: float
    strata: tuple[str, ...]
    notes: tuple[str, ...] = ()
    left_out: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(schema={"run_id": pl.String, "reason": pl.String})
    )
    draw: Callable[..., alt.LayerChart] | None = field(default=None, repr=False, compare=False)

    def chart(self, *, title: str | None = None) -> alt.LayerChart:
        """Classical, PPI++ and judge-only estimates with their intervals per policy
        (:func:`~hylo_analytics.charts.calibration.calibration_intervals`)."""
        if self.draw is None:
            raise InputError(
                "Calibration.chart: this result was made without its chart; draw it with "
                "hylo_analytics.charts.calibration_intervals(result)"
            )
        return self.draw(self, title=title)

    def __repr__(self) -> str:
        with pl.Config(tbl_rows=20, tbl_cols=12, float_precision=4):
            diffs = f"\n{self.differences}" if not self.differences.is_empty() else ""
            return (
                f"Calibration(trusted={self.trusted!r}, judge={self.judge!r}, "
                f"rates={self.rates.height}, differences={self.differences.height})"
                f"\n{self.rates}{diffs}"
            )

    def _repr_html_(self) -> str:
        intro = (
            f"<strong>{text(self.trusted)} calibrated by PPI++ from the judge's "
            f"<code>{text(self.judge)}</code></strong> &mdash; {self.level:.0%} intervals: "
            "PPI++ (trusted grades and the judge's), classical (trusted grades only), "
            "judge-only (the judge taken as the truth: biased)."
        )
        parts = [f"<p>{intro}</p>", _html_table(self.rates, ["policy", *self.strata])]
        if not self.differences.is_empty():
            parts.append(f"<p>Differences from <code>{text(self.baseline or '')}</code></p>")
            parts.append(_html_table(self.differences, ["policy", "baseline", *self.strata]))
        parts += [f"<p>{text(note)}</p>" for note in self.notes]
        return f"<div>{''.join(parts)}</div>"


def _html_table(frame: pl.DataFrame, names: list[str]) -> str:
    def cell(prefix: str) -> pl.Expr:
        cols = (prefix or "estimate", f"{prefix}_low" if prefix else "low",
                f"{prefix}_high" if prefix else "high")  # fmt: skip
        return pl.format("{} [{}, {}]", *(pl.col(c).round(4) for c in cols))

    rows = frame.head(_SHOWN).select(
        *names, ppi=cell(""), classical=cell("classical"), judge=cell("judge_only"),
        labels=pl.format("{} + {}", "n_labelled", "n_unlabelled"),
        eff=pl.col("effective_n").round(1),
    )  # fmt: skip
    heads = [*names, "PPI++ [interval]", "classical", "judge-only", "keys (labelled + not)",
             "effective labels"]  # fmt: skip
    head = "".join(f"<th>{text(h)}</th>" for h in heads)
    body = "".join(
        "<tr>" + "".join(f"<td>{text(v)}</td>" for v in row) + "</tr>" for row in rows.iter_rows()
    )
    more = f"<p>First {_SHOWN} of {frame.height:,} rows.</p>" if frame.height > _SHOWN else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


@pinned
def calibrate_runs(
    store: ParquetStore,
    runs: Sequence[str] | None = None,
    *,
    trusted: str = "success",
    judge: str | None = None,
    trusted_source: str | None = None,
    judge_source: str | None = None,
    policy: str = "agent_name",
    strata: Sequence[str] = ("benchmark_id", "split"),
    policies: Sequence[str] | None = None,
    baseline: str | None = None,
    errors: Errors | None = None,
    reducer: Reducer | None = "mean",
    lam: float | None = None,
    level: float = DEFAULT_LEVEL,
) -> Calibration:
    """Each policy's rate of ``trusted`` by PPI++ from the judge's grades of every key.

    ``trusted`` / ``trusted_source``: the metric (and source) of the trusted grade, held on
    some keys (a random sample of them: PPI is unbiased only then); ``judge`` /
    ``judge_source``: the judge's (default metric: ``trusted``'s name; a ``vlm_judge`` named
    ``judge`` writes metric ``success`` with source ``grade:judge``). When both are one
    metric both sources must be named: the resolved scores prefer a grader's value. ``runs``,
    ``policy``, ``strata``, ``policies``, ``errors``, ``reducer``: as :func:`rank_runs` (a
    row per policy and suite). ``baseline``: a policy every other is compared with (paired
    PPI++ of the difference); with two policies and none named, the first by name. ``lam``:
    None tunes it (PPI++), 1 is plain PPI. ``level``: the intervals' coverage.
    """
    _check_level(level)
    judge = trusted if judge is None else judge
    _check(policy, strata, reducer, trusted, judge, trusted_source, judge_source)
    errors_arg = check_errors(errors, "calibrate: errors")
    read = []
    for metric, source in ((trusted, trusted_source), (judge, judge_source)):
        try:
            read.append(
                store_values(
                    store,
                    runs,
                    policy=policy,
                    strata=strata,
                    metric=metric,
                    source=source,
                    policies=policies,
                    errors=errors_arg,
                    reducer=reducer,
                    keys_of=(trusted, judge),
                    fewest=1,
                )
            )
        except SelectionError as exc:
            said = f"{metric!r}" + (f" (source {source!r})" if source else "")
            raise SelectionError(
                str(exc).replace("rank: ", "calibrate: ", 1) + f" [reading {said}]"
            ) from None
    (t_values, _, t_left), (j_values, _, j_left) = read
    names, rows = _rows(t_values, j_values)
    rows["stratum"] = rows["stratum"][rows["key"]]  # each row's suite (``_rows``: each key's)
    n_strata = max(len(t_values.strata), 1)
    group = rows["policy"] * n_strata + rows["stratum"]
    truth, pred, filled = _filled(rows["quality"], rows["cost"], group, len(names) * n_strata)
    keep = np.isfinite(pred)
    est = ppi_mean(truth[keep], pred[keep], group[keep], n_groups=len(names) * n_strata,
                   lam=lam, level=level)  # fmt: skip
    counts = np.bincount(group, weights=filled, minlength=len(names) * n_strata).astype(np.float64)
    suites = [s.split(SEP) if strata else [] for s in t_values.strata] or [[]]
    rates = _frame(est, names, suites, list(strata), counts)
    base = _baseline(baseline, names)
    diffs = _differences(base, names, suites, list(strata), rows, truth, pred, keep, lam, level)
    left_out = pl.concat([t_left, j_left]).unique("run_id", keep="first", maintain_order=True)
    notes = _notes(rates, baseline, base, names, left_out)
    return Calibration(rates, diffs, trusted, judge, trusted_source, judge_source, base, level,
                       tuple(strata), notes, left_out)  # fmt: skip


def _check(
    policy: str,
    strata: Sequence[str],
    reducer: Reducer | None,
    trusted: str,
    judge: str,
    trusted_source: str | None,
    judge_source: str | None,
) -> None:
    bad = [c for c in [policy, *strata] if c not in _RUN_COLUMNS]
    if bad:
        raise InputError(f"calibrate: {bad} are not run fields; use {', '.join(_RUN_COLUMNS)}")
    if reducer is not None and reducer not in _REDUCERS:
        raise InputError(f"calibrate: reducer must be one of {_REDUCERS}, got {reducer!r}")
    if trusted == judge and (trusted_source is None or judge_source is None):
        raise InputError(
            f"calibrate: the trusted grade and the judge are both metric {trusted!r}: name "
            "both sources (trusted_source=, judge_source=, e.g. 'grade:judge' for a "
            "vlm_judge named judge), since the resolved scores prefer a grader's value"
        )
    if trusted == judge and trusted_source == judge_source:
        raise InputError(
            f"calibrate: trusted and judge are the same scores ({trusted!r}, source "
            f"{trusted_source!r}); name two metrics or two sources"
        )


def _filled(
    truth: npt.NDArray[np.float64],
    pred: npt.NDArray[np.float64],
    group: npt.NDArray[np.int64],
    n_groups: int,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The judge's missing grades as its group's mean grade (a constant prediction: PPI stays
    unbiased), and which were filled; a group with no judge grade stays NaN (left out)."""
    valid = np.isfinite(pred)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.bincount(group[valid], pred[valid], n_groups) / np.bincount(
            group[valid], minlength=n_groups
        )
    out = np.where(valid, pred, means[group])
    return truth, out, (~valid & np.isfinite(out)).astype(np.float64)


def _baseline(baseline: str | None, names: list[str]) -> str | None:
    if baseline is None:
        return names[0] if len(names) == 2 else None
    if baseline not in names:
        shown = names if len(names) <= 20 else [*names[:20], f"... ({len(names):,} in all)"]
        raise SelectionError(f"calibrate: baseline {baseline!r} is not a policy; have {shown}")
    return baseline


def _differences(
    base: str | None,
    names: list[str],
    suites: list[list[str]],
    strata: list[str],
    rows: dict[str, npt.NDArray[Any]],
    truth: npt.NDArray[np.float64],
    pred: npt.NDArray[np.float64],
    keep: npt.NDArray[np.bool_],
    lam: float | None,
    level: float,
) -> pl.DataFrame:
    """Every other policy against ``base`` over the keys both hold (a key is one suite's)."""
    if base is None:
        empty = _frame(ppi_mean([], [], n_groups=0), [], suites, strata, np.zeros(0), True)
        return empty.select("policy", baseline=pl.lit(None, pl.String)).hstack(empty.drop("policy"))
    b = names.index(base)
    n_keys = int(rows["key"].max(initial=-1)) + 1
    b_truth, b_pred = np.full(n_keys, np.nan), np.full(n_keys, np.nan)
    mine = (rows["policy"] == b) & keep
    b_truth[rows["key"][mine]] = truth[mine]
    b_pred[rows["key"][mine]] = pred[mine]
    other = (rows["policy"] != b) & keep
    k = rows["key"][other]
    shared = np.isfinite(b_pred[k])
    k = k[shared]
    idx = np.flatnonzero(other)[shared]
    n_strata = len(suites)
    group = rows["policy"][idx] * n_strata + rows["stratum"][idx]
    est = ppi_paired(truth[idx], pred[idx], b_truth[k], b_pred[k], group,
                     n_groups=len(names) * n_strata, lam=lam, level=level)  # fmt: skip
    frame = _frame(est, names, suites, strata, np.zeros(len(names) * n_strata), True)
    return frame.select("policy", pl.lit(base, pl.String).alias("baseline"), pl.exclude("policy"))


def _frame(
    est: PPIEstimate,
    names: list[str],
    suites: list[list[str]],
    strata: list[str],
    filled: npt.NDArray[np.float64],
    paired: bool = False,
) -> pl.DataFrame:
    """One row per (policy, suite) group holding a key, PPI++'s first, then the others."""
    n_strata = len(suites)
    pol = np.repeat(np.arange(len(names)), n_strata)
    sui = np.tile(np.arange(n_strata), len(names))
    columns: dict[str, Any] = {"policy": pl.Series(np.asarray(names, dtype=object)[pol]
                                                   if names else [], dtype=pl.String)}  # fmt: skip
    for i, col in enumerate(strata):
        columns[col] = pl.Series([suites[s][i] for s in sui], dtype=pl.String)
    columns |= {
        "estimate": est.estimate, "low": est.low, "high": est.high, "stderr": est.stderr,
        "lam": est.lam, "classical": est.classical, "classical_low": est.classical_low,
        "classical_high": est.classical_high, "judge_only": est.judge,
        "judge_only_low": est.judge_low, "judge_only_high": est.judge_high,
        "n_labelled": est.n_labelled, "n_unlabelled": est.n_unlabelled,
        "effective_n": est.effective_n, "width_ratio": est.width_ratio,
    }  # fmt: skip
    if paired:
        columns["p_value"] = est.p_value
    else:
        columns["n_judge_filled"] = filled.astype(np.int64)
    frame = pl.DataFrame(columns).with_columns(
        pl.col(pl.Float64).fill_nan(None), ci_method=pl.lit(CI_METHOD)
    )
    frame = frame.filter((pl.col("n_labelled") + pl.col("n_unlabelled")) > 0)
    order = ["estimate", "policy", *strata]
    return frame.sort(order, descending=[True] + [False] * (len(order) - 1), nulls_last=True)


def _notes(
    rates: pl.DataFrame,
    asked: str | None,
    base: str | None,
    names: list[str],
    left_out: pl.DataFrame,
) -> tuple[str, ...]:
    notes = []
    filled = int(rates["n_judge_filled"].sum())
    if filled:
        notes.append(
            f"{filled:,} key(s) have no judge grade (abstained or ungraded): the judge's mean "
            "grade of the policy in the suite stands in for it (PPI's rectifier corrects it)"
        )
    few = rates.filter(pl.col("n_labelled") < 2).height
    if few:
        notes.append(f"{few:,} row(s) have fewer than two trusted grades: no estimate")
    if asked is None and base is not None:
        notes.append(f"differences from {base!r} (the first of the two policies; baseline=)")
    elif base is None and len(names) > 2:
        notes.append("no differences: name a baseline policy (baseline=) to compare with")
    if not left_out.is_empty():
        shown = ", ".join(f"{r} ({why})" for r, why in left_out.head(3).iter_rows())
        more = f" and {left_out.height - 3:,} more" if left_out.height > 3 else ""
        notes.append(f"{left_out.height:,} run(s) left out: {shown}{more}")
    return tuple(notes)
