"""``hylo-analytics aggregate`` on the sample store."""

from __future__ import annotations

import io

import polars as pl

from hylo_analytics.cli import main


def test_aggregate_command_writes_csv(sample_store, tmp_path, capsys):
    out = tmp_path / "agg.csv"
    code = main(
        ["aggregate", "--store", str(sample_store.root), "--by", "run_id,task_id",
         "--metric", "success", "--resamples", "200", "--format", "csv", "-o", str(out)]
    )  # fmt: skip
    assert code == 0
    df = pl.read_csv(io.StringIO(out.read_text()))
    assert df.height == 30
    assert set(df["ci_method"]) == {"wilson"}
    assert (df["n_total"] == df["n_valid"] + df["n_skipped"]).all()


def test_aggregate_command_reports_bad_options(sample_store, capsys):
    code = main(["aggregate", "--store", str(sample_store.root), "--metric", "nope"])
    assert code == 2
    assert "no scores of metric(s) ['nope']" in capsys.readouterr().err
