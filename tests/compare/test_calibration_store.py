"""``Store.calibrate``: the oracle's and the judge's grades read as the ranking reads a metric,
each (policy, suite) equal to ppi_py on rows built here from the stored scores, the paired
difference equal to ppi_py fed the differences, the refusals, the chart and the scale."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import polars as pl
import ppi_py
import pytest
from calibration_data import calibration_store

import hylo_analytics as ha
from hylo_analytics import charts
from hylo_analytics.compare.calibration import Calibration
from hylo_analytics.errors import InputError, SelectionError

AGENTS = {"a": 0.4, "b": 0.6, "c": 0.55}
SOURCES = {"trusted_source": "oracle", "judge_source": "grade:judge"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    return calibration_store(tmp_path_factory.mktemp("calib") / "s", AGENTS, splits=("s1", "s2"))


@pytest.fixture(scope="module")
def result(store: ha.Store) -> Calibration:
    return store.calibrate(**SOURCES, baseline="a", strata=["split"])


def _grades(store: ha.Store) -> pl.DataFrame:
    """(agent, split, key) -> oracle and judge grade, from stg_scores, judge gaps filled."""
    rows = store.sql(
        "select r.agent_name, r.split, s.key, s.source, s.value from stg_scores s "
        "join stg_runs r using (run_id)"
    )
    wide = rows.pivot("source", index=["agent_name", "split", "key"], values="value")
    return wide.with_columns(
        judge=pl.col("grade:judge").fill_null(
            pl.col("grade:judge").mean().over("agent_name", "split")
        )
    )


def test_each_rate_is_ppi_py_on_the_stored_grades(store: ha.Store, result: Calibration) -> None:
    grades = _grades(store)
    assert result.rates.height == len(AGENTS) * 2
    for row in result.rates.iter_rows(named=True):
        mine = grades.filter(pl.col("agent_name") == row["policy"], pl.col("split") == row["split"])
        lab = mine.filter(pl.col("oracle").is_not_null())
        unl = mine.filter(pl.col("oracle").is_null())
        y, f, fu = lab["oracle"].to_numpy(), lab["judge"].to_numpy(), unl["judge"].to_numpy()
        low, high = ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05)
        point = np.ravel(ppi_py.ppi_mean_pointestimate(y, f, fu))[0]
        np.testing.assert_allclose([row["estimate"], row["low"], row["high"]],
                                   [point, low[0], high[0]], rtol=1e-12)  # fmt: skip
        assert row["classical"] == pytest.approx(y.mean(), rel=1e-12)
        assert row["judge_only"] == pytest.approx(mine["judge"].mean(), rel=1e-12)
        assert (row["n_labelled"], row["n_unlabelled"]) == (len(y), len(fu))
        assert row["n_judge_filled"] == mine["grade:judge"].null_count()
        assert row["ci_method"] == "ppi++"
    assert any("no judge grade" in n for n in result.notes)


def test_each_difference_is_ppi_py_fed_the_differences(
    store: ha.Store, result: Calibration
) -> None:
    grades = _grades(store)
    assert sorted(result.differences["policy"].to_list()) == ["b", "b", "c", "c"]
    assert set(result.differences["baseline"].to_list()) == {"a"}
    for row in result.differences.iter_rows(named=True):
        pair = grades.filter(
            pl.col("agent_name") == row["policy"], pl.col("split") == row["split"]
        ).join(grades.filter(pl.col("agent_name") == "a"), on=["split", "key"], suffix="_b")
        d = (pair["oracle"] - pair["oracle_b"]).to_numpy()
        dj = (pair["judge"] - pair["judge_b"]).to_numpy()
        lab = ~np.isnan(d)
        low, high = ppi_py.ppi_mean_ci(d[lab], dj[lab], dj[~lab], alpha=0.05)
        np.testing.assert_allclose([row["low"], row["high"]], [low[0], high[0]], rtol=1e-12)
        assert row["n_labelled"] == lab.sum()


def test_a_judge_of_its_own_metric_one_policy_and_the_refusals(tmp_path: Path) -> None:
    st = calibration_store(tmp_path / "s", {"solo": 0.7}, judge_metric="judge_success",
                           judge_source="judge")  # fmt: skip
    got = st.calibrate(judge="judge_success")  # two metrics: no source needed
    assert got.rates["policy"].to_list() == ["solo"] and got.differences.is_empty()
    assert 0.5 < got.rates["estimate"][0] < 0.9
    with pytest.raises(InputError, match="name both sources"):
        st.calibrate(judge="success")
    with pytest.raises(InputError, match="same scores"):
        st.calibrate(trusted_source="oracle", judge_source="oracle")
    with pytest.raises(SelectionError, match="calibrate: no scores of 'nope'"):
        st.calibrate(judge="nope")
    with pytest.raises(SelectionError, match="baseline 'x'"):
        st.calibrate(judge="judge_success", baseline="x")


def test_the_chart_draws_rates_and_differences(result: Calibration, tmp_path: Path) -> None:
    for difference in (False, True):
        chart = charts.calibration_intervals(result, difference=difference)
        path = charts.save(chart, tmp_path / f"c{difference}.png")
        assert path.stat().st_size > 5_000
    assert result.chart().to_dict()["layer"]
    assert "PPI++" in result._repr_html_()


@pytest.mark.slow
def test_hundreds_of_policies_on_thousands_of_keys(tmp_path: Path) -> None:
    rates = {f"p{i:03d}": 0.2 + 0.6 * i / 300 for i in range(300)}
    st = calibration_store(tmp_path / "big", rates, n_keys=2_000, labelled=0.05)
    start = time.perf_counter()
    got = st.calibrate(**SOURCES, baseline="p000")
    seconds = time.perf_counter() - start
    assert got.rates.height == 300 and got.differences.height == 299
    truth = np.array([rates[p] for p in got.rates["policy"]])
    covered = (got.rates["low"].to_numpy() <= truth) & (truth <= got.rates["high"].to_numpy())
    assert covered.mean() > 0.88  # 95% intervals of 300 policies
    judge_cover = (got.rates["judge_only_low"].to_numpy() <= truth) & (
        truth <= got.rates["judge_only_high"].to_numpy()
    )
    assert judge_cover.mean() < covered.mean()  # the biased judge misses its truth
    assert (got.rates["width_ratio"] < 1).mean() > 0.9
    print(f"calibrate: 300 policies x 2,000 keys in {seconds:.2f} s")
