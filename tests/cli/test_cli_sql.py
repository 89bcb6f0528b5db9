"""``hylo-analytics sql`` on every view of the sample store, in every output format."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import hylo_analytics as ha
from hylo_analytics.cli import main
from hylo_analytics.cli._common import FORMATS


def _bag(values: list[Any]) -> list[str]:
    """``values`` as sorted JSON texts, lists sorted too: the order list() aggregates in (and so
    the rows' order) may differ between two runs of one query."""

    def norm(v: Any) -> Any:
        if isinstance(v, list):
            return sorted((norm(x) for x in v), key=json.dumps)
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v

    return sorted(json.dumps(norm(v)) for v in values)


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> ha.Store:
    store = ha.open_store(tmp_path_factory.mktemp("sql") / "store")
    store.ingest(sample_dir, progress=False)
    store.score()
    return store


@pytest.mark.slow
def test_every_view_in_every_format(
    scored: ha.Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CSV cells are flat: list and struct columns are written as JSON text, nulls empty."""
    views = scored.sql("SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1")
    nested_values = 0
    for view in views["view_name"]:
        query = f'SELECT * FROM "{view}" ORDER BY ALL'  # one row order for every format
        expected = scored.sql(query)
        for fmt in FORMATS:
            out = tmp_path / f"{view}.{fmt}"
            argv = ["sql", "--store", str(scored.root), "--format", fmt, query, "-o", str(out)]
            assert main(argv) == 0, (view, fmt, capsys.readouterr().err)
            if fmt == "parquet":
                assert_frame_equal(pl.read_parquet(out), expected)  # floats: summation order
            elif fmt == "json":
                assert len(json.loads(out.read_text())) == expected.height, view
            elif fmt == "table":
                assert out.read_text().strip(), view
        text = (tmp_path / f"{view}.csv").read_text()
        nested = [c for c, t in expected.schema.items() if t.is_nested()]
        got = pl.read_csv(io.StringIO(text), infer_schema=False) if text.strip() else None
        if got is None:
            assert not expected.columns, view
            continue
        assert got.columns == expected.columns and got.height == expected.height, view
        for c in nested:
            cells = [None if v is None else json.loads(v) for v in got[c].to_list()]
            assert _bag(cells) == _bag(expected[c].to_list()), (view, c)
            nested_values += sum(v is not None for v in cells)
    assert nested_values > 0  # the JSON encoding was exercised on real values


def test_bytes_are_written_as_base64_in_text_formats(sample_store, capsys) -> None:
    """``trace_files.data`` (compressed bytes) prints as base64 that gives the bytes back."""
    import base64
    import json

    q = "select path, data from trace_files order by path limit 1"
    assert main(["sql", q, "--store", str(sample_store.root), "--format", "json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    stored = sample_store.sql(q)["data"][0]
    assert base64.b64decode(row["data"]) == stored
