"""Integer data takes one product per size: the very bits of the shared product + corrections."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hylo_analytics.stats import bootstrap_ci
from hylo_analytics.stats.bootstrap import (
    _coupled_means_general,
    _coupled_means_integral,
    _integral,
)


def _layout(sizes: list[int], seed: int, scale: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = np.array(sizes, dtype=np.int64)
    x = np.random.default_rng(seed).integers(-scale, scale + 1, int(n.sum())).astype(float)
    return x, np.concatenate([[0], np.cumsum(n)[:-1]]), n


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 300), min_size=1, max_size=12),
    seed=st.integers(0, 2**16),
    scale=st.sampled_from([1, 7, 1000, 10**5]),
    n_resamples=st.sampled_from([1, 5, 1100]),
)
@pytest.mark.slow
def test_integral_product_is_bit_identical_to_the_general_one(
    sizes: list[int], seed: int, scale: int, n_resamples: int
) -> None:
    x, starts, n = _layout(sizes, seed, scale)
    assert _integral([x, x * x], starts, n)
    general = _coupled_means_general([x, x * x], starts, n, n_resamples, 12345)
    integral = _coupled_means_integral([x, x * x], starts, n, n_resamples, 12345)
    for a, b in zip(general, integral, strict=True):
        np.testing.assert_array_equal(a, b)


def test_fractions_and_huge_values_take_the_general_product() -> None:
    x, starts, n = _layout([5, 9], 0, 10)
    assert not _integral([x + 0.5], starts, n)
    assert not _integral([x * 2.0**50], starts, n)
    assert not _integral([np.r_[x[:-1], np.nan]], starts, n)


@settings(max_examples=10, deadline=None)
@given(sizes=st.lists(st.integers(2, 200), min_size=2, max_size=10), seed=st.integers(0, 99))
def test_studentized_bounds_do_not_depend_on_the_order_of_the_groups(
    sizes: list[int], seed: int
) -> None:
    x, starts, n = _layout(sizes, seed, 50)
    lo, hi = bootstrap_ci(x, n, method="studentized", n_resamples=2000, seed=seed, max_bytes=2**16)
    # one group at a time: no ordering, no chunk shared with another group
    for g in range(len(n)):
        one = x[starts[g] : starts[g] + n[g]]
        lo1, hi1 = bootstrap_ci(one, [n[g]], method="studentized", n_resamples=2000, seed=seed)
        assert (lo1[0], hi1[0]) == (lo[g], hi[g])
