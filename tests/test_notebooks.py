"""Every notebook in notebooks/ runs top to bottom, in under a minute, and is committed clean."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks() -> None:
    names = [p.name for p in NOTEBOOKS]
    assert {"01_quickstart.ipynb", "03_sql_cookbook.ipynb"} <= set(names)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    for cell in book.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{path.name}: cell {cell.get('id')} has outputs; strip them before committing"
            )


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, request: pytest.FixtureRequest) -> None:
    book = nbformat.read(path, as_version=4)
    if any("shared/data/real" in "".join(c.source) for c in book.cells):
        request.getfixturevalue("real_dir")  # skips, or fails under HYLO_REQUIRE_REAL_DATA=1
    client = NotebookClient(
        book,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},  # relative ../data paths resolve
    )
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError naming the failing cell
    seconds = time.perf_counter() - start
    assert seconds < 60, f"{path.name} took {seconds:.0f}s; notebooks must run in under a minute"
    errors = [
        out
        for cell in book.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]
    assert not errors
    empty = [
        f"cell {cell.get('id')}"
        for cell in book.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        for spec in _vega_specs(out)
        if not _has_data(spec)
    ]
    assert not empty, f"{path.name}: charts with no data drawn (an axis only): {empty}"


def _vega_specs(output: dict) -> list[dict]:  # type: ignore[type-arg]
    """The Vega-Lite specs a cell displayed: altair's mimetype, or the spec the project's
    inline renderer hands to ``vegaEmbed`` in its HTML."""
    import json
    import re

    data = output.get("data", {}) if isinstance(output, dict) else {}
    specs = [v for k, v in data.items() if k.startswith("application/vnd.vegalite")]
    html = data.get("text/html", "")
    decoder = json.JSONDecoder()
    specs += [
        decoder.raw_decode(html, m.end())[0] for m in re.finditer(r'vegaEmbed\("#[^"]+", ', html)
    ]
    return [s for s in specs if isinstance(s, dict)]


def _has_data(spec: dict) -> bool:  # type: ignore[type-arg]
    """Whether any of a spec's data (its own, a layer's, a named dataset) holds a row."""
    values = [spec.get("data", {}).get("values")] if isinstance(spec.get("data"), dict) else []
    values += [ds for ds in spec.get("datasets", {}).values()]
    for layer in spec.get("layer", []) + spec.get("hconcat", []) + spec.get("vconcat", []):
        if isinstance(layer, dict) and _has_data(layer):
            return True
    return any(v for v in values if v)


def test_an_empty_chart_in_an_output_is_found() -> None:
    """The check above finds a chart drawn from no rows (an axis only), in the HTML the
    notebooks' renderer writes, and passes one with rows."""
    import altair as alt

    from hylo_analytics.charts._style import inline_renderer

    def output(values: list[dict]) -> dict:  # type: ignore[type-arg]
        chart = alt.Chart(alt.Data(values=values)).mark_point().encode(x="x:Q")
        return {"output_type": "display_data", "data": inline_renderer(chart.to_dict())}

    empty, full = _vega_specs(output([])), _vega_specs(output([{"x": 1}]))
    assert len(empty) == len(full) == 1
    assert not _has_data(empty[0]) and _has_data(full[0])


def test_a_forest_of_overall_rows_draws_them() -> None:
    """Issue 40: notebook 04's suites (overall rows, one per comparison) were dropped and an
    empty chart saved silently; they are drawn, and a frame of no rows is refused."""
    import polars as pl

    from hylo_analytics import charts

    rows = pl.DataFrame({"candidate": ["a", "b"], "metric": "success", "level": "overall",
                         "task_id": ["a vs p · s1", "b vs p · s1"], "mean_diff": [0.1, -0.05],
                         "ci_low": [0.0, -0.1], "ci_high": [0.2, 0.0], "ci_adj_low": [-0.02, -0.12],
                         "ci_adj_high": [0.22, 0.02], "ci_adj_level": [0.9, 0.9],
                         "verdict": ["inconclusive", "inconclusive"], "p_value": [0.04, 0.3],
                         "p_verdict": [0.08, 0.6], "n_pairs": [50, 50], "candidate_wins": [8, 3],
                         "parent_wins": [3, 5], "ties": [39, 42]})  # fmt: skip
    spec = charts.paired_forest(rows).to_dict()
    drawn = next(layer["data"]["values"] for layer in spec["layer"] if "data" in layer
                 and layer["data"]["values"] and "task_id" in layer["data"]["values"][0])  # fmt: skip
    assert [r["task_id"] for r in drawn] == ["a vs p · s1", "b vs p · s1"]
    # the interval drawn is the verdict's (90 %), named so
    assert [r["ci_low"] for r in drawn] == [-0.02, -0.12]
    assert "the verdict's 90% interval" in spec["title"]["subtitle"]
    with pytest.raises(ValueError, match="no rows to draw"):
        charts.paired_forest(rows.head(0))
