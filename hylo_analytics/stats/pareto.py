"""Cost-quality Pareto fronts with their uncertainty: the front, and P(on the front) by bootstrap.

Policies are points (mean quality, mean cost); the **front** is the non-dominated set: a
policy is dominated when another is at least as good on both and strictly better on one.
:func:`pareto_front` finds it by sorting on cost and a running maximum of quality, for every
row of a (resamples x policies) array at once (O(B N log N), no loop over policies).

Ties: two policies at the same point do not dominate each other, so both are on the front (or
both off it); at equal cost only the best quality can be on it, at equal quality only the
cheapest. A policy whose quality or cost is NaN is never on the front and dominates nothing.

:func:`pareto_bootstrap` resamples keys with replacement within each stratum (suite) and
recomputes every policy's two means and the front on each resample: ``p_front`` is the share
of resamples in which the policy is on the front, the intervals the percentile intervals of
its two means. Two ways to draw (``pairing``):

- ``paired``: one draw of keys per resample for every policy. Where the policies ran the same
  keys this is the bootstrap of the paired design: policies that fail the same hard keys move
  together, so a front of two close policies is not split by noise both share;
- ``unpaired``: each policy's own keys drawn on their own, as independent samples (policies
  that ran different keys: a published "k of n", suites of their own).

``auto`` (the default) is ``paired`` when every stratum's policies hold the same keys
(:func:`shares_keys`), else ``unpaired``. Either way a key's quality and cost are drawn
together, so a policy's cost moves with its own quality. A policy's mean is the average over
the strata it has values in of its mean there (as a ranking's mean), over the keys whose value
is valid (NaN: abstained).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from hylo_analytics.errors import InputError
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL, _check_level
from hylo_analytics.stats.methods import DEFAULT_SEED, Seed

__all__ = [
    "DEFAULT_PARETO_RESAMPLES",
    "PAIRINGS",
    "Pairing",
    "ParetoBootstrap",
    "dominated_by",
    "key_resamples",
    "pareto_bootstrap",
    "pareto_front",
    "policy_resamples",
    "shares_keys",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Pairing = Literal["auto", "paired", "unpaired"]
PAIRINGS: tuple[str, ...] = ("auto", "paired", "unpaired")
#: A front's resamples: P(on the front) to about +-0.03 (its Monte-Carlo sd is at most 0.016).
DEFAULT_PARETO_RESAMPLES = 1_000
_CHUNK_CELLS = 2**23  # resamples x max(keys, rows, policies) of one chunk (64 MB of float64)
_DENSE_CELLS = 2**26  # the most keys x policies the paired draw lays out (512 MB)


def pareto_front(quality: npt.ArrayLike, cost: npt.ArrayLike) -> BoolArray:
    """Whether each policy (last axis) is on the front: higher ``quality`` and lower ``cost``
    are better (negate a metric to turn its direction). Leading axes are independent rows
    (one per resample); see the module for ties and NaN.

    Sorted by cost (quality descending within a cost), a policy is on the front iff it is the
    first of its cost (the best quality there) and its quality beats the running maximum of
    every strictly cheaper policy.
    """
    q, c = np.broadcast_arrays(np.asarray(quality, np.float64), np.asarray(cost, np.float64))
    if q.ndim == 0:
        return np.asarray(~(np.isnan(q) | np.isnan(c)), dtype=bool)
    if q.shape[-1] == 0:
        return np.zeros(q.shape, dtype=bool)
    valid = ~(np.isnan(q) | np.isnan(c))
    qs, cs = np.where(valid, q, -np.inf), np.where(valid, c, np.inf)
    order = np.lexsort((-qs, cs, ~valid), axis=-1)  # valid first, by cost, best quality first
    qo, co = np.take_along_axis(qs, order, -1), np.take_along_axis(cs, order, -1)
    pos = np.broadcast_to(np.arange(q.shape[-1]), q.shape)
    new = np.ones(q.shape, dtype=bool)
    new[..., 1:] = co[..., 1:] != co[..., :-1]
    start = np.maximum.accumulate(np.where(new, pos, 0), axis=-1)  # first of each cost
    best = np.maximum.accumulate(qo, axis=-1)
    before = np.concatenate([np.full((*q.shape[:-1], 1), -np.inf), best[..., :-1]], axis=-1)
    cheaper = np.take_along_axis(before, start, -1)  # best quality of the strictly cheaper
    on = (qo > cheaper) & (qo == np.take_along_axis(qo, start, -1))
    out = np.empty(q.shape, dtype=bool)
    np.put_along_axis(out, order, on, -1)
    return np.asarray(out & valid, dtype=bool)


def dominated_by(quality: npt.ArrayLike, cost: npt.ArrayLike) -> IntArray:
    """How many policies dominate each one (0: on the front, unless NaN), by the O(N^2)
    definition itself: for a table of a few policies and for checks, not for resamples."""
    q, c = np.asarray(quality, np.float64), np.asarray(cost, np.float64)
    qi, qj, ci, cj = q[:, None], q[None, :], c[:, None], c[None, :]
    dom = (qj >= qi) & (cj <= ci) & ((qj > qi) | (cj < ci))  # j dominates i (NaN: never)
    return np.asarray(dom.sum(axis=1), dtype=np.int64)


@dataclass(frozen=True)
class ParetoBootstrap:
    """Per policy: the two means (``quality``, ``cost``) with percentile intervals at
    ``level``, ``on_front`` (of the means), ``p_front`` (share of resamples on the front) and
    the valid keys behind each mean (``n_quality``, ``n_cost``); ``pairing``: the draw used."""

    quality: FloatArray
    quality_low: FloatArray
    quality_high: FloatArray
    cost: FloatArray
    cost_low: FloatArray
    cost_high: FloatArray
    on_front: BoolArray
    p_front: FloatArray
    n_quality: IntArray
    n_cost: IntArray
    pairing: str
    level: float
    n_resamples: int


@dataclass(frozen=True)
class _Rows:
    """The rows (one per policy and key it holds), ordered by (stratum, policy, key): each
    (stratum, policy) group contiguous, so a group's sums are one ``reduceat``."""

    policy: IntArray
    key: IntArray
    quality: FloatArray
    cost: FloatArray
    strata: IntArray  # per key
    n_policies: int
    group_start: IntArray  # first row of each (stratum, policy) group
    group_policy: IntArray

    @classmethod
    def of(
        cls,
        policy: npt.ArrayLike,
        key: npt.ArrayLike,
        quality: npt.ArrayLike,
        cost: npt.ArrayLike,
        key_stratum: npt.ArrayLike | None,
        n_policies: int | None,
    ) -> _Rows:
        p, k = np.asarray(policy, np.int64), np.asarray(key, np.int64)
        q, c = np.asarray(quality, np.float64), np.asarray(cost, np.float64)
        if not p.shape == k.shape == q.shape == c.shape or p.ndim != 1:
            raise InputError(
                f"pareto: policy, key, quality and cost must be one value per row, got shapes "
                f"{p.shape}, {k.shape}, {q.shape}, {c.shape}"
            )
        n_keys = int(k.max(initial=-1)) + 1
        strata = _strata(key_stratum, n_keys)
        n = int(p.max(initial=-1)) + 1 if n_policies is None else n_policies
        if len(p) and (p.min() < 0 or p.max() >= n or k.min() < 0):
            raise InputError(f"pareto: policy codes must be in [0, {n}) and key codes >= 0")
        if len(np.unique(k * max(n, 1) + p)) != len(p):
            raise InputError("pareto: a policy has two rows of one key; reduce them first")
        order = np.lexsort((k, p, strata[k]))
        p, k, q, c = p[order], k[order], q[order], c[order]
        group = strata[k] * max(n, 1) + p
        start = np.flatnonzero(np.diff(group, prepend=-1) != 0) if len(group) else group
        return cls(p, k, q, c, strata, n, start.astype(np.int64), p[start])


def pareto_bootstrap(
    quality: npt.ArrayLike,
    cost: npt.ArrayLike,
    *,
    policy: npt.ArrayLike,
    key: npt.ArrayLike,
    key_stratum: npt.ArrayLike | None = None,
    n_policies: int | None = None,
    pairing: Pairing = "auto",
    quality_higher: bool = True,
    cost_lower: bool = True,
    n_resamples: int = DEFAULT_PARETO_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: Seed = DEFAULT_SEED,
) -> ParetoBootstrap:
    """The front of the policies' mean ``quality`` and ``cost`` and its bootstrap over keys.

    One row per (``policy``, ``key``) a policy holds (codes from 0; NaN where its value of a
    metric is not valid); ``key_stratum``: each key's stratum (default one), keys are
    resampled within it; ``n_policies``: default the largest code + 1 (a policy without rows
    has no mean). ``quality_higher`` / ``cost_lower``: the metrics' directions (the front is
    taken on the oriented means; the means are reported as they are). ``pairing``: see the
    module. Each chunk of resamples is one matrix product per stratum (paired) or one
    ``reduceat`` over the rows (unpaired); a policy with no valid key drawn in a resample has
    no mean there (NaN: off that front, left out of its interval).
    """
    _check_level(level)
    if n_resamples < 1:
        raise InputError(f"pareto: n_resamples must be >= 1, got {n_resamples}")
    if pairing not in PAIRINGS:
        raise InputError(f"pareto: pairing must be one of {PAIRINGS}, got {pairing!r}")
    rows = _Rows.of(policy, key, quality, cost, key_stratum, n_policies)
    if pairing == "auto":
        pairing = "paired" if shares_keys(rows.policy, rows.key, rows.strata) else "unpaired"
    sign = (1.0 if quality_higher else -1.0, 1.0 if cost_lower else -1.0)
    point = _unpaired_means(rows, np.arange(len(rows.key))[None, :])
    means = np.empty((2, n_resamples, rows.n_policies))
    hits = np.zeros(rows.n_policies)
    b0 = 0
    if pairing == "paired":
        dense = _dense(rows)
        for drawn in key_resamples(rows.strata, n_resamples, seed, width=rows.n_policies):
            b1 = b0 + len(drawn)
            means[:, b0:b1] = _paired_means(dense, rows.strata, drawn)
            hits += pareto_front(sign[0] * means[0, b0:b1], sign[1] * means[1, b0:b1]).sum(0)
            b0 = b1
    else:
        for positions in policy_resamples(rows.group_start, len(rows.key), n_resamples, seed):
            b1 = b0 + len(positions)
            means[:, b0:b1] = _unpaired_means(rows, positions)
            hits += pareto_front(sign[0] * means[0, b0:b1], sign[1] * means[1, b0:b1]).sum(0)
            b0 = b1
    (ql, qh), (cl, ch) = (_percentile(m, level) for m in means)
    n_valid = [np.bincount(rows.policy, weights=~np.isnan(v), minlength=rows.n_policies)
               for v in (rows.quality, rows.cost)]  # fmt: skip
    return ParetoBootstrap(
        quality=point[0, 0], quality_low=ql, quality_high=qh,
        cost=point[1, 0], cost_low=cl, cost_high=ch,
        on_front=pareto_front(sign[0] * point[0, 0], sign[1] * point[1, 0]),
        p_front=hits / n_resamples,
        n_quality=n_valid[0].astype(np.int64), n_cost=n_valid[1].astype(np.int64),
        pairing=pairing, level=level, n_resamples=n_resamples,
    )  # fmt: skip


def shares_keys(policy: npt.ArrayLike, key: npt.ArrayLike, key_stratum: npt.ArrayLike) -> bool:
    """Whether, in every stratum, every policy holding keys there holds all of them (the keys
    any policy holds there): the design the paired draw is the bootstrap of. One row per
    (policy, key)."""
    p, k = np.asarray(policy, np.int64), np.asarray(key, np.int64)
    strata = np.asarray(key_stratum, np.int64)
    span = int(p.max(initial=-1)) + 1
    per_stratum = np.bincount(strata[np.unique(k)], minlength=int(strata.max(initial=-1)) + 1)
    cell, held = np.unique(strata[k] * span + p, return_counts=True)  # rows per (stratum, policy)
    return bool(np.all(held == per_stratum[cell // max(span, 1)]))


def key_resamples(
    strata: IntArray, n_resamples: int, seed: Seed, *, width: int = 1
) -> Iterator[IntArray]:
    """The paired draws: chunks of (resamples x keys) drawn key codes, every stratum's keys
    drawn with replacement, as many as it holds, stratum after stratum along a resample
    (``width``: the policies each resample's means span, which sizes the chunks). One
    generator seeded by ``seed`` draws ``rng.integers(0, n_s, size=(b, n_s))`` per chunk
    and stratum in turn; the keys a stratum holds are those ``strata`` codes it."""
    rng = np.random.default_rng(seed)
    n_keys = len(strata)
    keys = [np.flatnonzero(strata == s) for s in range(int(strata.max(initial=-1)) + 1)]
    keys = [k for k in keys if len(k)]
    step = max(1, _CHUNK_CELLS // max(n_keys, width, 1))
    for b0 in range(0, n_resamples, step):
        b = min(step, n_resamples - b0)
        parts = [k[rng.integers(0, len(k), size=(b, len(k)))] for k in keys]
        yield np.concatenate([np.zeros((b, 0), np.int64), *parts], axis=1)


def policy_resamples(
    group_start: IntArray, n_rows: int, n_resamples: int, seed: Seed
) -> Iterator[npt.NDArray[np.int32]]:
    """The unpaired draws: chunks of (resamples x rows) drawn row positions, each group of
    rows (a policy's keys in one stratum: ``group_start``, rows contiguous) drawn with
    replacement among its own rows, as many as it holds, independently of every other group.
    One generator seeded by ``seed`` draws ``rng.integers(0, n_g)`` for every position of a
    chunk at once (``size=(b, n_rows)``, the bound of each position its group's size)."""
    if n_rows >= 2**31:
        raise InputError(f"pareto: {n_rows:,} rows are more than an unpaired draw indexes")
    rng = np.random.default_rng(seed)
    sizes = np.diff(np.append(group_start, n_rows))
    # int32 draws: half the time and memory of int64 ones
    bound = np.repeat(sizes, sizes).astype(np.int32)
    first = np.repeat(group_start, sizes).astype(np.int32)
    step = max(1, _CHUNK_CELLS // max(n_rows, 1))
    for b0 in range(0, n_resamples, step):
        b = min(step, n_resamples - b0)
        drawn: npt.NDArray[np.int32] = rng.integers(0, bound, size=(b, n_rows), dtype=np.int32)
        yield first + drawn


def _dense(rows: _Rows) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(keys x policies) quality and cost with NaN as 0, and where each is valid (as 0/1)."""
    n_keys = len(rows.strata)
    if n_keys * rows.n_policies > _DENSE_CELLS:
        raise InputError(
            f"pareto: a paired draw of {n_keys:,} keys x {rows.n_policies:,} policies lays out "
            f"{n_keys * rows.n_policies:,} cells (at most {_DENSE_CELLS:,}); these policies "
            "hold different keys: draw them unpaired (pairing='unpaired')"
        )
    out = []
    for v in (rows.quality, rows.cost):
        ok = ~np.isnan(v)
        value, valid = np.zeros((n_keys, rows.n_policies)), np.zeros((n_keys, rows.n_policies))
        value[rows.key, rows.policy] = np.where(ok, v, 0.0)
        valid[rows.key, rows.policy] = ok
        out += [value, valid]
    return out[0], out[1], out[2], out[3]


def _paired_means(
    dense: tuple[FloatArray, FloatArray, FloatArray, FloatArray],
    strata: IntArray,
    drawn: IntArray,
) -> FloatArray:
    """(2, resamples, policies): each policy's mean quality and cost over the drawn keys,
    as count-weighted sums (one product per stratum and metric)."""
    b, n_keys = len(drawn), len(strata)
    flat = (np.arange(b)[:, None] * n_keys + drawn).ravel()
    weights = np.bincount(flat, minlength=b * n_keys).reshape(b, n_keys).astype(np.float64)
    out = np.empty((2, b, dense[0].shape[1]))
    for i in range(2):
        value, valid = dense[2 * i], dense[2 * i + 1]
        total, held = np.zeros(out.shape[1:]), np.zeros(out.shape[1:])
        for s in range(int(strata.max(initial=-1)) + 1):  # a handful of suites
            keys = np.flatnonzero(strata == s)
            w, ok = weights[:, keys], valid[keys]
            sums = w @ value[keys]
            full = ok.all(axis=0)  # a policy valid on every key: its count is the draw's size
            counts = np.where(full, w.sum(axis=1)[:, None], 0.0)
            if not full.all():
                counts[:, ~full] = w @ ok[:, ~full]
            has = counts > 0
            total += np.where(has, sums / np.where(has, counts, 1.0), 0.0)
            held += has
        with np.errstate(invalid="ignore", divide="ignore"):
            out[i] = np.where(held > 0, total / np.maximum(held, 1), np.nan)
    return out


def _unpaired_means(rows: _Rows, drawn: npt.NDArray[np.integer[Any]]) -> FloatArray:
    """(2, resamples, policies): each policy's mean quality and cost over the drawn rows
    (``drawn``: row positions, each within its group), per group one ``reduceat``."""
    out = np.empty((2, len(drawn), rows.n_policies))
    sizes = np.diff(np.append(rows.group_start, len(rows.key))).astype(np.float64)
    for i, v in enumerate((rows.quality, rows.cost)):
        ok = ~np.isnan(v)
        sums = _group_sums(np.where(ok, v, 0.0)[drawn], rows.group_start)
        counts = (
            np.broadcast_to(sizes, sums.shape)  # every value valid: a group's count is its size
            if ok.all()
            else _group_sums(ok.astype(np.float64)[drawn], rows.group_start)
        )
        has = counts > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            group_mean = np.where(has, sums / np.where(has, counts, 1.0), 0.0)
        total = np.zeros((len(drawn), rows.n_policies))
        held = np.zeros((len(drawn), rows.n_policies))
        # a policy's groups are its strata: add each group's mean into its policy's column
        np.add.at(total.T, rows.group_policy, group_mean.T)
        np.add.at(held.T, rows.group_policy, has.T.astype(np.float64))
        with np.errstate(invalid="ignore", divide="ignore"):
            out[i] = np.where(held > 0, total / np.maximum(held, 1), np.nan)
    return out


def _group_sums(values: FloatArray, starts: IntArray) -> FloatArray:
    if values.shape[1] == 0:
        return np.zeros((len(values), 0))
    return np.add.reduceat(values, starts, axis=1)


def _strata(key_stratum: npt.ArrayLike | None, n_keys: int) -> IntArray:
    if key_stratum is None:
        return np.zeros(n_keys, dtype=np.int64)
    s = np.asarray(key_stratum, np.int64)
    if s.ndim != 1 or len(s) < n_keys or (len(s) and s.min() < 0):
        raise InputError(
            f"pareto: key_stratum must hold a code >= 0 for each of the {n_keys} keys, got "
            f"shape {s.shape}"
        )
    return s


def _percentile(resampled: FloatArray, level: float) -> tuple[FloatArray, FloatArray]:
    """Percentile bounds over resamples (axis 0), the resamples without a mean left out."""
    tail = (1 - level) / 2
    if not np.isnan(resampled).any():
        lo, hi = np.quantile(resampled, [tail, 1 - tail], axis=0)
        return np.asarray(lo), np.asarray(hi)
    bounds = np.full((2, resampled.shape[1]), np.nan)
    some = ~np.isnan(resampled).all(axis=0)
    if some.any():
        bounds[:, some] = np.nanquantile(resampled[:, some], [tail, 1 - tail], axis=0)
    return bounds[0], bounds[1]
