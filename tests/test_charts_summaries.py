"""The across-task charts take task_summaries' frames as they are and render offline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from PIL import Image

from hylo_analytics import charts
from hylo_analytics.aggregate.summaries import TaskSummaries, task_summaries


@pytest.fixture(scope="module")
def summaries() -> TaskSummaries:
    rng = np.random.default_rng(0)
    rows = [
        {"agent_name": agent, "run_id": agent, "task_id": f"t{t}", "key": f"t{t}#{e}",
         "metric": "success", "value": float(rng.random() < p)}
        for agent, p in (("a", 0.8), ("b", 0.6)) for t in range(12) for e in range(20)
    ]  # fmt: skip
    return task_summaries(pl.DataFrame(rows), n_resamples=300, taus=np.linspace(0, 1, 21))


def _layers(spec: dict) -> dict[str, dict]:
    return {layer["mark"]["type"]: layer for layer in spec["layer"]}


def test_profile_chart_draws_lines_and_bands(summaries: TaskSummaries, tmp_path: Path) -> None:
    spec = charts.performance_profiles(summaries.profiles).to_dict()
    layers = _layers(spec)
    assert set(layers) == {"area", "line"}
    assert (layers["area"]["encoding"]["y"]["field"], layers["area"]["encoding"]["y2"]["field"]) == (
        "ci_low", "ci_high")  # fmt: skip
    assert layers["line"]["encoding"]["color"]["field"] == "agent_name"
    assert len(spec["data"]["values"]) == 2 * 21
    png = charts.save(charts.performance_profiles(summaries.profiles), tmp_path / "profile.png")
    pixels = np.asarray(Image.open(png).convert("L"), dtype=float)
    assert pixels.shape[1] > 400 and pixels.std() > 10
    svg = charts.save(charts.iqm_intervals(summaries.summary), tmp_path / "iqm.svg").read_text()
    assert svg.startswith("<svg") and "iqm" in svg and "mean" in svg


def test_charts_refuse_a_frame_missing_columns(summaries: TaskSummaries) -> None:
    with pytest.raises(ValueError, match="performance_profiles: the frame lacks"):
        charts.performance_profiles(summaries.summary)
    with pytest.raises(ValueError, match="iqm_intervals: the frame lacks"):
        charts.iqm_intervals(summaries.profiles)
