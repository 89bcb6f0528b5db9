"""Cost-quality Pareto fronts of stored policies, with the bootstrap's P(on the front).

:func:`pareto_runs` (``Store.pareto``) reads two metrics of the selected runs, a quality
(default ``success``) and a cost (steps, latency, a derived token cost: any metric of the
store), through the ranking's reader (:func:`~hylo_analytics.compare._rank_store.
store_values`: the errors policy, each key's epochs and a policy's runs reduced, keys within
suites), once per metric with one key coding, and hands the (policy, key) rows to
:func:`~hylo_analytics.stats.pareto.pareto_bootstrap`: each policy's two means with percentile
intervals, the front of the means and each policy's share of resamples on the front.

Directions: the quality is higher-is-better and the cost lower-is-better unless an explicit
direction, the scores (a derived cost declares ``minimize``) or the registry says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import polars as pl

from hylo_analytics._harness import Errors, check_errors
from hylo_analytics._html import text
from hylo_analytics.compare._prepare import Reducer, one_direction
from hylo_analytics.compare._rank_store import store_values
from hylo_analytics.compare.pairwise import PolicyValues
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.metrics import Direction, resolve_directions
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL, _check_level
from hylo_analytics.stats.methods import DEFAULT_SEED, Seed
from hylo_analytics.stats.pareto import (
    DEFAULT_PARETO_RESAMPLES,
    PAIRINGS,
    Pairing,
    pareto_bootstrap,
)
from hylo_analytics.store import ParquetStore, pinned

if TYPE_CHECKING:
    import altair as alt

__all__ = ["PAIRINGS", "ParetoFront", "pareto_runs"]

_RUN_COLUMNS = ("run_id", "agent_name", "agent_version", "benchmark_id", "split")
_REDUCERS = ("mean", "max", "min")
_SHOWN = 50  # rows of the HTML table
COLUMNS = ("policy", "quality", "quality_low", "quality_high", "cost", "cost_low", "cost_high",
           "on_front", "p_front", "n_keys", "n_cost_keys")  # fmt: skip


@dataclass(frozen=True)
class ParetoFront:
    """What :func:`pareto_runs` found: ``frame``, one row per policy (:data:`COLUMNS`: the
    mean ``quality`` and ``cost`` with their percentile intervals at ``level``, ``on_front``
    for the means, ``p_front`` the share of the ``n_resamples`` resamples of keys on which it
    is on the front, ``n_keys`` / ``n_cost_keys`` the keys with a valid value of each), the
    front first along its cost, then the others by ``p_front``.

    ``quality_direction`` / ``cost_direction``: what is better for each (``maximize`` /
    ``minimize``); ``pairing``: how keys were drawn (``paired``: one draw for every policy;
    ``unpaired``: each policy's own keys); ``notes``: what the front left out, in words;
    ``left_out``: the selected runs it could not hold (``run_id``, ``reason``); ``draw``: the
    chart function :meth:`chart` calls (``Store.pareto`` sets it).
    """

    frame: pl.DataFrame
    quality: str
    cost: str
    quality_direction: str
    cost_direction: str
    pairing: str
    level: float
    n_resamples: int
    seed: Seed
    notes: tuple[str, ...] = ()
    left_out: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(schema={"run_id": pl.String, "reason": pl.String})
    )
    draw: Callable[..., alt.LayerChart] | None = field(default=None, repr=False, compare=False)

    @property
    def front(self) -> pl.DataFrame:
        """The policies on the front of the means, along their cost."""
        return self.frame.filter(pl.col("on_front"))

    def chart(self, *, log_cost: bool = False, title: str | None = None) -> alt.LayerChart:
        """The cost-quality chart (:func:`~hylo_analytics.charts.pareto.pareto_intervals`);
        a result of ``Store.pareto`` carries it (the compare stage imports no chart)."""
        if self.draw is None:
            raise InputError(
                "ParetoFront.chart: this result was made without its chart; draw it with "
                "hylo_analytics.charts.pareto_intervals(front) (Store.pareto's results draw "
                "themselves)"
            )
        return self.draw(self, log_cost=log_cost, title=title)

    def __repr__(self) -> str:
        with pl.Config(tbl_rows=20, tbl_cols=12, float_precision=4):
            return (
                f"ParetoFront(quality={self.quality!r}, cost={self.cost!r}, policies="
                f"{self.frame.height}, on front={self.front.height}, pairing={self.pairing!r})"
                f"\n{self.frame}"
            )

    def _repr_html_(self) -> str:
        rows = self.frame.head(_SHOWN).select(
            "policy",
            quality=pl.format(
                "{} [{}, {}]",
                *(pl.col(c).round(4) for c in ("quality", "quality_low", "quality_high")),
            ),
            cost=pl.format(
                "{} [{}, {}]",
                *(pl.col(c).round_sig_figs(4) for c in ("cost", "cost_low", "cost_high")),
            ),
            on_front=pl.when(pl.col("on_front")).then(pl.lit("yes")).otherwise(pl.lit("")),
            p_front=pl.col("p_front").round(3),
            n_keys="n_keys",
        )
        heads = ["policy", f"{self.quality} [interval]", f"{self.cost} [interval]",
                 "on the front", "P(on the front)", "keys"]  # fmt: skip
        head = "".join(f"<th>{text(h)}</th>" for h in heads)
        body = "".join(
            "<tr>" + "".join(f"<td>{text(v)}</td>" for v in row) + "</tr>"
            for row in rows.iter_rows()
        )
        better = {"maximize": "higher is better", "minimize": "lower is better"}
        intro = (
            f"<strong>Pareto front of <code>{text(self.quality)}</code> "
            f"({better[self.quality_direction]}) against <code>{text(self.cost)}</code> "
            f"({better[self.cost_direction]})</strong> &mdash; {self.frame.height:,} policies, "
            f"{self.front.height:,} on the front of the means. {self.level:.0%} percentile "
            f"intervals and P(on the front) from {self.n_resamples:,} {self.pairing} "
            "resamples of keys within suites."
        )
        more = (
            f"<p>First {_SHOWN} of {self.frame.height:,} policies shown.</p>"
            if self.frame.height > _SHOWN
            else ""
        )
        more += "".join(f"<p>{text(note)}</p>" for note in self.notes)
        table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        return f"<div><p>{intro}</p>{table}{more}</div>"


@pinned
def pareto_runs(
    store: ParquetStore,
    runs: Sequence[str] | None = None,
    *,
    cost: str,
    quality: str = "success",
    policy: str = "agent_name",
    strata: Sequence[str] = ("benchmark_id", "split"),
    source: str | None = None,
    policies: Sequence[str] | None = None,
    directions: Mapping[str, Direction] | None = None,
    errors: Errors | None = None,
    reducer: Reducer | None = "mean",
    pairing: Pairing = "auto",
    n_resamples: int = DEFAULT_PARETO_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: Seed = DEFAULT_SEED,
) -> ParetoFront:
    """The cost-quality front of the stored policies, with each one's P(on the front).

    ``runs``: ids, unique prefixes or selectors, a selector naming every run it matches
    (default every run); ``policy`` and ``strata`` are run fields (``run_id, agent_name,
    agent_version, benchmark_id, split``): by default a policy is an agent, its mean the
    average over suites of its mean there, and keys are resampled within suites. ``cost``:
    the cost metric (``steps``, a latency, a derived ``request_cost``: see
    ``docs/statistics.md``); ``quality``: the quality metric. ``directions``: what is better
    for either (default: the scores' declaration, then the registry; else higher quality and
    lower cost). ``errors``, ``reducer``, ``source``, ``policies``: as :func:`rank_runs`.
    ``pairing``: ``auto`` (paired when every policy of a suite holds the same keys),
    ``paired`` or ``unpaired`` (see :mod:`hylo_analytics.stats.pareto`). ``n_resamples``,
    ``level``, ``seed``: the bootstrap's.
    """
    _check_level(level)
    bad = [c for c in [policy, *strata] if c not in _RUN_COLUMNS]
    if bad:
        raise InputError(f"pareto: {bad} are not run fields; use {', '.join(_RUN_COLUMNS)}")
    if reducer is not None and reducer not in _REDUCERS:
        raise InputError(f"pareto: reducer must be one of {_REDUCERS}, got {reducer!r}")
    if pairing not in PAIRINGS:
        raise InputError(f"pareto: pairing must be one of {PAIRINGS}, got {pairing!r}")
    if quality == cost:
        raise InputError(f"pareto: quality and cost are both {quality!r}; name two metrics")
    errors_arg = check_errors(errors, "pareto: errors")
    read = {}
    for metric in (quality, cost):
        try:
            read[metric] = store_values(
                store, runs, policy=policy, strata=strata, metric=metric, source=source,
                policies=policies, errors=errors_arg, reducer=reducer, keys_of=(quality, cost),
            )  # fmt: skip
        except SelectionError as exc:  # the reader is the ranking's: say whose refusal it is
            raise SelectionError(str(exc).replace("rank: ", "pareto: ", 1)) from None
    (q_values, q_declared, q_left), (c_values, c_declared, c_left) = read[quality], read[cost]
    declared = one_direction(pl.concat([q_declared, c_declared], how="vertical_relaxed"))
    dirs = resolve_directions([quality, cost], explicit=directions, declared=declared)
    q_dir = dirs.get(quality, ("maximize", None))[0]
    c_dir = dirs.get(cost, ("minimize", None))[0]
    names, rows = _rows(q_values, c_values)
    result = pareto_bootstrap(
        rows["quality"], rows["cost"], policy=rows["policy"], key=rows["key"],
        key_stratum=rows["stratum"], n_policies=len(names), pairing=pairing,
        quality_higher=q_dir == "maximize", cost_lower=c_dir == "minimize",
        n_resamples=n_resamples, level=level, seed=seed,
    )  # fmt: skip
    frame = _frame(names, result, c_dir == "minimize")
    left_out = pl.concat([q_left, c_left]).unique("run_id", keep="first", maintain_order=True)
    notes = _notes(frame, quality, cost, dirs, result.pairing, pairing, left_out)
    return ParetoFront(frame, quality, cost, q_dir, c_dir, result.pairing, level, n_resamples,
                       seed, notes, left_out)  # fmt: skip


def _rows(
    q_values: PolicyValues, c_values: PolicyValues
) -> tuple[list[str], dict[str, npt.NDArray[Any]]]:
    """One row per (policy, key) either metric holds, the other's value NaN where it has
    none: keys lined up by (suite, key code), policies by name (every policy of either)."""
    names = sorted(set(q_values.policies) | set(c_values.policies))
    code = {n: i for i, n in enumerate(names)}
    parts = []
    for values in (q_values, c_values):
        recode = np.array([code[p] for p in values.policies], dtype=np.int64)
        parts.append(
            (
                recode[values.row_policy],
                values.key_stratum[values.row_key],
                values.key_code[values.row_key],
                values.row_value,
            )
        )
    n_codes = max(int(p[2].max(initial=-1)) for p in parts) + 1
    ident = [(pol * len(q_values.strata) + s) * n_codes + k for pol, s, k, _ in parts]
    cells, back = np.unique(np.concatenate(ident), return_inverse=True)
    back = back.ravel()
    out = {"quality": np.full(len(cells), np.nan), "cost": np.full(len(cells), np.nan)}
    out["quality"][back[: len(ident[0])]] = parts[0][3]
    out["cost"][back[len(ident[0]) :]] = parts[1][3]
    key_ids = cells % (len(q_values.strata) * n_codes)  # (suite, key code): the key
    uniq_keys, key = np.unique(key_ids, return_inverse=True)
    out["policy"] = cells // (len(q_values.strata) * n_codes)
    out["key"] = key.ravel()
    out["stratum"] = uniq_keys // n_codes
    return names, out


def _frame(names: list[str], r: Any, cheap_first: bool) -> pl.DataFrame:
    columns = {"policy": names, **{c: getattr(r, c) for c in COLUMNS[1:9]},
               "n_keys": r.n_quality, "n_cost_keys": r.n_cost}  # fmt: skip
    frame = pl.DataFrame(columns, schema_overrides={"policy": pl.String}).with_columns(
        pl.col(pl.Float64).fill_nan(None)
    )
    along = pl.when(pl.col("on_front")).then(pl.col("cost"))
    return (
        frame.with_columns(_along=along if cheap_first else -along)
        .sort(["on_front", "_along", "p_front", "cost", "policy"],
              descending=[True, False, True, not cheap_first, False], nulls_last=True)
        .drop("_along")
    )  # fmt: skip


def _notes(
    frame: pl.DataFrame,
    quality: str,
    cost: str,
    dirs: Mapping[str, tuple[str, str | None]],
    used: str,
    asked: str,
    left_out: pl.DataFrame,
) -> tuple[str, ...]:
    notes = []
    for metric, said in ((quality, "higher is better"), (cost, "lower is better")):
        if metric not in dirs:
            notes.append(f"{metric!r} declares no direction: read as {said} (directions=)")
    for col, metric in (("quality", quality), ("cost", cost)):
        lacking = frame.filter(pl.col(col).is_null())["policy"].to_list()
        if lacking:
            shown = ", ".join(lacking[:3]) + (
                f" and {len(lacking) - 3:,} more" if len(lacking) > 3 else ""
            )
            notes.append(
                f"{len(lacking):,} polic(ies) ({shown}) have no valid {metric!r}: never on the front"
            )
    if asked == "auto" and used == "unpaired":
        notes.append(
            "the policies of a suite hold different keys: each policy's keys were resampled "
            "on their own (unpaired); pairing='paired' draws one set of keys for all"
        )
    if not left_out.is_empty():
        shown = ", ".join(f"{r} ({why})" for r, why in left_out.head(3).iter_rows())
        more = f" and {left_out.height - 3:,} more" if left_out.height > 3 else ""
        notes.append(f"{left_out.height:,} run(s) left out: {shown}{more}")
    return tuple(notes)
