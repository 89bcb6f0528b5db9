"""The pooled comparison on the real LIBERO results (3 policies x 4 suites, vla-eval): X-VLA
against pi05 under the harness's convention (a timeout is a failure), cross-checked with the
mean of the suites' ``overall_success_rate`` differences in the harness's own files."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics.stats import mcnemar_p

SUITES = ("libero_10", "libero_goal", "libero_object", "libero_spatial")


@pytest.fixture(scope="module")
def vla(tmp_path_factory: pytest.TempPathFactory, real_dir: Path) -> ha.Store:
    store = ha.open_store(tmp_path_factory.mktemp("pooled") / "store")
    store.ingest(real_dir / "vla-eval-harness", progress=False)
    return store


def _rate(real_dir: Path, agent: str, suite: str) -> float:
    doc = json.loads((real_dir / "vla-eval-harness" / f"{agent}_{suite}.json").read_text())
    return float(doc["overall_success_rate"])


@pytest.mark.slow
def test_xvla_against_pi05_pooled_over_the_libero_suites(vla: ha.Store, real_dir: Path) -> None:
    out = vla.pooled_compare("agent=xvla", "agent=pi05")
    assert out["suite"].to_list() == [*SUITES, "pooled"]
    assert set(out["errors"]) == {"failure"}
    published = [_rate(real_dir, "xvla", s) - _rate(real_dir, "pi05", s) for s in SUITES]
    suites = out.filter(pl.col("level") == "suite")
    assert suites["mean_diff"].to_list() == pytest.approx(published, abs=1e-12)
    pooled = out.filter(pl.col("level") == "pooled").row(0, named=True)
    assert pooled["mean_diff"] == pytest.approx(sum(published) / 4, abs=1e-12) == 0.013
    assert (pooled["n_pairs"], pooled["candidate_wins"], pooled["parent_wins"]) == (2000, 68, 42)
    # 500 episodes a suite: 1/S is n_s/N, so the sign-flip test is the pooled McNemar test
    assert pooled["p_value"] == pytest.approx(mcnemar_p([68], [42])[0], rel=1e-9)
    assert pooled["p_value"] == pytest.approx(pooled["p_pooled_mcnemar"], rel=1e-9)
    assert pooled["ci_low"] == pytest.approx(0.00243, abs=1e-5)
    assert pooled["ci_high"] == pytest.approx(0.02402, abs=1e-5)
    assert pooled["test_method"].endswith("(exact)")
    # libero_spatial alone carries it; the pooled row holds up after Holm over 5 rows
    assert pooled["family_size"] == 5 and pooled["p_holm"] < 0.05
    assert pooled["verdict"] == "improved"


def test_the_errors_convention_is_a_switch(vla: ha.Store) -> None:
    out = vla.pooled_compare("agent=xvla", "agent=pi05", errors="exclude")
    pooled = out.filter(pl.col("level") == "pooled").row(0, named=True)
    assert pooled["errors"] == "exclude" and pooled["n_pairs"] < 2000


def test_suites_must_match(vla: ha.Store) -> None:
    with pytest.raises(ValueError, match="one side only"):
        vla.pooled_compare("agent=xvla", "agent=pi05,benchmark=libero_10")
    with pytest.raises(ValueError, match="several runs"):
        vla.pooled_compare("benchmark=libero_10", "agent=pi05")


def test_the_pooled_comparison_on_the_cli(
    vla: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    from hylo_analytics.cli import main

    base = ["compare", "--store", str(vla.root), "--pooled", "--candidate", "agent=xvla"]
    assert main([*base, "--parent", "agent=pi05", "--wide"]) == 0
    text = capsys.readouterr().out
    assert "0.013" in text and "stratified sign-flip" in text and "p_pooled_mcnemar weighs" in text
    assert main([*base, "--parent", "agent=pi05", "--by", "task_id"]) == 2
    assert "--pooled fixes --by" in capsys.readouterr().err


@pytest.mark.slow
def test_mart_pooled_compare_holds_the_same_counts(vla: ha.Store) -> None:
    """The SQL mart (declared pairs) and Store.pooled_compare agree on every count and on
    the pooled difference, for a 0/1 and a numeric metric."""
    for suite in SUITES:
        vla.declare_parent(
            vla.resolve_run(f"agent=xvla,benchmark={suite}"),
            vla.resolve_run(f"agent=pi05,benchmark={suite}"),
        )
    mart = vla.sql(
        "select * from mart_pooled_compare where candidate_agent = 'xvla' "
        "and parent_agent = 'pi05' and metric in ('success', 'steps') "
        "order by metric, level desc, suite"
    )
    py = vla.pooled_compare("agent=xvla", "agent=pi05", metrics=["success", "steps"],
                            n_resamples=500)  # fmt: skip
    py = py.sort("metric", "level", "suite", descending=[False, True, False])
    assert mart.height == 2 * 5 == py.height
    cols = ["metric", "level", "errors", "n_pairs", "candidate_wins", "parent_wins", "ties",
            "n_dropped"]  # fmt: skip
    assert mart.select(cols).rows() == py.select(cols).rows()
    assert mart["mean_diff"].to_list() == pytest.approx(py["mean_diff"].to_list(), rel=1e-12)
    assert mart["weight"].to_list() == pytest.approx(py["weight"].to_list(), rel=1e-12)
    assert mart.filter(pl.col("level") == "suite")["suite"].to_list() == list(SUITES) * 2
