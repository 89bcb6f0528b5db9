"""``hylo-analytics scorecard`` on the sample store."""

from __future__ import annotations

import io
import json

import polars as pl
import pytest

from hylo_analytics.cli import main

SPECS = """\
name: tabletop
metrics:
  - {id: success, primary: true, weight: 2, kind: binary, higher_is_better: true,
     statistics: [mean, stderr, ci]}
  - {id: steps, aggregator: median, normalizer: 'inverse_minmax:0:50', kind: count}
metadata:
  protocols:
    quick: [success]
"""


@pytest.fixture()
def specs(tmp_path):
    path = tmp_path / "metrics.yaml"
    path.write_text(SPECS)
    return path


def test_table_names_the_primary_and_every_run_has_a_score(sample_store, specs, capsys):
    args = ["scorecard", "--store", str(sample_store.root), "--metrics", str(specs)]
    assert main([*args, "--resamples", "200"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("primary metric: success")
    assert out.count("overall") == 3 and "median" in out and "┆ incomplete" not in out


def test_csv_holds_metric_rows_then_the_weighted_score(sample_store, specs, tmp_path):
    out = tmp_path / "card.csv"
    args = ["scorecard", "--store", str(sample_store.root), "--metrics", str(specs)]
    assert main([*args, "--run", "run-octo-ft-1.0", "--format", "csv", "-o", str(out)]) == 0
    df = pl.read_csv(io.StringIO(out.read_text()))
    assert df["row"].to_list() == ["metric", "metric", "overall"]
    succ, steps, overall = df.iter_rows(named=True)
    assert steps["aggregator"] == "median" and steps["value"] == 22.0  # the sample's median
    assert steps["normalized_value"] == pytest.approx((50 - 22) / 50)
    want = (2 * succ["normalized_value"] + steps["normalized_value"]) / 3
    assert overall["value"] == pytest.approx(want) and overall["status"] == "ok"


def test_json_and_protocol(sample_store, specs, capsys):
    args = ["scorecard", "--store", str(sample_store.root), "--metrics", str(specs)]
    assert main([*args, "--protocol", "quick", "--format", "json", "--resamples", "200"]) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["primary"] == "success" and card["metrics"] == ["success"]
    assert [r["complete"] for r in card["runs"]] == [True, True, True]
    assert main([*args, "--protocol", "quik"]) == 2
    assert "did you mean 'quick' for 'quik'?" in capsys.readouterr().err


def test_errors_name_the_file_and_field(sample_store, tmp_path, capsys):
    store = ["scorecard", "--store", str(sample_store.root)]
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {id: success, primary: true, aggregator: mode}\n")
    assert main([*store, "--metrics", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml: BenchmarkSpec.metrics[0].aggregator: metric 'success': 'mode'" in err
    two = tmp_path / "two.yaml"
    two.write_text("- {id: success, primary: true}\n- {id: steps, primary: true}\n")
    assert main([*store, "--metrics", str(two)]) == 2
    assert "exactly one metric must be primary, found 2 (success, steps)" in capsys.readouterr().err
    assert main([*store, "--protocol", "quick"]) == 2
    assert "--protocol needs --metrics FILE" in capsys.readouterr().err


def test_help_explains_the_incomplete_score(capsys):
    with pytest.raises(SystemExit):
        main(["scorecard", "--help"])
    text = capsys.readouterr().out.lower()
    assert "aggregator" in text and "incomplete" in text and "exactly one metric" in text
