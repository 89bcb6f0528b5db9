"""Repeated samples of one item: pass@k and pass^k curves, and the within / between split.

An **item** is what a benchmark samples from its population (a key ``<task_id>#<seed>``, or a
task with several seeds); a **sample** is one episode of it (an epoch). With ``n`` samples of
an item of which ``c`` succeeded:

- pass@k, the chance that at least one of ``k`` samples drawn without replacement succeeds,
  is estimated without bias by ``1 - C(n - c, k) / C(n, k)`` (Chen et al. 2021, "Evaluating
  large language models trained on code"; ``1 - c/n`` to the power ``k`` is biased);
- pass^k, the chance that all ``k`` succeed, by ``C(c, k) / C(n, k)`` (Yao et al. 2024,
  tau-bench): the reliability a user meets on every try.

Both are products of ``k`` ratios (:func:`pass_hat`; pass@k is one minus pass^k of the
failures), never factorials, so they hold to the last digit at any ``n``. A curve's point is
the mean over the items having at least ``k`` samples; an item with fewer is left out of that
``k`` and counted (``n_items_short``), never silently. Its interval is over items
(:func:`pass_curves`): the items are the population, and an item's own estimate carries its
sampling noise, so the spread of the items' estimates covers both parts.

**The variance of a paired difference** of two runs on shared items (:func:`variance_split`)
follows the one-way random-effects model (the law of total variance): an item's difference of
means ``d_i = delta_i + e_i``, where ``delta_i`` is the item's true difference and ``e_i`` the
epochs' sampling noise, of variance ``s_a^2 / n_a + s_b^2 / n_b``. The variance of ``d_i``
over items is the between part ``var(delta)`` plus the within part ``E[s^2 / n]``; the mean's
variance is that over the items. More epochs shrink only the within part (as 1 / epochs); more
items shrink both (as 1 / items). Halving an interval's width needs a quarter of its variance:
four times the items always, more epochs only while the between part is under a quarter of
the total (past it, no number of epochs halves it: :func:`epochs_to_halve` says inf).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from hylo_analytics.errors import InputError
from hylo_analytics.stats.bootstrap import _row_quantiles
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL, _check_level, z_value
from hylo_analytics.stats.interval import mean_interval
from hylo_analytics.stats.methods import DEFAULT_RESAMPLES, DEFAULT_SEED, Seed

__all__ = [
    "CURVE_CI_METHODS",
    "CURVE_METHODS",
    "CurveMethod",
    "PassCurves",
    "VarianceSplit",
    "epochs_to_halve",
    "pass_at",
    "pass_curves",
    "pass_hat",
    "variance_split",
    "width_at",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
ArrayLike = npt.ArrayLike

CurveMethod = Literal["wilson", "normal", "percentile"]
CURVE_METHODS: tuple[str, ...] = ("wilson", "normal", "percentile")
#: what the ``ci_method`` column says of each method: every one is over items
CURVE_CI_METHODS = {
    "wilson": "wilson, effective n (over items)",
    "normal": "normal (over items)",
    "percentile": "percentile bootstrap (over items)",
}


def pass_hat(n: ArrayLike, c: ArrayLike, k: ArrayLike) -> FloatArray:
    """pass^k of each item: ``C(c, k) / C(n, k)`` as ``prod_{i<k} (c - i) / (n - i)``.

    ``n`` samples, ``c`` successes, ``k`` draws (broadcast together). NaN where ``n < k``
    (undefined: too few samples); 0 where ``c < k``. Computed once per distinct ``(n, c, k)``:
    a million items of five epochs are a handful of products.
    """
    nn, cc, kk = (np.asarray(v) for v in np.broadcast_arrays(n, c, k))
    shape = nn.shape
    nn, cc, kk = (np.rint(v).astype(np.int64).ravel() for v in (nn, cc, kk))
    if np.any(kk < 1) or np.any(cc < 0) or np.any(cc > nn):
        raise InputError("pass_hat: expects k >= 1 and 0 <= c <= n")
    if nn.size == 0:
        return np.zeros(shape)
    un, uc, uk, back = _distinct(nn, cc, kk)
    i = np.arange(int(uk.max()))
    top, bottom = uc[:, None] - i, un[:, None] - i
    factors = np.where(i < uk[:, None], np.maximum(top, 0) / np.where(bottom > 0, bottom, 1), 1.0)
    out = np.where(uk <= un, factors.prod(axis=1), np.nan)
    return np.asarray(out[back].reshape(shape), dtype=np.float64)


def _distinct(*columns: IntArray) -> tuple[IntArray, ...]:
    """The distinct rows of non-negative integer ``columns`` (each column, in the order of
    the rows' codes) and each row's index among them: one integer code per row and a 1-D
    ``unique`` (``unique(axis=1)`` sorts a million rows ten times slower)."""
    code = np.zeros(len(columns[0]), dtype=np.int64)
    bases = [int(col.max(initial=0)) + 1 for col in columns]
    if np.prod([float(b) for b in bases]) >= 2**62:
        raise InputError("pass_hat: n, c and k too large to count")
    for col, base in zip(columns, bases, strict=True):
        code = code * base + col
    found, back = np.unique(code, return_inverse=True)
    out = []
    for base in reversed(bases):
        out.append(found % base)
        found = found // base
    return (*reversed(out), back.ravel().astype(np.int64))


def pass_at(n: ArrayLike, c: ArrayLike, k: ArrayLike) -> FloatArray:
    """The unbiased pass@k of each item: ``1 - C(n - c, k) / C(n, k)`` (NaN where ``n < k``)."""
    nn = np.asarray(n)
    return 1.0 - pass_hat(nn, nn - np.asarray(c), k)


@dataclass(frozen=True)
class PassCurves:
    """pass@k and pass^k per group and ``k``: one entry per point, groups in order, ``k``
    ascending within each. ``n_items``: the items with at least ``k`` samples (the mean's);
    ``n_items_short``: those with fewer, left out of that ``k``; ``n_samples``: the samples
    of the items used. Bounds are NaN where fewer than two items have ``k`` samples;
    ``ci_method`` names the interval."""

    group: IntArray
    k: IntArray
    pass_at_k: FloatArray
    pass_at_k_low: FloatArray
    pass_at_k_high: FloatArray
    pass_hat_k: FloatArray
    pass_hat_k_low: FloatArray
    pass_hat_k_high: FloatArray
    n_items: IntArray
    n_items_short: IntArray
    n_samples: IntArray
    ci_method: str


def pass_curves(
    n: ArrayLike,
    c: ArrayLike,
    group: ArrayLike,
    *,
    ks: ArrayLike | None = None,
    method: CurveMethod = "wilson",
    level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = DEFAULT_SEED,
) -> PassCurves:
    """The pass@k and pass^k curves of every group, each point with its interval.

    One entry per item: ``n`` valid samples, ``c`` successes, ``group`` a code ``0..G-1``.
    ``ks``: the ``k`` of every group's curve (default ``1 .. max n`` of the group's items).
    A point is the mean of the items' estimates (each in [0, 1]), a proportion estimated
    from a clustered sample (the items are the clusters), so its interval is:

    - ``wilson`` (default): Wilson's score interval at Korn and Graubard's (1998) effective
      sample size ``n_eff = p (1 - p) / var(p)``, ``var(p)`` the mean's variance over items
      (ddof 1); at 0 or 1, where the items show no variance, ``n_eff`` is the items, and
      never more than the samples. Closed form, every group and ``k`` at once; it keeps its
      coverage where the curve nears 1 (pass@k at large k), where the Wald and the bootstrap
      intervals collapse to a point (all items at 1) and cover 0.08 to 0.34 of the time;
    - ``normal``: the Wald interval of the mean over items;
    - ``percentile``: the bootstrap over items. An item's estimate depends on its ``(n, c)``
      alone, so a resample is a multinomial draw of the group's counts of each ``(n, c)``,
      every ``k`` of both curves read off the same draws, each group's generator seeded by
      ``seed`` and its own counts (its band is the same alone or among others). A loop over
      groups: about 8 ms per group at 10,000 resamples.

    Bounds are clipped to [0, 1]; ``benchmarks/bench_repeated.py`` holds their coverage.
    """
    _check_level(level)
    if method not in CURVE_METHODS:
        raise InputError(f"pass_curves: method={method!r}; expected one of {CURVE_METHODS}")
    if n_resamples < 1:
        raise InputError(f"pass_curves: n_resamples must be >= 1, got {n_resamples}")
    nn, cc, gg = (np.asarray(v, dtype=np.int64).ravel() for v in (n, c, group))
    if not (len(nn) == len(cc) == len(gg)):
        raise InputError("pass_curves: n, c and group must have one entry per item")
    if np.any(nn < 0) or np.any(cc < 0) or np.any(cc > nn) or np.any(gg < 0):
        raise InputError("pass_curves: expects 0 <= c <= n and group codes >= 0")
    n_groups = int(gg.max()) + 1 if len(gg) else 0
    cat_n, cat_c, cat_of = _distinct(nn, cc)
    cats: IntArray = np.stack([cat_n, cat_c])  # (2, U): each kind of item, (n, c)
    n_cats = cats.shape[1]
    flat = np.bincount(gg * n_cats + cat_of, minlength=n_groups * n_cats)
    counts: FloatArray = flat.reshape(n_groups, n_cats).astype(np.float64)  # (G, U)
    wanted = _wanted(counts, cats[0], ks)  # (G, K): the points each group's curve has
    grid = np.arange(1, wanted.shape[1] + 1)
    eligible = (cats[0][:, None] >= grid[None, :]).astype(np.float64)  # (U, K)
    values = _by_k(cats[0], cats[1], len(grid))  # (U, K) each: pass@k, pass^k; 0 if n < k
    n_items = counts @ eligible
    with np.errstate(invalid="ignore", divide="ignore"):
        points = [(counts @ (v * eligible)) / n_items for v in values]
    if method == "percentile":
        bounds = _bootstrap_bounds(counts, cats, eligible, values, wanted, level, n_resamples,
                                   seed)  # fmt: skip
    else:
        samples = (counts * cats[0][None, :]) @ eligible
        bounds = [_closed_bounds(counts, eligible, v, p, (n_items, samples), method, level)
                  for v, p in zip(values, points, strict=True)]  # fmt: skip
    g_idx, k_idx = np.nonzero(wanted)
    cols = [points[0], *bounds[0], points[1], *bounds[1]]
    picked = [np.clip(a[g_idx, k_idx], 0.0, 1.0) for a in cols]
    total = counts.sum(axis=1)
    used = n_items[g_idx, k_idx]
    return PassCurves(
        group=g_idx.astype(np.int64), k=grid[k_idx].astype(np.int64),
        pass_at_k=picked[0], pass_at_k_low=picked[1], pass_at_k_high=picked[2],
        pass_hat_k=picked[3], pass_hat_k_low=picked[4], pass_hat_k_high=picked[5],
        n_items=used.astype(np.int64), n_items_short=(total[g_idx] - used).astype(np.int64),
        n_samples=((counts * cats[0][None, :]) @ eligible)[g_idx, k_idx].astype(np.int64),
        ci_method=CURVE_CI_METHODS[method],
    )  # fmt: skip


def _by_k(n: IntArray, c: IntArray, k_max: int) -> list[FloatArray]:
    """pass@k and pass^k of each (n, c) at k = 1 .. ``k_max`` (0 where n < k): the running
    products of :func:`pass_hat`'s ratios, so k = 500 costs as much as k = 1."""
    i = np.arange(k_max)
    bottom = n[:, None] - i
    safe = np.where(bottom > 0, bottom, 1)
    out = []
    for top in (n - c, c):  # failures (pass@k is one minus their pass^k), successes
        ratio = np.cumprod(np.maximum(top[:, None] - i, 0) / safe, axis=1)
        out.append(np.where(bottom > 0, ratio, 0.0))
    return [(1.0 - out[0]) * (bottom > 0), out[1]]


def _wanted(counts: FloatArray, cat_n: IntArray, ks: ArrayLike | None) -> npt.NDArray[np.bool_]:
    """Which ``k`` (columns: 1 .. K) each group's curve has: ``ks``, or 1 .. its largest n."""
    if ks is not None:
        asked = np.unique(np.asarray(ks, dtype=np.int64).ravel())
        if asked.size == 0 or asked.min() < 1:
            raise InputError(f"pass_curves: every k must be >= 1, got {asked.tolist()}")
        row = np.zeros(int(asked.max()), dtype=bool)
        row[asked - 1] = True
        return np.tile(row, (len(counts), 1))
    most = np.where(counts > 0, cat_n[None, :], 0).max(axis=1, initial=0)
    most = np.maximum(most, 1)
    grid = np.arange(1, int(most.max(initial=1)) + 1)
    return np.asarray(grid[None, :] <= most[:, None], dtype=np.bool_)


def _closed_bounds(
    counts: FloatArray,
    eligible: FloatArray,
    values: FloatArray,
    point: FloatArray,
    sizes: tuple[FloatArray, FloatArray],
    method: str,
    level: float,
) -> tuple[FloatArray, FloatArray]:
    """The closed-form interval of each (group, k) mean from the items' moments, centred on
    the mean (no cancellation), a block of groups at a time. ``sizes``: the items and the
    samples each mean is over."""
    n_items, samples = sizes
    m2 = np.zeros_like(point)
    step = max(1, 4_000_000 // max(values.size, 1))
    for g0 in range(0, len(counts), step):  # blocks of groups bound the (g, U, K) memory
        dev = values[None, :, :] - np.nan_to_num(point[g0 : g0 + step])[:, None, :]
        w = counts[g0 : g0 + step, :, None] * eligible[None, :, :]
        m2[g0 : g0 + step] = (w * dev * dev).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        var_mean = m2 / (n_items - 1) / n_items
        inside = (point > 0) & (point < 1) & (var_mean > 0)
        # Korn and Graubard's effective sample size: the binomial n with the mean's variance;
        # at 0 or 1 (no variance to read) the items themselves, never past the samples
        n_eff = np.where(inside, point * (1 - point) / var_mean, n_items)
        n_eff = np.where(n_items > 1, np.minimum(n_eff, samples), np.nan)
    if method == "wilson":
        return mean_interval("wilson", n_eff, successes=point * n_eff, level=level)
    return mean_interval("normal", n_items, mean=point, stderr=np.sqrt(var_mean), level=level)


def _bootstrap_bounds(
    counts: FloatArray,
    cats: IntArray,
    eligible: FloatArray,
    values: list[FloatArray],
    wanted: npt.NDArray[np.bool_],
    level: float,
    n_resamples: int,
    seed: Seed,
) -> list[tuple[FloatArray, FloatArray]]:
    """The percentile bootstrap over items of each group's points, both curves from the
    same multinomial draws of its ``(n, c)`` counts."""
    shape = wanted.shape
    out = [tuple(np.full(shape, np.nan) for _ in range(2)) for _ in values]
    base = int(np.random.default_rng(seed).integers(2**62))
    alpha = 1.0 - level
    for g in range(len(counts)):  # one generator per group: its band is its own
        held = np.flatnonzero(counts[g])
        if held.size == 0:
            continue
        cnt = counts[g, held].astype(np.int64)
        m = int(cnt.sum())
        seeding = [base, *np.stack([cats[0][held], cats[1][held], cnt]).T.ravel().tolist()]
        draws = np.random.default_rng(seeding).multinomial(m, cnt / m, size=n_resamples)
        cols = np.flatnonzero(wanted[g])
        f = np.concatenate([v[held][:, cols] * eligible[held][:, cols] for v in values], axis=1)
        e = np.tile(eligible[held][:, cols], (1, len(values)))
        num = np.zeros((n_resamples, f.shape[1]))
        den = np.zeros((n_resamples, f.shape[1]))
        for j in range(len(held)):  # a few (n, c) kinds: no BLAS call for a thin product
            d = draws[:, j, None].astype(np.float64)
            num += d * f[j]
            den += d * e[j]
        with np.errstate(invalid="ignore", divide="ignore"):
            means = (num / den).T  # (2K, B)
        lo, hi = _quantiles(means, alpha)
        for s, (low, high) in enumerate(out):
            low[g, cols], high[g, cols] = lo[s * len(cols) : (s + 1) * len(cols)], hi[
                s * len(cols) : (s + 1) * len(cols)]  # fmt: skip
    return [(lo, hi) for lo, hi in out]


def _quantiles(means: FloatArray, alpha: float) -> tuple[FloatArray, FloatArray]:
    """The ``alpha / 2`` and ``1 - alpha / 2`` quantiles of each row; a resample that drew
    no item with ``k`` samples (NaN) is left out of its row."""
    lo = np.full(len(means), np.nan)
    hi = np.full(len(means), np.nan)
    full = np.isfinite(means).all(axis=1)
    if full.any():
        q = np.tile([alpha / 2, 1 - alpha / 2], (int(full.sum()), 1))
        lo[full], hi[full] = _row_quantiles(np.ascontiguousarray(means[full]), q)
    some = ~full & np.isfinite(means).any(axis=1)
    if some.any():
        lo[some] = np.nanquantile(means[some], alpha / 2, axis=1)
        hi[some] = np.nanquantile(means[some], 1 - alpha / 2, axis=1)
    return lo, hi


@dataclass(frozen=True)
class VarianceSplit:
    """The split of each group's paired difference (or mean, one side) into its parts.

    Per group: ``n_items`` (items with a valid sample on each side), ``epochs`` (the mean
    valid samples per item and side), ``estimate`` (the mean of the items' differences),
    ``var_total`` (the variance of an item's difference over items, ddof 1), ``var_within``
    (the epochs' part, ``mean(s_a^2 / n_a + s_b^2 / n_b)``), ``var_between`` (``var_total -
    var_within``, floored at 0; ``var_between_raw`` unfloored), ``within_share``,
    ``ci_width`` (``2 z sqrt(var_total / n_items)``), ``floor_width`` (the width with
    infinitely many epochs), ``n_single`` (items with one sample on a side, whose within
    variance is the side's pooled one).
    """

    n_items: IntArray
    epochs: FloatArray
    estimate: FloatArray
    var_total: FloatArray
    var_within: FloatArray
    var_between: FloatArray
    var_between_raw: FloatArray
    within_share: FloatArray
    ci_width: FloatArray
    floor_width: FloatArray
    n_single: IntArray
    level: float


def variance_split(
    group: ArrayLike,
    mean_a: ArrayLike,
    var_a: ArrayLike,
    n_a: ArrayLike,
    mean_b: ArrayLike | None = None,
    var_b: ArrayLike | None = None,
    n_b: ArrayLike | None = None,
    *,
    level: float = DEFAULT_LEVEL,
) -> VarianceSplit:
    """The within / between split of each group's mean paired difference ``a - b``.

    One entry per item shared by both sides: its valid samples' mean, variance (ddof 1; NaN
    with one sample) and count on each side; ``group`` a code ``0..G-1``. Without side ``b``
    it is the split of side ``a``'s mean (the one-way random-effects ANOVA: the between
    part is ``(MS_between - MS_within) / n`` on a balanced design). An item with one sample
    on a side takes that side's pooled within variance (of the group's items with two or
    more); a group with none has no within part (NaN).
    """
    _check_level(level)
    g = np.asarray(group, dtype=np.int64).ravel()
    n_groups = int(g.max()) + 1 if len(g) else 0
    sides = [(mean_a, var_a, n_a)] + ([(mean_b, var_b, n_b)] if mean_b is not None else [])
    diff = np.zeros(len(g))
    within = np.zeros(len(g))
    epochs = np.zeros(len(g))
    single = np.zeros(len(g), dtype=bool)
    for sign, (mean, var, n) in zip((1.0, -1.0), sides, strict=False):
        if var is None or n is None:
            raise InputError("variance_split: side b needs mean_b, var_b and n_b")
        mu, s2, nn = (np.asarray(v, dtype=np.float64).ravel() for v in (mean, var, n))
        if not (len(mu) == len(s2) == len(nn) == len(g)) or np.any(nn < 1):
            raise InputError("variance_split: one entry per item, each with n >= 1")
        ok = (nn >= 2) & np.isfinite(s2)
        df = np.bincount(g, weights=np.where(ok, nn - 1, 0.0), minlength=n_groups)
        ss = np.bincount(g, weights=np.where(ok, (nn - 1) * np.nan_to_num(s2), 0.0),
                         minlength=n_groups)  # fmt: skip
        with np.errstate(invalid="ignore", divide="ignore"):
            pooled = np.where(df > 0, ss / df, np.nan)
        within += np.where(ok, s2, pooled[g]) / nn
        diff += sign * mu
        epochs += nn / len(sides)
        single |= ~ok
    m = np.bincount(g, minlength=n_groups).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        center = np.bincount(g, weights=diff, minlength=n_groups) / m
        dev = diff - center[g]
        total = np.where(m > 1, np.bincount(g, weights=dev * dev, minlength=n_groups) / (m - 1),
                         np.nan)  # fmt: skip
        w = np.bincount(g, weights=within, minlength=n_groups) / m
        raw = total - w
        between = np.where(np.isfinite(raw), np.maximum(raw, 0.0), np.nan)
        share = np.where(total > 0, np.minimum(w / total, 1.0), np.nan)
        z = z_value(level)
        width = 2 * z * np.sqrt(total / m)
        floor = 2 * z * np.sqrt(between / m)
    return VarianceSplit(
        n_items=m.astype(np.int64),
        epochs=np.bincount(g, weights=epochs, minlength=n_groups) / np.maximum(m, 1),
        estimate=center, var_total=total, var_within=w, var_between=between,
        var_between_raw=raw, within_share=share, ci_width=width, floor_width=floor,
        n_single=np.bincount(g, weights=single, minlength=n_groups).astype(np.int64),
        level=level,
    )  # fmt: skip


def _shrinking(split: VarianceSplit) -> FloatArray:
    """The part of the total that epochs shrink: the within part, or all of the total where
    the between estimate was floored at 0 (so the width now is the width predicted now)."""
    return np.asarray(split.var_total - split.var_between, dtype=np.float64)


def width_at(split: VarianceSplit, epochs: ArrayLike, items: ArrayLike | None = None) -> FloatArray:
    """The predicted width of each group's interval with ``epochs`` samples per item and side
    (and ``items`` items; default as now): ``2 z sqrt((B + (V - B) * e0 / e) / m)``, ``V``
    the total, ``B`` the between part (floored at 0), ``e0`` the epochs now: the within part
    is the one that shrinks with epochs, and at ``e0`` the width is the width now."""
    e = np.asarray(epochs, dtype=np.float64)
    m = split.n_items if items is None else np.asarray(items, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = split.var_between + _shrinking(split) * split.epochs / e
        return np.asarray(2 * z_value(split.level) * np.sqrt(var / m), dtype=np.float64)


def epochs_to_halve(split: VarianceSplit) -> tuple[FloatArray, FloatArray]:
    """The factor on the epochs, and the epochs per item and side, that halve each group's
    interval: ``r = 4 W / (W - 3 B)`` while the between part ``B`` is under a third of the
    within part ``W = V - B`` (under a quarter of the total ``V``); inf where no number of epochs can,
    NaN where the split is unknown. The epochs are ``ceil(r * e0)``, rounded up: the width
    they give is at most half."""
    b, w = split.var_between, _shrinking(split)
    with np.errstate(invalid="ignore", divide="ignore"):
        factor = np.where(w > 3 * b, 4 * w / (w - 3 * b), np.inf)
        factor = np.where(np.isfinite(b) & np.isfinite(w) & (w + b > 0), factor, np.nan)
        count = np.ceil(factor * split.epochs - 1e-9)
    return factor, count
