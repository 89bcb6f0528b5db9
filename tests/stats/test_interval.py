"""The one interval entry point: each method is the stats function it names, bit for bit, and
the vocabulary is one (old names warn, then mean the same)."""

from __future__ import annotations

import numpy as np
import pytest

from hylo_analytics import stats
from hylo_analytics.errors import InputError
from hylo_analytics.stats.methods import (
    CI_METHODS,
    ONE_SAMPLE_METHODS,
    PAIRED_METHODS,
    UNSET,
    check_method,
    renamed,
)

K, N = np.array([0, 3, 9, 10]), np.array([10, 10, 10, 10])


@pytest.mark.parametrize("method", ["wilson", "clopper_pearson"])
def test_binomial_methods_are_the_closed_forms(method: str) -> None:
    fn = stats.wilson if method == "wilson" else stats.clopper_pearson
    got = stats.mean_interval(method, N, level=0.9, successes=K)
    np.testing.assert_array_equal(got, fn(K, N, 0.9))


def test_hall_and_normal_are_the_closed_forms() -> None:
    mean, std, skew = np.array([1.0, 2.0]), np.array([0.5, 1.5]), np.array([0.0, 2.0])
    n = np.array([20, 5])
    hall = stats.mean_interval("hall", n, mean=mean, std=std, skewness=skew)
    np.testing.assert_array_equal(hall, stats.hall_ci(mean, std, skew, n))
    normal = stats.mean_interval("normal", n, mean=mean, stderr=std)
    np.testing.assert_array_equal(normal, stats.normal_ci(mean, std))


@pytest.mark.parametrize("method", ["percentile", "bca", "studentized"])
def test_bootstrap_methods_are_the_bootstrap(method: str) -> None:
    x = np.random.default_rng(1).lognormal(size=50)
    got = stats.mean_interval(method, [20, 30], values=x, n_resamples=500, seed=4)
    want = stats.bootstrap_ci(x, [20, 30], method=method, n_resamples=500, seed=4)  # type: ignore[arg-type]
    np.testing.assert_array_equal(got, want)


def test_paired_score_is_tango_with_its_test() -> None:
    b, c, n = np.array([6.0, 0.0]), np.array([16.0, 3.0]), np.array([161.0, 20.0])
    got = stats.paired_interval("score", [0.95, 0.9], n, wins=b, losses=c)
    for level, bounds in zip([0.95, 0.9], got.bounds, strict=True):
        np.testing.assert_array_equal(bounds, stats.tango_ci(b, c, n, level))
    np.testing.assert_array_equal(got.p_greater, stats.tango_p(b, c, n, 0.0, "greater"))
    assert (got.test, got.ci_method) == ("tango score", "tango")
    # Fagerland, Lydersen & Laake (2017), ch. 8: Tango -0.1240 to -0.0054
    assert np.round(got.bounds[0][0][0], 4) == -0.1240
    assert np.round(got.bounds[0][1][0], 4) == -0.0054


def test_paired_bootstrap_is_the_bootstrap_test() -> None:
    d = np.random.default_rng(2).normal(size=40)
    got = stats.paired_interval("percentile", [0.95], [40], differences=d, n_resamples=300)
    want = stats.bootstrap_test(d, [40], levels=[0.95], n_resamples=300, seed=0)
    np.testing.assert_array_equal(got.bounds[0], want.bounds[0])
    np.testing.assert_array_equal(got.p_less, want.p_less)
    assert (got.test, got.ci_method) == ("bootstrap percentile", "percentile")


def test_one_vocabulary() -> None:
    assert set(ONE_SAMPLE_METHODS) | set(PAIRED_METHODS) == set(CI_METHODS)
    assert stats.DEFAULT_SEED == 0
    from hylo_analytics.aggregate import CI_METHODS as aggregate_methods

    assert aggregate_methods == ONE_SAMPLE_METHODS


def test_an_old_name_warns_then_means_the_new_one() -> None:
    with pytest.warns(
        DeprecationWarning, match="ci='bootstrap' is deprecated: pass ci='percentile'"
    ):
        assert check_method("bootstrap", PAIRED_METHODS, "compare") == "percentile"
    with pytest.raises(InputError, match="unknown ci method 'tango'"):
        check_method("tango", PAIRED_METHODS, "compare")
    assert renamed("reduce", "reducer", UNSET, "max", "aggregate", "mean") == "max"
    with pytest.warns(DeprecationWarning, match="reduce= is deprecated: pass reducer="):
        assert renamed("reduce", "reducer", None, "mean", "aggregate", "mean") is None
    with pytest.raises(InputError, match="disagree"), pytest.warns(DeprecationWarning):
        renamed("reduce", "reducer", None, "max", "aggregate", "mean")


def test_a_method_needs_its_inputs() -> None:
    with pytest.raises(InputError, match="needs successes="):
        stats.mean_interval("wilson", N)
    with pytest.raises(InputError, match="no interval method 'auto'"):
        stats.paired_interval("auto", [0.95], N)
