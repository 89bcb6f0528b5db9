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


def test_the_table_shows_every_header_whole(sample_store, capsys):
    """Headers are never cut (issue 27): polars cut a name at the width of its column's
    text; ``--wide`` shows every column, past polars' 30."""
    long = "success_rate_errors_as_failures_of_the_run"
    cols = ", ".join([f"1 as {long}", *(f"{i} as c{i}" for i in range(40))])
    assert main(["sql", f"select {cols}", "--store", str(sample_store.root), "--wide"]) == 0
    out = capsys.readouterr().out
    assert long in out and "c39" in out
    assert "…" not in out
