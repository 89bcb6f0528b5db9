"""The coupled resampling of continuous values: one shared Poisson product for every group.

The Multinomial(n, 1/n) resamples of :func:`~hylo_analytics.stats.bootstrap.bootstrap_means`
for values that are neither 0/1 nor stratified, built from one Poisson(1) count per cell and
resample shared by every group and size, plus the few balls added or taken away per size
(:func:`_coupled_means`). Split out of ``bootstrap.py`` so that module holds the intervals and
this one the draws; the draws (and so every bound) are the same bits as before.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

_DEFAULT_MAX_BYTES = 64 * 2**20


# Resamples are drawn in fixed blocks of columns, and the shared Poisson counts in fixed tiles
# of cells, so a draw depends on its resample's index and its cell only: never on how many
# resamples, groups or cells the call has, nor on the memory budget.
_COLS = 1024
_TILE = 256
_TAG_POISSON, _TAG_CORRECT = 0x9015, 0xC044
# P(X <= k) for X ~ Poisson(1): the inverse-CDF draw of the shared counts
_POISSON1_CDF = np.cumsum(np.exp(-1.0) / np.cumprod(np.r_[1.0, np.arange(1.0, 25.0)]))


def _coupled_means(
    xs: list[FloatArray],
    starts: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64],
    n_resamples: int,
    base: int,
    shared: dict[int, tuple[npt.NDArray[np.int8], npt.NDArray[np.int32]]] | None = None,
) -> list[FloatArray]:
    """Resampled means, shape (G, B), of the groups ``starts``/``sizes`` of each array in ``xs``.

    Every resample of a group of ``n`` is an exact Multinomial(n, 1/n) draw of its values, from
    one Poisson process per cell shared by every group: cell ``j`` holds ``P_j ~ Poisson(1)``
    balls (the same ``P`` for every size, seeded by tile), so a group's first ``n`` cells hold
    ``K = P_0 + ... + P_{n-1}`` balls, each uniform over the ``n`` cells given ``K``. The
    first ``n`` arrivals of those ``n`` processes are the resample: when ``K > n`` the last
    ``K - n`` arrivals, a uniform subset of the balls, are taken away; when ``K < n`` the next
    ``n - K`` arrivals, uniform over the cells, are added. Those ``|K - n|`` (about
    ``0.8 sqrt(n)``) corrections are drawn per size (seeded by the size and the block of
    columns), the rest is one matrix product of the values with ``P`` for all groups at once,
    whatever their sizes. So a group's resamples depend only on its values and the seed; as
    with shared weights, the Monte-Carlo noise of two groups is correlated.
    """
    if _integral(xs, starts, sizes):
        return _coupled_means_integral(xs, starts, sizes, n_resamples, base, shared)
    return _coupled_means_general(xs, starts, sizes, n_resamples, base)


def _coupled_means_general(
    xs: list[FloatArray],
    starts: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64],
    n_resamples: int,
    base: int,
) -> list[FloatArray]:
    """:func:`_coupled_means` of any data: the shared product, then the corrections."""
    n_groups = len(sizes)
    outs = [np.empty((n_groups, n_resamples)) for _ in xs]
    # Groups of similar size share one product, zero-padded to a bin's width (<= 1/8 more).
    step = np.maximum(8, 2 ** np.maximum(np.floor(np.log2(np.maximum(sizes, 1))) - 3, 0))
    width = (np.ceil(sizes / step) * step).astype(np.int64)
    bins = []
    for w in np.unique(width).tolist():
        idx = np.flatnonzero(width == w)
        cells = np.arange(w)
        inside = cells[None, :] < sizes[idx, None]
        at = np.where(inside, starts[idx, None] + cells[None, :], 0)
        # every array's rows in one product (x and x**2 for the studentized bootstrap)
        bins.append((idx, w, np.concatenate([np.where(inside, x[at], 0.0) for x in xs])))
    uniq = np.unique(sizes)
    by_size = [(int(n), np.flatnonzero(sizes == n)) for n in uniq.tolist()]
    rows = -(-int(width.max()) // _TILE) * _TILE
    for c, b0 in enumerate(range(0, n_resamples, _COLS)):
        cols = min(_COLS, n_resamples - b0)
        counts = _poisson_counts(base, rows, c)[:cols]  # (resamples, cells)
        p = counts.astype(np.float64)
        for idx, w, block in bins:
            prod = block @ p[:, :w].T
            for k, out in enumerate(outs):
                out[idx, b0 : b0 + cols] = prod[k * len(idx) : (k + 1) * len(idx)]
        del p
        cum = np.cumsum(counts, axis=1, dtype=np.int32)
        del counts
        # the corrections of every size: drawn size by size (each from its own seed), then
        # located and applied all at once
        drawn = [_corrections(base, n, c, cum[:, n - 1]) for n, _ in by_size]
        n_rm = np.array([len(d[2]) for d in drawn])
        rm_col = np.concatenate([d[2] for d in drawn])
        rm_cell = _ball_cells(
            cum, rm_col, np.concatenate([d[3] for d in drawn]), np.repeat(uniq, n_rm)
        )
        rm_cells = np.split(rm_cell, np.cumsum(n_rm)[:-1])
        at_parts, target_parts, sign_parts = [], [], []
        for (_, idx), (add_cell, add_col, rm_c, _), rm_ce in zip(
            by_size, drawn, rm_cells, strict=True
        ):
            cell = np.concatenate([add_cell, rm_ce])
            if not len(cell):
                continue
            col = np.concatenate([add_col, rm_c])
            at_parts.append((starts[idx, None] + cell[None, :]).ravel())
            target_parts.append((idx[:, None] * cols + col[None, :]).ravel())
            sign_parts.append(
                np.tile(np.r_[np.ones(len(add_cell)), -np.ones(len(rm_ce))], len(idx))
            )
        if at_parts:
            at, target = np.concatenate(at_parts), np.concatenate(target_parts)
            sign = np.concatenate(sign_parts)
            for out, x in zip(outs, xs, strict=True):
                fix = np.bincount(target, weights=x[at] * sign, minlength=n_groups * cols)
                out[:, b0 : b0 + cols] += fix.reshape(n_groups, cols)
    for out in outs:
        out /= sizes[:, None]
    return outs


# Resampled sums of integers stay exact while no partial sum can reach 2**53; a cell holds at
# most len(_POISSON1_CDF) shared balls.
_EXACT = 2.0**53
_EXACT32 = 2.0**24  # the same, in single precision


def _integral(
    xs: list[FloatArray], starts: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64]
) -> bool:
    """Whether every resampled sum of these groups is exact in any order of summation.

    Integer values (counts: steps, tokens) times integer weights, with every partial sum below
    2**53, are exact, so one product with the resamples' Multinomial counts gives the same
    bits as the shared Poisson product plus its corrections (or any other grouping).
    """
    if not len(sizes):
        return False
    # padded widths stay under 2n + 8 cells; the corrections add at most n more balls
    bound = (len(_POISSON1_CDF) + 1) * (2 * int(sizes.max()) + 8)
    lo, hi = int(starts.min()), int((starts + sizes).max())
    for x in xs:
        part = x[lo:hi]
        top = float(np.abs(part).max()) if len(part) else 0.0
        if not (np.isfinite(top) and top * bound < _EXACT and np.all(part == np.trunc(part))):
            return False
    return True


def _coupled_means_integral(
    xs: list[FloatArray],
    starts: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64],
    n_resamples: int,
    base: int,
    shared: dict[int, tuple[npt.NDArray[np.int8], npt.NDArray[np.int32]]] | None = None,
) -> list[FloatArray]:
    """:func:`_coupled_means` of integer data: the same draws, one product per size.

    The shared Poisson counts and the corrections of a size are the very draws of
    :func:`_coupled_means`; here they are added up first into that size's Multinomial(n, 1/n)
    counts, and the groups of that size take one product with them, for as many resamples
    as the memory budget holds (few, large products: a threaded BLAS pays off). The sums are
    integers, exact whatever the order, so the bits are those of :func:`_coupled_means`
    (``_integral`` checks that they are).
    """
    outs = [np.empty((len(sizes), n_resamples)) for _ in xs]
    rows = -(-int(sizes.max()) // _TILE) * _TILE
    blocks = list(enumerate(range(0, n_resamples, _COLS)))
    for n in np.unique(sizes).tolist():
        idx = np.flatnonzero(sizes == n)
        # groups ordered by size (the studentized bootstrap orders them) are one slice
        rows_of: slice | npt.NDArray[np.intp] = (
            slice(int(idx[0]), int(idx[-1]) + 1) if idx[-1] - idx[0] + 1 == len(idx) else idx
        )
        at = starts[idx, None] + np.arange(n)[None, :]
        # Single precision where every partial sum is an integer below 2**24 (the weights of
        # one resample add up to n): the same exact sums, for half the product's cost.
        parts = [x[at] for x in xs]
        single = [float(np.abs(v).max(initial=0.0)) * n < _EXACT32 for v in parts]
        per = max(1, _DEFAULT_MAX_BYTES // (8 * n * _COLS))  # resample blocks per product
        for j in range(0, len(blocks), per):
            first, end = blocks[j][1], min(n_resamples, blocks[j][1] + per * _COLS)
            weights = np.empty((end - first, n))
            for c, b0 in blocks[j : j + per]:
                cols = min(_COLS, n_resamples - b0)
                span = slice(b0 - first, b0 - first + cols)
                weights[span] = _multinomial_counts(base, n, c, cols, rows, shared)
            w32 = weights.T.astype(np.float32) if any(single) else None
            for k, out in enumerate(outs):
                if single[k] and w32 is not None:
                    out[rows_of, first:end] = parts[k].astype(np.float32) @ w32
                else:
                    out[rows_of, first:end] = parts[k] @ weights.T
    for out in outs:
        out /= sizes[:, None]
    return outs


def _multinomial_counts(
    base: int,
    n: int,
    block: int,
    cols: int,
    rows: int,
    shared: dict[int, tuple[npt.NDArray[np.int8], npt.NDArray[np.int32]]] | None,
) -> FloatArray:
    """The Multinomial(n, 1/n) counts of resample block ``block``, shape (cols, n): the
    shared Poisson counts plus the balls added, minus the balls taken away (exact)."""
    counts, cum = _shared_counts(base, rows, block, cols, shared)
    add_cell, add_col, rm_col, ball = _corrections(base, n, block, cum[:, n - 1])
    rm_cell = _ball_cells(cum, rm_col, ball, np.full(len(rm_col), n, dtype=np.int64))
    moved = np.bincount(
        np.concatenate([add_col * n + add_cell, rm_col * n + rm_cell]),
        np.concatenate([np.ones(len(add_cell)), np.full(len(rm_cell), -1.0)]),
        minlength=cols * n,
    )
    weights = np.asarray(moved, dtype=np.float64).reshape(cols, n)  # weighted: floats already
    weights += counts[:, :n]
    return weights


def _shared_counts(
    base: int,
    rows: int,
    block: int,
    cols: int,
    cache: dict[int, tuple[npt.NDArray[np.int8], npt.NDArray[np.int32]]] | None,
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int32]]:
    """The shared Poisson counts of resample block ``block`` and their running sums.

    They depend on the block alone (cells come in fixed tiles), so the chunks of one call
    share them through ``cache`` while they fit in the memory budget.
    """
    hit = cache.get(block) if cache is not None else None
    if hit is not None and hit[0].shape[1] >= rows:
        return hit
    counts = _poisson_counts(base, rows, block)[:cols]  # (resamples, cells)
    cum = np.cumsum(counts, axis=1, dtype=np.int32)
    if cache is not None and 5 * counts.size * (block + 1) <= _DEFAULT_MAX_BYTES:
        cache[block] = (counts, cum)
    return counts, cum


def _poisson_counts(base: int, rows: int, block: int) -> npt.NDArray[np.int8]:
    """The shared Poisson(1) counts, shape (``_COLS`` resamples, ``rows`` cells), of the
    resample block ``block``; drawn tile by tile, so a cell's counts never depend on ``rows``."""
    u = np.concatenate(
        [
            np.random.default_rng([base, _TAG_POISSON, t, block]).random((_COLS, _TILE))
            for t in range(rows // _TILE)
        ],
        axis=1,
    )
    # the inverse CDF: three comparisons settle 98 % of the draws, a search the rest
    k: npt.NDArray[np.int8] = (u >= _POISSON1_CDF[0]).view(np.int8)
    k += u >= _POISSON1_CDF[1]
    k += u >= _POISSON1_CDF[2]
    tail = np.flatnonzero(u >= _POISSON1_CDF[2])
    k.ravel()[tail] = np.searchsorted(_POISSON1_CDF, u.ravel()[tail], side="right")
    return k


def _corrections(
    base: int, n: int, block: int, total: npt.NDArray[np.int32]
) -> tuple[
    npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]
]:
    """The balls to add and to take away to turn the first ``n`` cells' Poisson counts into
    Multinomial(n, 1/n) counts: (cell, resample) of each added ball, (resample, ball) of each
    one taken away (ball ``b``: the ``b``-th of the resample's balls in cell order).
    ``total`` is the balls in the first ``n`` cells of each resample."""
    total = total.astype(np.int64)
    gen = np.random.default_rng([base, _TAG_CORRECT, n, block])
    short = n - total
    add_col = np.repeat(np.arange(len(total)), np.maximum(short, 0))
    add_cell = gen.integers(0, n, len(add_col))
    rm_col = np.repeat(np.arange(len(total)), np.maximum(-short, 0))
    if not len(rm_col):
        return add_cell, add_col, rm_col, np.zeros(0, dtype=np.int64)
    # a uniform subset of the balls of each resample: draw, then draw again the repeats
    # (the procedure treats every ball alike, so the subset it ends with is uniform)
    span = int(total.max()) + 1
    high = total[rm_col]
    ball = gen.integers(0, high)
    while True:
        key = rm_col * span + ball
        order = np.argsort(key, kind="stable")
        ordered = key[order]
        again = order[1:][ordered[1:] == ordered[:-1]]
        if not len(again):
            break
        ball[again] = gen.integers(0, high[again])
    return add_cell, add_col, rm_col, ball


def _ball_cells(
    cum: npt.NDArray[np.int32],
    col: npt.NDArray[np.int64],
    ball: npt.NDArray[np.int64],
    n: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]:
    """The cell of each ball: the first of its resample's first ``n`` cells whose running
    count exceeds it (a binary search of every ball at once)."""
    rows = cum.shape[1]
    flat = cum.ravel()
    lo = col * rows
    length = n.astype(np.int64)
    while length.any():
        half = length // 2
        right = flat[lo + half] <= ball
        lo = np.where(right, lo + half + 1, lo)
        length = np.where(right, length - half - 1, half)
    return np.asarray(lo - col * rows, dtype=np.int64)
