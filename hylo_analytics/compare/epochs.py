"""How many epochs an interval needs: the variance of a paired difference, split.

:func:`epochs_plan` (``Store.epochs_plan``) answers, for a candidate and a parent that share
items sampled several times each (epochs of a key, or the seeds of a task: ``item=``), "is
my interval wide because the epochs are noisy, or because the items differ, and what would
halve it?". Each side's samples of an item are read by the aggregate's rows
(:func:`~hylo_analytics.aggregate.repeated.item_samples`: the one resolution, the errors
policy applied), the split is :func:`~hylo_analytics.stats.repeated.variance_split`: the
variance of an item's difference of means is its between-item part (how the true difference
varies over items) plus its within-item part (the epochs' sampling noise, ``s^2 / n`` per
side). More epochs shrink only the within part, more items both. Without a parent, the split
is of the candidate's own mean (the one-way random-effects ANOVA).

The interval the widths describe is the Wald interval of the mean paired difference over
items (``2 z sd / sqrt(items)``; ``compare``'s own intervals differ in form, not in how they
shrink); the plan is its ratios: the factor on the epochs that halves it, or inf when the between
part is over a quarter of the total (then only items help: four times as many).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from hylo_analytics._harness import Errors
from hylo_analytics.aggregate.repeated import item_samples
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL
from hylo_analytics.stats.repeated import VarianceSplit, epochs_to_halve, variance_split, width_at

if TYPE_CHECKING:
    from hylo_analytics.metrics import MetricRegistry
    from hylo_analytics.store import ParquetStore

__all__ = ["PLAN_COLUMNS", "epochs_plan"]

PLAN_COLUMNS = (
    "candidate", "parent", "metric", "item", "n_items", "n_unpaired", "epochs", "estimate",
    "var_total", "var_within", "var_between", "within_share", "ci_width", "ci_level",
    "floor_width", "epochs_factor", "epochs_to_halve", "width_at_halving_epochs",
    "items_to_halve", "n_single", "errors", "note",
)  # fmt: skip

_TYPES: dict[str, type[pl.DataType]] = {
    **dict.fromkeys(("n_items", "n_unpaired", "epochs_to_halve", "items_to_halve", "n_single"),
                    pl.Int64),
    **dict.fromkeys(("candidate", "parent", "metric", "item", "errors", "note"), pl.String),
}  # fmt: skip


def epochs_plan(
    store: ParquetStore,
    candidate: str | Sequence[str],
    parent: str | Sequence[str] | None = None,
    *,
    metric: str = "success",
    item: str = "key",
    errors: Errors | None = None,
    level: float = DEFAULT_LEVEL,
    source: str | Sequence[str] | None = None,
    registry: MetricRegistry | None = None,
) -> pl.DataFrame:
    """The within / between split of the candidate's paired difference to the parent over
    their shared items, and the epochs per item (and the items) that would halve its
    interval; one row.

    ``candidate``, ``parent``: ids, prefixes or selectors; a selector's runs are one side,
    their samples of an item pooled (a policy's runs of a suite). ``parent=None``: the split
    of the candidate's mean. ``item``: ``key`` (default) or ``task_id`` (a task's seeds and
    epochs are its samples). Columns (:data:`PLAN_COLUMNS`): ``n_items`` shared items with a
    valid sample on both sides, ``n_unpaired`` items of one side only (left out),
    ``epochs`` the mean valid samples per item and side, ``estimate`` the mean difference,
    ``var_total`` / ``var_within`` / ``var_between`` the variance of an item's difference and
    its parts (between floored at 0), ``within_share``, ``ci_width`` (the interval now, at
    ``ci_level``), ``floor_width`` (with endless epochs), ``epochs_factor`` and
    ``epochs_to_halve`` (null where no number of epochs can: then ``note`` says why),
    ``width_at_halving_epochs``, ``items_to_halve`` (four times the items), ``n_single``
    (items with one sample on a side: that side's pooled within variance stands in).
    """
    from hylo_analytics.store import unwrap_store

    store = unwrap_store(store)
    cand_ids = _side(store, candidate, "candidate")
    par_ids = None if parent is None else _side(store, parent, "parent")
    if par_ids is not None and set(cand_ids) & set(par_ids):
        both = sorted(set(cand_ids) & set(par_ids))
        raise InputError(f"epochs_plan: run(s) {both[:5]} are on both sides; a side is its own")

    def read(ids: list[str], name: str) -> tuple[pl.DataFrame, list[str], str]:
        got, items, read_as = item_samples(store, by=[], metric=name, item=item, runs=ids,
                                           errors=errors, source=source, registry=registry,
                                           caller="epochs_plan")  # fmt: skip
        return got.filter(pl.col("n_valid") > 0), items, read_as

    a, items, metric = read(cand_ids, metric)
    if par_ids is None:
        shared, unpaired = a, 0
        split = variance_split(np.zeros(a.height, int), a["mean"], a["var"], a["n_valid"],
                               level=level)  # fmt: skip
    else:
        b = read(par_ids, metric)[0]
        shared = a.join(b, on=items, how="inner", nulls_equal=True, suffix="_b")
        unpaired = a.height + b.height - 2 * shared.height
        if shared.is_empty():
            raise SelectionError(
                f"epochs_plan: the candidate and the parent share no {item} with a valid "
                f"{metric!r} sample ({a.height:,} and {b.height:,} items)"
            )
        split = variance_split(
            np.zeros(shared.height, int), shared["mean"], shared["var"], shared["n_valid"],
            shared["mean_b"], shared["var_b"], shared["n_valid_b"], level=level,
        )  # fmt: skip
    errors_of = sorted(set(shared["errors"].drop_nulls().to_list())
                       | set(shared.get_column("errors_b", default=shared["errors"])
                             .drop_nulls().to_list()))  # fmt: skip
    return _row(split, candidate, parent, metric, item, unpaired, ",".join(errors_of) or None)


def _side(store: ParquetStore, spec: str | Sequence[str], name: str) -> list[str]:
    specs = [spec] if isinstance(spec, str) else list(spec)
    if not specs:
        raise SelectionError(f"epochs_plan: no {name} runs given")
    return store.select_runs(specs)


def _row(
    split: VarianceSplit,
    candidate: str | Sequence[str],
    parent: str | Sequence[str] | None,
    metric: str,
    item: str,
    unpaired: int,
    errors: str | None,
) -> pl.DataFrame:
    """The plan as one row, with the note that says what its nulls mean."""
    factor, count = epochs_to_halve(split)
    f, e = float(factor[0]), float(count[0])
    m = int(split.n_items[0])
    finite = bool(np.isfinite(f))
    row = {
        "candidate": _label(candidate), "parent": None if parent is None else _label(parent),
        "metric": metric, "item": item, "n_items": m, "n_unpaired": unpaired,
        "epochs": float(split.epochs[0]), "estimate": float(split.estimate[0]),
        "var_total": float(split.var_total[0]), "var_within": float(split.var_within[0]),
        "var_between": float(split.var_between[0]),
        "within_share": float(split.within_share[0]), "ci_width": float(split.ci_width[0]),
        "ci_level": split.level, "floor_width": float(split.floor_width[0]),
        "epochs_factor": f if finite else None, "epochs_to_halve": int(e) if finite else None,
        "width_at_halving_epochs": float(width_at(split, e)[0]) if finite else None,
        "items_to_halve": 4 * m, "n_single": int(split.n_single[0]), "errors": errors,
        "note": _note(split, f, m) or None,
    }  # fmt: skip
    schema = {c: _TYPES.get(c, pl.Float64) for c in PLAN_COLUMNS}
    return pl.DataFrame([row], schema=schema).with_columns(pl.col(pl.Float64).fill_nan(None))


def _label(spec: str | Sequence[str]) -> str:
    return spec if isinstance(spec, str) else ", ".join(spec)


def _note(split: VarianceSplit, factor: float, m: int) -> str:
    notes = []
    if m < 2:
        notes.append(f"{m} shared item(s): a variance needs two")
    elif not np.isfinite(split.var_within[0]):
        notes.append(
            "one sample per item on a side: the within part (the epochs' noise) cannot be "
            "estimated; run at least two epochs of some items"
        )
    elif np.isinf(factor):
        notes.append(
            f"the between-item part is {1 - split.within_share[0]:.0%} of the variance (over "
            f"a quarter): no number of epochs halves the interval (it narrows to "
            f"{split.floor_width[0]:.3g} at most); {4 * m:,} items would"
        )
    if split.var_between_raw[0] < 0:
        notes.append(
            f"the between part's estimate was negative ({split.var_between_raw[0]:.3g}; the "
            "epochs' noise alone explains the spread), taken as 0"
        )
    if split.n_single[0]:
        notes.append(
            f"{int(split.n_single[0]):,} item(s) with one sample on a side took that side's "
            "pooled within variance"
        )
    return "; ".join(notes)
