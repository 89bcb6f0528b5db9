"""Resampled means of groups laid out back to back: the draws behind every bootstrap interval.

Chooses the cheapest exact draw from the data (counts of 0/1 or -1/0/1 values, binomial sums
of 0/1 strata, Multinomial weight matrices of other strata, the coupled Poisson product of
:mod:`~hylo_analytics.stats._coupled` otherwise); :mod:`~hylo_analytics.stats.bootstrap` turns
them into intervals and tests. Every draw is seeded as it was when this lived in
``bootstrap.py``, so the bounds are bit-identical.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from hylo_analytics.errors import InputError
from hylo_analytics.stats._coupled import _coupled_means
from hylo_analytics.stats.closed_form import _f
from hylo_analytics.stats.methods import Seed

FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike


def _chunked_means(
    values: ArrayLike,
    sizes: ArrayLike,
    strata_sizes: ArrayLike | None,
    n_resamples: int,
    seed: Seed,
    binary: bool | None,
    max_bytes: int,
    *,
    squares: bool,
) -> Iterator[tuple[int, int, FloatArray, FloatArray | None]]:
    """:func:`bootstrap_means`, with the resampled means of ``values**2`` from the very same
    resamples when ``squares`` (the studentized bootstrap's standard errors); unstratified."""
    x = _f(values)
    gsize = np.asarray(sizes, dtype=np.int64)
    ssize = gsize if strata_sizes is None else np.asarray(strata_sizes, dtype=np.int64)
    if np.any(gsize <= 0) or np.any(ssize <= 0) or ssize.sum() != len(x) or gsize.sum() != len(x):
        raise InputError("sizes and strata_sizes must be positive and each sum to len(values)")
    if binary is None:
        binary = bool(np.all((x == 0) | (x == 1)))
    plain = len(ssize) == len(gsize)
    if squares and not plain:
        raise InputError(
            "the resampled means of squares are not stratified; call without strata_sizes"
        )
    # Without strata each stratum is a group; 0/1 data and paired differences of it are
    # drawn as counts of their values, anything else by the shared weights.
    levels, codes = _small_levels(x) if plain else (None, None)
    rng = np.random.default_rng(seed)
    base = int(rng.integers(2**62))
    s_start = np.concatenate([[0], np.cumsum(ssize)])
    if not np.isin(np.cumsum(gsize), s_start).all():
        raise InputError("every group must end where one of its strata ends")
    s_sum = np.add.reduceat(x, s_start[:-1]) if len(x) else np.zeros(0)
    g_end = np.cumsum(gsize)
    strata_of_group = np.searchsorted(s_start[1:], g_end, side="left") + 1
    g_first = np.concatenate([[0], strata_of_group[:-1]])
    # each stratum's position inside its group: the strata of one group never share draws
    position = np.arange(len(ssize)) - np.repeat(g_first, np.diff([0, *strata_of_group]))
    rows_per_chunk = max(1, max_bytes // (8 * n_resamples * (2 if squares else 1)))
    weights: dict[tuple[int, int, int], FloatArray] = {}
    shared: dict[int, tuple[npt.NDArray[np.int8], npt.NDArray[np.int32]]] = {}
    g0 = 0
    while g0 < len(gsize):
        # Strata, not groups, bound the memory: pick as many groups as fit.
        limit = g_first[g0] + rows_per_chunk
        g1 = max(g0 + 1, int(np.searchsorted(strata_of_group, limit, side="right")))
        s0, s1 = int(g_first[g0]), int(strata_of_group[g1 - 1])
        sq: FloatArray | None = None
        if levels is not None and codes is not None:
            span = slice(int(s_start[s0]), int(s_start[s1]))
            counts = _value_counts(codes[span], ssize[s0:s1], len(levels))
            sums = _discrete_means(levels, counts, n_resamples, base)
            if squares:  # the same seeds and counts: the same draws
                sq = _discrete_means(levels * levels, counts, n_resamples, base)
        elif binary:
            sums = _binomial_sums(
                s_sum[s0:s1], ssize[s0:s1], position[s0:s1], n_resamples, base, plain
            )
        elif plain:
            both = _coupled_means(
                [x, x * x] if squares else [x],
                s_start[s0:s1], ssize[s0:s1], n_resamples, base, shared,
            )  # fmt: skip
            sums, sq = both[0], (both[1] if squares else None)
        else:
            sums = _multinomial_sums(
                x, s_start, (s0, s1), (ssize, position), n_resamples, (base, max_bytes),
                weights, plain,
            )  # fmt: skip
        if plain:
            yield g0, g1, sums, sq
        else:
            local = g_first[g0:g1] - s0
            yield g0, g1, np.add.reduceat(sums, local, axis=0) / gsize[g0:g1, None], None
        g0 = g1


def _binomial_sums(
    k: FloatArray,
    n: npt.NDArray[np.int64],
    position: npt.NDArray[np.int64],
    n_resamples: int,
    base: int,
    as_means: bool,
) -> FloatArray:
    """Resampled sums of 0/1 strata; one generator per distinct (n, k, position).

    Strata with equal (n, k) at the same position of their groups have equal resampling
    distributions and are drawn once; two strata of one group differ in position, so they
    are always independent.
    """
    keys, inverse = np.unique(
        np.stack([n, np.rint(k).astype(np.int64), position]), axis=1, return_inverse=True
    )
    draws = np.empty((keys.shape[1], n_resamples))
    for j, (nj, kj, pos) in enumerate(keys.T.tolist()):
        rng = np.random.default_rng([base, nj, kj, pos])
        draws[j] = rng.binomial(nj, kj / nj, size=n_resamples)
    if as_means:
        draws /= keys[0][:, None]
    return draws[inverse.ravel()]


def _multinomial_sums(
    x: FloatArray,
    s_start: npt.NDArray[np.int64],
    span: tuple[int, int],
    strata: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
    n_resamples: int,
    seeding: tuple[int, int],
    cache: dict[tuple[int, int, int], FloatArray],
    as_means: bool,
) -> FloatArray:
    """Resampled sums (means when ``as_means``) of strata ``span``.

    ``strata`` holds every stratum's size and its position in its group; the weights are
    seeded by (size, position), so the strata of one group are resampled independently.
    """
    s0, s1 = span
    base, max_bytes = seeding
    sizes, positions = strata[0][s0:s1], strata[1][s0:s1]
    starts = s_start[s0:s1]
    kinds, kind_of = np.unique(np.stack([sizes, positions]), axis=1, return_inverse=True)
    kind_of = kind_of.ravel()
    out = None if kinds.shape[1] == 1 else np.empty((len(sizes), n_resamples))
    for kind, (n, pos) in enumerate(kinds.T.tolist()):
        idx = np.flatnonzero(kind_of == kind)
        block = x[starts[idx][:, None] + np.arange(n)]
        # The weights depend only on (seed, n, position, chunk), so every group chunk sees the
        # same ones; they are cached while they fit in the memory budget.
        step = max(1, max_bytes // (8 * n))
        parts = []
        for j in range(0, n_resamples, step):
            w = cache.get((n, pos, j))
            if w is None:
                b = min(step, n_resamples - j)
                gen = np.random.default_rng([base, n, j] if pos == 0 else [base, n, j, pos])
                counts = gen.multinomial(n, np.full(n, 1 / n), b)
                w = np.ascontiguousarray(counts.T, dtype=np.float64)
                if as_means:
                    w /= n
                if n * n_resamples * 8 <= max_bytes:
                    cache[(n, pos, j)] = w
            parts.append(block @ w)
        result = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
        if out is None:
            return result
        out[idx] = result
    assert out is not None
    return out


_SMALL_LEVELS = (np.array([0.0, 1.0]), np.array([-1.0, 0.0, 1.0]))


def _small_levels(x: FloatArray) -> tuple[FloatArray | None, npt.NDArray[np.int64] | None]:
    """0/1 data, or paired differences of it (-1, 0, 1), as codes into those levels.

    These are drawn as counts (a binomial or two per resample); anything else is cheaper as a
    matrix product. A linear check, not a sort: a million values cost a millisecond.
    """
    if len(x) == 0:
        return None, None
    for levels in _SMALL_LEVELS:
        codes = x - levels[0]
        if np.all((codes == 0) | (codes == 1) | (codes == 2)) and codes.max() < len(levels):
            return levels, codes.astype(np.int64)
    return None, None


def _value_counts(
    codes: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64], k: int
) -> npt.NDArray[np.int64]:
    """How often each of ``k`` values occurs in each group of ``sizes`` (shape (G, k))."""
    g = np.repeat(np.arange(len(sizes)), sizes)
    return np.bincount(g * k + codes, minlength=len(sizes) * k).reshape(len(sizes), k)


def _discrete_means(
    levels: FloatArray, counts: npt.NDArray[np.int64], n_resamples: int, base: int
) -> FloatArray:
    """Resampled means of groups holding ``counts`` of each of ``levels``, shape (G, B).

    Multinomial(n, counts / n) as a chain of binomials: X_j ~ Bin(n - X_1 - ... - X_{j-1},
    c_j / (n - c_1 - ... - c_{j-1})). Each group's draws come from a generator seeded by
    ``base`` and its own counts (of the values it holds), so a group's resamples (and
    interval) depend only on its values and the seed, never on the other groups of the call.
    """
    out = np.empty((len(counts), n_resamples))
    for g, row in enumerate(counts):
        held = row > 0
        values, cnt = levels[held], row[held]
        order = np.argsort(-cnt, kind="stable")  # big classes first: fewer draws left
        n = int(cnt.sum())
        rng = np.random.default_rng([base, *cnt[order].tolist()])
        left = np.full(n_resamples, n, dtype=np.int64)
        total = np.zeros(n_resamples)
        remaining = n
        for j in order[:-1]:
            draw = rng.binomial(left, cnt[j] / remaining)
            total += draw * values[j]
            left -= draw
            remaining -= int(cnt[j])
        total += left * values[order[-1]]
        out[g] = total / n
    return out
