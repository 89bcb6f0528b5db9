"""The pass@k / pass^k chart: two curves per group with their bands, drawn from
``Store.pass_at_k`` as it is, rendered to PNG, capped, and inert under hostile names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from flip_data import commit, episode_rows, run_row
from hostile_data import CORPUS, assert_nothing_injected
from PIL import Image
from repeated_data import epochs_store

import hylo_analytics as ha
from hylo_analytics import charts
from hylo_analytics.charts.pass_k import MAX_GROUPS
from hylo_analytics.errors import InputError


@pytest.fixture(scope="module")
def curves(tmp_path_factory: pytest.TempPathFactory) -> pl.DataFrame:
    store, _ = epochs_store(tmp_path_factory.mktemp("chart") / "s", 30, 40, 4, agents=3)
    return store.pass_at_k(by=["agent_name"], k=range(1, 21))


def test_two_curves_and_two_bands_per_group(curves: pl.DataFrame, tmp_path: Path) -> None:
    chart = charts.pass_k_curves(curves)
    spec = chart.to_dict()
    band, line = spec["layer"]
    assert band["mark"]["type"] == "area" and line["mark"]["type"] == "line"
    rows = spec["data"]["values"] if "data" in spec else band["data"]["values"]
    assert len(rows) == 3 * 20 * 2  # groups x k x curves
    assert {r["curve"] for r in rows} == {"pass@k (any of k succeeds)", "pass^k (all k succeed)"}
    at = curves.filter(pl.col("agent_name") == "policy-001", pl.col("k") == 3).row(0, named=True)
    got = next(r for r in rows if r["agent_name"] == "policy-001" and r["k"] == 3
               and r["curve"].startswith("pass@"))  # fmt: skip
    assert (got["estimate"], got["low"], got["high"]) == pytest.approx(
        (at["pass_at_k"], at["pass_at_k_low"], at["pass_at_k_high"])
    )
    assert "wilson" in spec["title"]["subtitle"][0] and len(spec["title"]["subtitle"]) == 1
    png = charts.save(chart, tmp_path / "pass_k.png")
    with Image.open(png) as image:
        assert image.width > 600 and image.height > 400
        colours = np.asarray(image.convert("RGB")).reshape(-1, 3)
    assert (np.abs(colours.astype(int) - [0, 114, 178]).sum(axis=1) < 30).any()  # a line


def test_items_short_of_k_are_said(curves: pl.DataFrame) -> None:
    short = curves.with_columns(n_items_short=pl.when(pl.col("k") >= 15).then(3).otherwise(0))
    subtitle = " ".join(charts.pass_k_curves(short).to_dict()["title"]["subtitle"])
    assert "from k = 15 some items have fewer than k samples" in subtitle


def test_too_many_groups_or_nothing_is_refused(curves: pl.DataFrame) -> None:
    many = pl.concat(
        [curves.with_columns(agent_name=pl.lit(f"p{i}")) for i in range(MAX_GROUPS + 1)]
    )
    with pytest.raises(InputError, match="draws at most"):
        charts.pass_k_curves(many)
    with pytest.raises(InputError, match="lacks column"):
        charts.pass_k_curves(curves.drop("pass_hat_k_low"))
    with pytest.raises(InputError, match="no point to draw"):
        charts.pass_k_curves(curves.with_columns(pass_at_k=pl.lit(None, pl.Float64)))


def test_hostile_run_names_stay_inert(tmp_path: Path) -> None:
    ids = [f"r{i}{name}" for i, name in enumerate(CORPUS[:4])]
    ids[0] = "r0" + CORPUS[6] + CORPUS[0]
    runs = [run_row(r, "1.0", "hylo.evallog/v0.1", at=i) for i, r in enumerate(ids)]
    samples, scores = [], []
    for i, run in enumerate(ids):
        for j, name in enumerate(CORPUS):
            got = episode_rows(run, f"{name}#{j}", tuple((i + j + e) % 2 for e in range(3)))
            samples += got[0]
            scores += got[1]
    store: ha.Store = commit(tmp_path / "s", runs, samples, scores)
    chart = charts.pass_k_curves(store.pass_at_k(), title=CORPUS[0])
    page = charts.save(chart, tmp_path / "c.html").read_text()
    assert_nothing_injected(page, scripts=2)  # the vega bundle and the embed call
    assert "\\u003c/script\\u003e" in page
    assert charts.save(chart, tmp_path / "c.png").stat().st_size > 0  # ESC and BEL as text
