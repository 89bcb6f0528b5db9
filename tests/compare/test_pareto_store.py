"""``Store.pareto``: the store's two metrics read as the ranking reads one, the front and the
bootstrap equal to :func:`~hylo_analytics.stats.pareto.pareto_bootstrap` on rows built here
from the resolved scores, directions, pairing, refusals and 2,000 policies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hostile_data import CORPUS
from pareto_data import commit, pareto_store, run_row

import hylo_analytics as ha
from hylo_analytics import _stat_verbs
from hylo_analytics.compare.pareto import COLUMNS, ParetoFront
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.stats.pareto import DEFAULT_PARETO_RESAMPLES, dominated_by, pareto_bootstrap

AGENTS = {"a": 0.4, "b": 0.6, "m": 0.55, "v": 0.8, "w": 0.3}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    return pareto_store(tmp_path_factory.mktemp("pareto") / "s", AGENTS)


@pytest.fixture(scope="module")
def front(store: ha.Store) -> ParetoFront:
    return store.pareto(cost="steps", strata=["split"], n_resamples=400, seed=3)


def test_the_means_are_the_rankings(store: ha.Store, front: ParetoFront) -> None:
    """One reader, one mean: each metric's mean is Store.rank's (the average over splits of
    the mean over keys, a key's epochs and a policy's runs reduced together)."""
    assert front.frame.columns == list(COLUMNS)
    got = front.frame.sort("policy")
    for col, metric in (("quality", "success"), ("cost", "steps")):
        ranked = store.rank(strata=["split"], metric=metric).strengths.sort("policy")
        np.testing.assert_allclose(got[col].to_numpy(), ranked["mean"].to_numpy(), rtol=1e-12)
    assert got["policy"].to_list() == sorted(AGENTS)
    assert (front.quality_direction, front.cost_direction) == ("maximize", "minimize")
    assert front.pairing == "paired" and front.notes == ()
    on = (dominated_by(got["quality"].to_numpy(), got["cost"].to_numpy()) == 0).tolist()
    assert got["on_front"].to_list() == on
    assert front.front["policy"].to_list() == (
        front.front.sort("cost")["policy"].to_list()  # the front first, along its cost
    )


def _independent_rows(store: ha.Store) -> dict[str, np.ndarray]:
    """The (policy, suite key) rows the front reads, built here in polars from the resolved
    scores: errored values dropped (the runs' convention), a key's epochs and runs averaged."""
    from hylo_analytics.resolution import preferred_scores

    runs = store.sql("select run_id, agent_name, split from stg_runs")
    frame = preferred_scores(store.parquet).join(runs, on="run_id")
    long = (
        frame.group_by("agent_name", "split", "key", "metric")
        .agg(pl.col("value").mean())
        .pivot("metric", index=["agent_name", "split", "key"], values="value")
        .with_columns(
            policy=pl.col("agent_name").rank("dense") - 1,
            suite=pl.col("split").rank("dense") - 1,
            k=pl.struct("split", "key").rank("dense") - 1,  # keys in (suite, key) order
        )
    )
    return {
        "quality": long["success"].fill_null(np.nan).to_numpy(),
        "cost": long["steps"].fill_null(np.nan).to_numpy(),
        "policy": long["policy"].to_numpy().astype(np.int64),
        "key": long["k"].to_numpy().astype(np.int64),
        "stratum": long.sort("k").unique("k", maintain_order=True)["suite"].to_numpy(),
    }


def test_the_store_equals_the_statistic_on_rows_built_here(
    store: ha.Store, front: ParetoFront
) -> None:
    rows = _independent_rows(store)
    want = pareto_bootstrap(rows["quality"], rows["cost"], policy=rows["policy"],
                            key=rows["key"], key_stratum=rows["stratum"], n_resamples=400,
                            seed=3)  # fmt: skip
    got = front.frame.sort("policy")
    assert got["p_front"].to_list() == want.p_front.tolist()  # the same draws of the same keys
    for col in ("quality_low", "quality_high", "cost_low", "cost_high"):
        np.testing.assert_allclose(got[col].to_numpy(), getattr(want, col), rtol=1e-12)
    assert got["n_keys"].to_list() == want.n_quality.tolist()
    assert got["p_front"].sum() > 0 and got["p_front"].max() <= 1


def test_directions_turn_the_front(store: ha.Store, front: ParetoFront) -> None:
    """Read steps as a quality to maximize at no cost ... and success as a cost: swapping the
    roles and both directions mirrors the plane, so the front is the same policies."""
    turned = store.pareto(cost="success", quality="steps", strata=["split"], n_resamples=400,
                          seed=3, directions={"success": "maximize", "steps": "minimize"})  # fmt: skip
    assert (turned.quality_direction, turned.cost_direction) == ("minimize", "maximize")
    a = front.frame.sort("policy")
    b = turned.frame.sort("policy")
    assert a["on_front"].to_list() == b["on_front"].to_list()
    assert a["quality"].to_list() == b["cost"].to_list()
    # a direction the caller flips changes which policies are on the front
    dearer = store.pareto(cost="steps", strata=["split"], n_resamples=50,
                          directions={"steps": "maximize"})  # fmt: skip
    assert dearer.cost_direction == "maximize"
    assert dearer.frame.sort("policy")["on_front"].to_list() != a["on_front"].to_list()


def test_a_policy_without_cost_and_a_metric_without_direction(tmp_path: Path) -> None:
    store = pareto_store(tmp_path / "s", {"a": 0.4, "b": 0.7, "c": 0.5}, no_cost=("c",))
    got = store.pareto(cost="steps", n_resamples=50)
    row = got.frame.filter(pl.col("policy") == "c").row(0, named=True)
    assert row["cost"] is None and not row["on_front"] and row["p_front"] == 0
    assert any("no valid 'steps'" in n and "(c)" in n for n in got.notes)
    assert any("run(s) left out" in n for n in got.notes)  # c's runs hold no steps
    # a cost the registry does not know: lower is better, said in a note
    renamed = _commit_renamed(tmp_path / "r", store)
    odd = renamed.pareto(cost="latency_ms", n_resamples=50)
    assert odd.cost_direction == "minimize"
    assert any("'latency_ms' declares no direction" in n for n in odd.notes)


def _commit_renamed(root: Path, store: ha.Store) -> ha.Store:
    scores = store.sql("select * from stg_scores").with_columns(
        metric=pl.col("metric").replace({"steps": "latency_ms"})
    )
    runs = store.sql("select * from stg_runs")
    samples = store.sql("select * from stg_samples")
    new = ha.open_store(root)
    keep = {"runs": runs, "samples": samples, "scores": scores}
    with new.parquet.lock():
        new.parquet.commit(
            {k: v.drop("batch_seq", strict=False).to_arrow() for k, v in keep.items()}
        )
    return new


def test_own_keys_are_drawn_unpaired(tmp_path: Path) -> None:
    store = pareto_store(tmp_path / "s", {"a": 0.4, "b": 0.7}, own_keys=("b",), splits=("s1",))
    got = store.pareto(cost="steps", n_resamples=100)
    assert got.pairing == "unpaired"
    assert any("resampled on their own (unpaired)" in n for n in got.notes)
    forced = store.pareto(cost="steps", n_resamples=100, pairing="paired")
    assert forced.pairing == "paired" and forced.notes == ()


def test_refusals(store: ha.Store) -> None:
    with pytest.raises(InputError, match="both 'success'"):
        store.pareto(cost="success")
    with pytest.raises(InputError, match="not run fields"):
        store.pareto(cost="steps", policy="task_id")
    with pytest.raises(SelectionError, match=r"^pareto: no scores of 'nope'"):
        store.pareto(cost="nope")
    with pytest.raises(InputError, match="pairing"):
        store.pareto(cost="steps", pairing="sometimes")  # type: ignore[arg-type]
    assert _stat_verbs.DEFAULT_PARETO_RESAMPLES == DEFAULT_PARETO_RESAMPLES
    from hylo_analytics.stats.closed_form import DEFAULT_LEVEL

    assert _stat_verbs.DEFAULT_LEVEL == DEFAULT_LEVEL


def test_html_and_chart_keep_hostile_names_inert(tmp_path: Path) -> None:
    agents = {CORPUS[0]: 0.5, CORPUS[6]: 0.7, CORPUS[1]: 0.3}
    store = pareto_store(tmp_path / "s", agents, splits=("s1",))
    got = store.pareto(cost="steps", n_resamples=50)
    page = got._repr_html_()
    assert "<script" not in page and "<img" not in page and "&lt;/script&gt;" in page
    assert "\x1b" not in page
    from PIL import Image

    from hylo_analytics import charts

    png = charts.save(got.chart(log_cost=True), tmp_path / "front.png")
    with Image.open(png) as im:
        assert im.size[0] > 600 and im.size[1] > 400
    spec = got.chart().to_dict()
    assert spec["layer"][2]["mark"]["interpolate"] == "step-after"
    # made by the stage function, a result has no chart of its own (compare imports none):
    # the chart function takes it whole
    from hylo_analytics.compare import pareto_runs

    bare = pareto_runs(store, cost="steps", n_resamples=50)
    with pytest.raises(InputError, match="pareto_intervals"):
        bare.chart()
    assert charts.pareto_intervals(bare).to_dict()["layer"][0]["mark"]["type"] == "rule"


def test_two_thousand_policies(tmp_path: Path) -> None:
    """2,000 policies x 40 shared keys from the store (the ranking's reader, twice) and the
    bootstrap of 1,000 resamples: seconds, and the front is the brute-force definition's."""
    rng = np.random.default_rng(1)
    n_pol, n_keys = 2_000, 40
    runs = [run_row(f"r{i:04d}", f"p{i:04d}", "s") for i in range(n_pol)]
    run = np.repeat([r["run_id"] for r in runs], n_keys).tolist()
    key = np.tile([f"t#{k}" for k in range(n_keys)], n_pol).tolist()
    skill = np.repeat(rng.uniform(0.2, 0.9, n_pol), n_keys)
    n = n_pol * n_keys
    ident = {"run_id": run, "key": key, "task_id": ["t"] * n,
             "seed": np.tile(np.arange(n_keys), n_pol), "epoch": np.ones(n, np.int64),
             "episode_id": [f"{r}-{k}" for r, k in zip(run, key, strict=True)]}  # fmt: skip
    samples = {**ident, "status": ["success"] * n, "trace_status": ["none"] * n}
    both = {c: v + v if isinstance(v, list) else np.concatenate([v, v]) for c, v in ident.items()}
    values = np.concatenate([(rng.random(n) < skill), rng.gamma(4, 5, n).round() * (1 + skill)])
    scores = {**both, "metric": ["success"] * n + ["steps"] * n, "value": values.astype(float),
              "valid": np.ones(2 * n, bool), "skip_reason": pa.nulls(2 * n, pa.string()),
              "source": ["evallog"] * (2 * n), "source_kind": ["imported"] * (2 * n),
              "scorer_version": [""] * (2 * n)}  # fmt: skip
    store = commit(tmp_path / "s", runs, samples, scores)
    got = store.pareto(cost="steps")
    assert got.frame.height == n_pol and got.pairing == "paired" and got.n_resamples == 1_000
    f = got.frame
    want = dominated_by(f["quality"].to_numpy(), f["cost"].to_numpy()) == 0
    assert f["on_front"].to_list() == want.tolist()
