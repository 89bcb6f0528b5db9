"""The small-n pooling chart takes shrunk_rates' frame as it is and renders offline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from PIL import Image

from hylo_analytics import charts
from hylo_analytics.aggregate import shrunk_rates
from hylo_analytics.charts.shrinkage import MAX_GROUPS


def _frame(runs: int = 2, tasks: int = 8) -> pl.DataFrame:
    rng = np.random.default_rng(0)
    rows = [
        {"run_id": f"run-{r}", "benchmark_id": "libero_10", "split": "test",
         "task_id": f"task {t}", "key": f"t{t}#{e}", "metric": "success",
         "value": float(rng.random() < 0.2 + 0.08 * t)}
        for r in range(runs) for t in range(tasks) for e in range(10)
    ]  # fmt: skip
    return shrunk_rates(pl.DataFrame(rows))


def test_one_group_draws_both_rates_their_intervals_and_the_move(tmp_path: Path) -> None:
    frame = _frame(runs=1)
    spec = charts.shrinkage(frame).to_dict()
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert marks == ["rule", "rule", "line", "point"]
    assert len(spec["data"]["values"]) == 2 * frame.height  # a raw and a shrunk row per task
    assert "run-0 · libero_10 · test" in spec["title"]["text"]
    png = charts.save(charts.shrinkage(frame), tmp_path / "one.png")
    pixels = np.asarray(Image.open(png).convert("RGB"), dtype=float)
    assert pixels.shape[1] > 600 and pixels.std() > 10
    blue = (np.abs(pixels - [0, 114, 178]).sum(axis=2) < 40).sum()
    assert blue > 500  # the shrunk rates and their intervals are drawn


def test_several_groups_are_panels(tmp_path: Path) -> None:
    frame = _frame(runs=3)
    spec = charts.shrinkage(frame).to_dict()
    assert spec["facet"]["row"]["field"] == "_group"
    svg = charts.save(charts.shrinkage(frame), tmp_path / "three.svg").read_text()
    assert svg.startswith("<svg") and "run-2 · libero_10 · test" in svg


def test_refusals() -> None:
    with pytest.raises(ValueError, match="shrinkage: the frame lacks"):
        charts.shrinkage(_frame(runs=1).drop("shrunk_lo"))
    with pytest.raises(ValueError, match=f"at most {MAX_GROUPS} groups"):
        charts.shrinkage(_frame(runs=MAX_GROUPS + 1, tasks=2))
    with pytest.raises(ValueError, match="lacks task column"):
        charts.shrinkage(_frame(runs=1), task=["episode"])
