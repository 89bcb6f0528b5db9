"""The flip matrix heatmap: sorted, capped and counted, errors apart, hostile names inert."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from flip_data import commit, episode_rows, literal_store, many_runs_store, run_row
from hostile_data import CORPUS, assert_nothing_injected
from PIL import Image

import hylo_analytics as ha
from hylo_analytics import charts
from hylo_analytics.errors import InputError


def _views(chart: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The spec, its grid and its bars."""
    spec = chart.to_dict()
    return spec, spec["hconcat"][0], spec["hconcat"][1]


def _png_colours(path: Path) -> set[tuple[int, int, int]]:
    with Image.open(path) as image:
        pixels = np.asarray(image.convert("RGB")).reshape(-1, 3)
    return {tuple(int(c) for c in p) for p in np.unique(pixels, axis=0)}


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


@pytest.fixture(scope="module")
def literal(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    return literal_store(tmp_path_factory.mktemp("chart") / "store")


def test_a_small_matrix_is_drawn_whole_with_errors_apart(literal: ha.Store) -> None:
    fm = literal.flip_matrix()
    chart = charts.flip_matrix(fm)
    spec, grid, bars = _views(chart)
    cells = grid["data"]["values"]
    assert len(cells) == 4 * 6 and len(bars["data"]["values"]) == 6
    assert grid["encoding"]["x"]["sort"] == ["1.2.0-rc1", "1.2.0", "1.9.0", "1.10.0"]
    assert grid["encoding"]["y"]["sort"] == ["t0#1", "t2#1", "t1#0", "t1#1", "t0#0", "t2#0"]
    scale = grid["encoding"]["color"]["scale"]
    colours = dict(zip(scale["domain"], scale["range"], strict=True))
    assert len(set(colours.values())) == len(colours)  # error, failure, missing: each its own
    assert {c["outcome"] for c in cells} == {"success", "failure", "partial", "error",
                                              "abstained", "missing"}  # fmt: skip
    subtitle = spec["title"]["subtitle"]
    assert subtitle[0].startswith("showing 4 of 4 runs: the latest, ordered by natural version")
    assert subtitle[1].startswith("showing 6 of 6 keys")
    assert "latest run r-a: 1 keys newly broken, 1 newly errored, 1 newly fixed" in subtitle[2]
    assert subtitle[3].startswith("1 keys fail in every run")


@pytest.mark.slow
def test_the_small_png_draws_every_outcome(literal: ha.Store, tmp_path: Path) -> None:
    chart = charts.flip_matrix(literal.flip_matrix())
    scale = chart.to_dict()["hconcat"][0]["encoding"]["color"]["scale"]
    colours = dict(zip(scale["domain"], scale["range"], strict=True))
    png = charts.save(chart, tmp_path / "small.png")
    seen = _png_colours(png)
    for outcome in ("success", "failure", "error", "partial"):
        assert _rgb(colours[outcome]) in seen, outcome  # every outcome is drawn


@pytest.mark.slow
def test_2000_runs_draw_the_latest_50_and_100_keys(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    store, _ = many_runs_store(tmp_path_factory.mktemp("chart2000") / "store")
    fm = store.flip_matrix()
    chart = charts.flip_matrix(fm)
    spec, grid, bars = _views(chart)
    cells = grid["data"]["values"]
    assert len(cells) == 50 * 100 and len(bars["data"]["values"]) == 100
    shown = grid["encoding"]["x"]["sort"]
    assert shown == [f"2.{i}.0" for i in range(1950, 2000)]  # the latest, in version order
    keys = grid["encoding"]["y"]["sort"]
    changed = fm.keys.filter(
        pl.col("newly_broken") | pl.col("newly_fixed") | pl.col("newly_errored")
    )
    assert 0 < changed.height <= 100 and set(changed["key"]) <= set(keys)  # none left out
    rates = dict(zip(fm.keys["key"], fm.keys["solve_rate"], strict=True))
    drawn = [rates[k] for k in keys]
    assert drawn == sorted(drawn)  # the hardest at the top
    subtitle = spec["title"]["subtitle"]
    assert subtitle[0].startswith("showing 50 of 2,000 runs")
    assert subtitle[1].startswith("showing 100 of 120 keys")
    n_broken = int(fm.keys["newly_broken"].sum())
    assert f"{n_broken:,} keys newly broken" in subtitle[2]
    small = charts.flip_matrix(fm, max_runs=7, max_keys=9)
    _, grid, _ = _views(small)
    assert len(grid["data"]["values"]) == 63
    assert small.to_dict()["title"]["subtitle"][0].startswith("showing 7 of 2,000 runs")


@pytest.mark.slow
def test_2000_runs_render_to_png(tmp_path_factory: pytest.TempPathFactory) -> None:
    store, _ = many_runs_store(tmp_path_factory.mktemp("png2000") / "store", n_keys=150)
    path = charts.save(
        charts.flip_matrix(store.flip_matrix()), tmp_path_factory.mktemp("p") / "m.png"
    )
    with Image.open(path) as image:
        width, height = image.size
    assert 1000 < width < 4000 and 1000 < height < 4000  # 50 x 100 cells at scale 2


def test_one_suite_is_drawn_or_named(tmp_path: Path) -> None:
    runs = [run_row("x1", "1", "hylo.evallog/v0.1", "b1"),
            run_row("y1", "1", "hylo.evallog/v0.1", "b2")]  # fmt: skip
    samples, scores = [], []
    for run in ("x1", "y1"):
        got = episode_rows(run, "k#0", 1)
        samples += got[0]
        scores += got[1]
    fm = commit(tmp_path / "s", runs, samples, scores).flip_matrix()
    with pytest.raises(InputError, match=r"draws one suite.*'b1'.*'b2'"):
        charts.flip_matrix(fm)
    _, grid, _ = _views(charts.flip_matrix(fm, suite="b2"))
    assert [c["run_id"] for c in grid["data"]["values"]] == ["y1"]
    _, grid, _ = _views(charts.flip_matrix(fm, suite=("b1", "test")))
    assert [c["run_id"] for c in grid["data"]["values"]] == ["x1"]
    with pytest.raises(InputError, match="none matches"):
        charts.flip_matrix(fm, suite="b3")
    with pytest.raises(InputError, match="max_runs"):
        charts.flip_matrix(fm, suite="b2", max_runs=0)


@pytest.mark.slow
def test_hostile_run_and_key_names_stay_inert(tmp_path: Path) -> None:
    ids = [f"r{i}{name}" for i, name in enumerate(CORPUS[:4])]
    ids[0] = "r0" + CORPUS[6]  # the latest run (its version sorts last): ESC and BEL in it
    runs = [run_row(r, f"1.{i}", "hylo.evallog/v0.1", at=i) for i, r in enumerate(ids)]
    runs[0]["agent_version"] = CORPUS[6]  # the axis shows versions: one of them hostile too
    samples, scores = [], []
    for i, run in enumerate(ids):
        for j, name in enumerate(CORPUS):
            got = episode_rows(run, f"{name}#{j}", (i + j) % 2)
            samples += got[0]
            scores += got[1]
    fm = commit(tmp_path / "s", runs, samples, scores).flip_matrix()
    chart = charts.flip_matrix(fm, title=CORPUS[0])
    page = charts.save(chart, tmp_path / "m.html").read_text()
    assert_nothing_injected(page, scripts=2)  # the vega bundle and the embed call
    assert "\\u003c/script\\u003e" in page
    png = charts.save(chart, tmp_path / "m.png")  # vl-convert takes ESC and BEL as text
    assert png.stat().st_size > 0
    subtitle = chart.to_dict()["title"]["subtitle"]
    assert any("r0esc \ufffd[2J" in line for line in subtitle)  # named, ESC shown as U+FFFD
    assert all("\x1b" not in line and "\x07" not in line for line in subtitle)
