"""Every real dataset end to end: ingest -> score -> aggregate -> compare -> report -> export.

The files are the real results in ``../shared/data/real`` (vla-eval LIBERO, inspect-robots),
never copied into the repository. The report is rendered by headless Chromium to a PNG
(``HYLO_SCREENSHOT_DIR`` keeps a copy to look at); CI installs Chromium and sets
``HYLO_REQUIRE_BROWSER=1`` so the screenshot can never be skipped there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

import hylo_analytics as ha

pytestmark = pytest.mark.slow  # every test reads a store of the real files
SPATIAL = "benchmark=libero_spatial"


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("HYLO_REQUIRE_BROWSER", "") == "1":
        pytest.fail("no Chromium on PATH; HYLO_REQUIRE_BROWSER=1 makes that a failure")
    pytest.skip("no Chromium on PATH (apt-get install chromium); CI requires it")


def screenshot(page: Path, png: Path, tmp: Path) -> Path:
    """``page`` rendered by headless Chromium to ``png`` (a tall window: the whole report)."""
    args = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={tmp / 'chromium-profile'}",
        f"--screenshot={png}",
        "--window-size=1280,5200",
        page.resolve().as_uri(),
    ]
    subprocess.run(args, check=True, capture_output=True, timeout=180)
    keep = os.environ.get("HYLO_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / png.name)
    return png


def _looks_drawn(png: Path) -> None:
    from PIL import Image

    image = Image.open(png).convert("RGB")
    assert image.size == (1280, 5200)
    colours = image.resize((320, 1300)).getcolors(maxcolors=1 << 16)
    # a blank or error page has a handful of colours; charts and tables have hundreds
    assert colours is not None and len(colours) > 100


@pytest.fixture(scope="module")
def vla(tmp_path_factory: pytest.TempPathFactory, real_dir: Path) -> ha.Store:
    store = ha.open_store(tmp_path_factory.mktemp("vla") / "store")
    report = store.ingest(real_dir / "vla-eval-harness", progress=False)
    assert dict(report.formats) == {"vla-eval": 12}
    # the leaderboard files are another format: kept out, and said so
    assert store.sql("select count(*) from quarantine").item() == 2
    return store


@pytest.mark.browser
def test_vla_eval_end_to_end(vla: ha.Store, real_dir: Path, tmp_path: Path) -> None:
    scored = vla.score()
    # no run has traces: the built-ins leave the logged scores alone instead of abstaining
    assert len(scored.untraced_runs) == 12 and "have no traces" in str(scored)
    assert vla.sql("select count(*) from scores where source like 'scorer:%'").item() == 0

    # the harness's own numbers, by default (its convention: a timeout is a failure)
    _assert_harness_rates(vla, real_dir)

    comparison = vla.compare(f"agent=pi05,{SPATIAL}", f"agent=xvla,{SPATIAL}", by=["task_id"])
    overall = comparison.filter(pl.col("level") == "overall").row(0, named=True)
    assert overall["errors"] == "failure"
    assert (overall["n_pairs"], overall["n_dropped"]) == (500, 0)
    assert (overall["candidate_wins"], overall["parent_wins"]) == (9, 36)
    assert comparison.filter(pl.col("level") != "overall").height == 10
    # the SQL pairing reads the runs under the same convention as Store.compare
    pi05_id, xvla_id = (vla.resolve_run(f"agent={a},{SPATIAL}") for a in ("pi05", "xvla"))
    vla.declare_parent(pi05_id, xvla_id)
    mart = vla.sql(
        "select errors, n_pairs, candidate_wins, parent_wins, n_dropped from mart_compare "
        "where candidate = $c and parent = $p and metric = 'success' and level = 'overall'",
        {"c": pi05_id, "p": xvla_id},
    ).row(0, named=True)
    assert mart == {"errors": "failure", "n_pairs": 500, "candidate_wins": 9,
                    "parent_wins": 36, "n_dropped": 0}  # fmt: skip
    excluded = vla.compare(f"agent=pi05,{SPATIAL}", f"agent=xvla,{SPATIAL}", errors="exclude")
    row = excluded.row(0, named=True)
    assert (row["errors"], row["n_pairs"], row["n_dropped"]) == ("exclude", 470, 30)
    assert (row["candidate_wins"], row["parent_wins"]) == (9, 7)

    # charts take the package's own frames as they are
    ha.charts.save(ha.charts.paired_forest(comparison), tmp_path / "forest.svg")
    tasks = vla.aggregate(by=["run_id", "task_id"], metrics=["success"])
    ha.charts.save(
        ha.charts.success_rate_by_task(tasks.filter(pl.col("run_id").str.contains("spatial"))),
        tmp_path / "tasks.svg",
    )

    report = ha.build_report(vla, f"agent=pi05,{SPATIAL}", f"agent=xvla,{SPATIAL}")
    page = report.save(tmp_path / "libero_spatial_report.html")
    text = page.read_text()
    assert "pi05" in text and "xvla" in text and "None" not in text  # no version: not "None"
    assert "pi05 \u2212 xvla, per task" in text  # the forest names the runs by their labels
    # beside the one suite, the same two policies over the four suites they share: the pooled
    # row is Store.pooled_compare's (suite-weighted, pi05 - xvla = -1.3 points)
    pooled = report.frames["pooled"].filter(pl.col("level") == "pooled").row(0, named=True)
    want = vla.pooled_compare("agent=pi05", "agent=xvla").filter(pl.col("level") == "pooled")
    assert pooled["mean_diff"] == pytest.approx(want["mean_diff"].item())
    assert pooled["mean_diff"] == pytest.approx(-0.013) and pooled["verdict"] == "regressed"
    assert "The same two policies over every suite they share" in text
    _looks_drawn(screenshot(page, tmp_path / "libero_spatial_report.png", tmp_path))

    pi05 = vla.resolve_run(f"agent=pi05,{SPATIAL}")
    exported = ha.export_evallog(vla, pi05, tmp_path / "out" / "pi05.json")
    again = ha.open_store(tmp_path / "again")
    again.ingest(exported, progress=False)
    # the run keeps its harness's convention through the export: the same default rate
    a = vla.aggregate(metrics=["success"]).filter(pl.col("run_id") == pi05)
    b = again.aggregate(metrics=["success"])
    assert b["errors"].item() == a["errors"].item() == "failure"
    assert (b["n_total"].item(), b["n_valid"].item(), b["n_errors"].item()) == (500, 500, 30)
    assert b["mean"].item() == pytest.approx(a["mean"].item()) == pytest.approx(0.926)
    excluded = again.aggregate(metrics=["success"], errors="exclude")
    assert excluded["n_valid"].item() == 470


# the harness's own averages over the four LIBERO suites (reproduced-performance table)
HARNESS_ORDER = ("xvla", "oft-joint", "pi05")


def _assert_harness_rates(vla: ha.Store, real_dir: Path) -> None:
    """Each run's default rate is its result file's ``overall_success_rate``, with the Wilson
    interval of that rate, in Python, SQL and the report alike; and the suites' average puts
    the policies in the harness's order (X-VLA > OFT > pi05)."""
    from hylo_analytics.report import report_frames
    from hylo_analytics.stats import wilson

    per_suite = vla.aggregate(by=["run_id", "agent_name", "split"], metrics=["success"])
    rates = vla.sql("select * from mart_success_rates")
    assert per_suite.height == rates.height == 12
    for row in per_suite.iter_rows(named=True):
        doc = json.loads(
            (real_dir / "vla-eval-harness" / f"{row['agent_name']}_{row['split']}.json").read_text()
        )
        want = doc["overall_success_rate"]
        assert row["errors"] == "failure" and row["n_valid"] == row["n_total"] == 500
        assert row["mean"] == pytest.approx(want, abs=1e-12)
        lo, hi = wilson([round(want * 500)], [500])
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo[0], hi[0]), rel=1e-12)
        sql = rates.filter(pl.col("run_id") == row["run_id"]).row(0, named=True)
        assert sql["errors"] == "failure"
        assert (sql["success_rate"], sql["ci_low"], sql["ci_high"]) == pytest.approx(
            (row["mean"], row["ci_low"], row["ci_high"]), rel=1e-12
        )
    means = (
        per_suite.group_by("agent_name").agg(pl.col("mean").mean()).sort("mean", descending=True)
    )
    assert tuple(means["agent_name"]) == HARNESS_ORDER
    assert means["mean"].to_list() == pytest.approx([0.9775, 0.9695, 0.9645], abs=1e-12)
    # the report shows the same rate for each run (its runs table: every run of the suite)
    frames = report_frames(vla, f"agent=pi05,{SPATIAL}", f"agent=xvla,{SPATIAL}", n_resamples=200)
    for run in frames["runs"].iter_rows(named=True):
        row = per_suite.filter(pl.col("run_id") == run["run"]).row(0, named=True)
        assert (run["errors"], run["success"], run["ci_low"]) == (
            "failure",
            pytest.approx(row["mean"], rel=1e-12),
            pytest.approx(row["ci_low"], rel=1e-12),
        )
    for task in frames["task_success"].iter_rows(named=True):
        assert task["success_rate"] is not None


def test_the_harness_rates_on_the_cli(
    vla: ha.Store, real_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``aggregate`` on the CLI prints the harness's own rate of every run, and the policy."""
    from hylo_analytics.cli import main

    argv = ["aggregate", "--store", str(vla.root), "--metric", "success", "--format", "json"]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 12
    runs = dict(vla.sql("select run_id, agent_name || '_' || split from runs").rows())
    for row in rows:
        doc = json.loads(
            (real_dir / "vla-eval-harness" / f"{runs[row['run_id']]}.json").read_text()
        )
        assert row["errors"] == "failure"
        assert row["mean"] == pytest.approx(doc["overall_success_rate"], abs=1e-12)
    assert main([*argv, "--errors", "exclude"]) == 0
    pi05 = [r for r in json.loads(capsys.readouterr().out) if r["n_errors"]]
    assert len(pi05) == 1 and pi05[0]["errors"] == "exclude" and pi05[0]["n_valid"] == 470


def test_inspect_robots_end_to_end(real_dir: Path, tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "store")
    assert dict(store.ingest(real_dir / "inspect-robots", progress=False).formats) == {
        "inspect-robots/v1": 2
    }
    assert store.score().untraced_runs == tuple(
        sorted(store.sql("select run_id from runs")["run_id"])
    )
    ok = store.resolve_run("inspect-robots:molmoact2:adhoc:41")
    faulted = store.resolve_run("inspect-robots:molmoact2:adhoc:f7")
    agg = store.aggregate(by=["run_id"]).sort("run_id")
    # both trials are scored on success_at_end: the real-robot one succeeded at the end, the
    # faulted one abstains with its reason
    assert agg["metric"].to_list() == ["success_at_end"] * 2
    assert agg["run_id"].to_list() == [ok, faulted] and agg["mean"].to_list() == [1.0, None]
    failed = agg.row(1, named=True)
    assert failed["n_valid"] == 0 and failed["n_errors"] == 1
    # Inspect's convention (inspect_ai scores only samples without an error; inspect_ai
    # cannot read these files itself: their eval lacks dataset and model): errors left out
    assert agg["errors"].to_list() == ["exclude", "exclude"]
    as_failure = store.aggregate(by=["run_id"], errors="failure").sort("run_id")
    assert as_failure["mean"].to_list() == [1.0, 0.0] and as_failure["n_valid"].to_list() == [1, 1]
    assert failed["skip_breakdown"][0]["reason"].startswith("sample error: EmbodimentFault")
    assert store.sql("select n_errors from mart_runs where run_id = ?", [faulted]).item() == 1
    # the faulted trial has no valid score, so there is no key to pair: the report says so
    with pytest.raises(ValueError, match=r"share no scored key for 'success_at_end'"):
        ha.build_report(store, ok, faulted, metric="success_at_end")
    for run in store.sql("select run_id from runs")["run_id"]:
        # an inspect-robots key is '<task>#<scene>': v0.2 holds it, v0.1 export refuses it
        out = tmp_path / "out" / f"{run.split(':')[-1]}.json"
        with pytest.raises(ValueError, match=r"export it as v0\.2"):
            ha.export_evallog(store, run, out)
        path = ha.export_evallog(store, run, out, version="v0.2")
        assert json.loads(path.read_text())["eval"]["run_id"] == run


def test_demo_on_real_logs(
    real_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``demo --data`` on logs without traces or latency: one comparison per benchmark and split."""
    from hylo_analytics.cli import main

    assert main(["demo", "--data", str(real_dir / "vla-eval-harness"), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("Paired comparison on success, LIBEROBenchmark_") == 4
    assert "latency_p95" not in out  # no run has it: not asked for
    assert "vla-eval:xvla:LIBEROBenchmark_libero_10" in out  # ids whole
    for name in ("success_by_task.png", "paired_forest.png", "report.html"):
        assert (tmp_path / name).stat().st_size > 10_000


def test_libero_spatial_verdict_is_honest(vla: ha.Store) -> None:
    """xvla vs pi05 on libero_spatial: 7:9, score-test p 0.69 (exact McNemar 0.77),
    inconclusive; the 30 drops are pi05's harness timeouts, with what they could change; and
    how many episodes would settle it."""
    from hylo_analytics.compare.planning import plan_from_runs

    xvla, pi05 = f"agent=xvla,{SPATIAL}", f"agent=pi05,{SPATIAL}"
    row = vla.compare(xvla, pi05, errors="exclude").row(0, named=True)
    assert (row["candidate_wins"], row["parent_wins"], row["n_pairs"]) == (7, 9, 470)
    # Tango's score test: z = (7 - 9) / sqrt(16) = -0.5; the exact McNemar beside it
    assert row["test"] == "tango score"
    assert row["p_value"] == pytest.approx(0.6915, abs=1e-4)
    assert row["p_mcnemar"] == pytest.approx(0.7728, abs=1e-4)
    assert row["verdict"] == "inconclusive" and row["ci_method"] == "tango"
    assert "needs an equivalence margin" in row["verdict_note"]
    assert (row["n_dropped_candidate"], row["n_dropped_parent"]) == (0, 30)
    assert row["drop_reasons"] == "parent: harness error: timeout x30"
    assert "unbalanced: the parent abstained" in row["drop_note"]
    # the bounds: every timeout a pi05 success (worst for xvla), or every one a failure
    ids = {"c": vla.resolve_run(xvla), "p": vla.resolve_run(pi05)}
    x_on_drops = vla.sql(
        "select sum(c.value) as s from int_key_scores c join int_key_scores p using (key, metric) "
        "where metric = 'success' and c.run_id = $c and p.run_id = $p and p.value is null",
        ids,
    ).item()
    assert row["diff_if_drops_min"] == pytest.approx((-2 + x_on_drops - 30) / 500)
    assert row["diff_if_drops_max"] == pytest.approx((-2 + x_on_drops) / 500)
    assert row["diff_if_drops_min"] < row["mean_diff"] < row["diff_if_drops_max"]
    # the harness's own convention: timeouts are failures, all 500 pairs count
    ef = vla.compare(xvla, pi05).row(0, named=True)  # the default: the harness's convention
    assert (ef["errors"], ef["n_pairs"], ef["n_dropped"]) == ("failure", 500, 0)
    assert ef["mean_diff"] == pytest.approx(row["diff_if_drops_max"])
    assert ef["verdict"] == "improved"  # X-VLA beats pi05 once its timeouts count
    # adding by= never changes the overall verdict
    per_task = vla.compare(xvla, pi05, by=["task_id"], errors="exclude")
    over = per_task.filter(pl.col("level") == "overall").row(0, named=True)
    assert (over["p_holm"], over["verdict"]) == (row["p_holm"], row["verdict"])
    plan = plan_from_runs(vla.parquet, xvla, pi05, errors="exclude")
    assert plan.mde is not None and 0.01 < plan.mde < 0.05


def test_libero_ranking(vla: ha.Store) -> None:
    """The ranking of the three policies over the four suites (keys pair within a suite),
    next to the harness's published order X-VLA 97.75 > OFT 96.95 > pi05 96.45 (the average
    over suites of overall_success_rate)."""
    ranking = vla.rank(n_resamples=500)
    ranks = ranking.ranks
    # the harness's order and numbers (errored episodes are failures, its convention)
    assert ranks["policy"].to_list() == ["xvla", "oft-joint", "pi05"]
    assert ranks["mean"].to_list() == pytest.approx([0.9775, 0.9695, 0.9645], abs=1e-12)
    # only xvla > pi05 is separated (Holm over the 3 pairs): the other places are uncertain
    assert ranks["rank_set"].to_list() == ["1-2", "1-3", "2-3"]
    m = ranking.matrix
    assert (m["n_pairs"] == 2000).all() and (m["errors"] == "failure").all()
    pair = {(r["policy"], r["opponent"]): r for r in m.iter_rows(named=True)}
    assert (pair[("pi05", "xvla")]["wins"], pair[("pi05", "xvla")]["losses"]) == (42, 68)
    assert pair[("pi05", "xvla")]["verdict"] == "regressed"
    assert pair[("oft-joint", "xvla")]["verdict"] == "inconclusive"
    s = ranking.strengths.sort("strength", descending=True)
    assert s["policy"].to_list() == ["xvla", "oft-joint", "pi05"]
    assert s["strength"].to_list() == pytest.approx([0.2682, -0.0555, -0.2127], abs=1e-3)
    assert (s["wins"] + s["losses"]).sum() == 2 * (42 + 68 + 42 + 58 + 69 + 59)


def test_libero_ranking_under_exclude(vla: ha.Store) -> None:
    """Leaving pi05's 30 timeouts out drops their pairs, and no pair is separated."""
    excluded = vla.rank(errors="exclude", n_resamples=200)
    assert excluded.matrix.filter(pl.col("opponent") == "pi05")["n_pairs"].to_list() == [1970]
    assert excluded.ranks["rank_set"].to_list() == ["1-3"] * 3


def test_rank_on_the_cli(vla: ha.Store, capsys: pytest.CaptureFixture[str]) -> None:
    from hylo_analytics.cli import main

    argv = ["rank", "--store", str(vla.root), "--resamples", "200", "--format", "json"]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    assert pl.DataFrame(rows).equals(vla.rank(n_resamples=200).ranks)


def test_libero_across_task_summaries(vla: ha.Store) -> None:
    """The IQM of each policy's 40 LIBERO task rates (4 suites x 10 tasks, 50 episodes each,
    timeouts failures as the harness counts them), with its stratified interval; one run per
    task, so P(X > Y) is refused with the reason instead of a number."""
    from scipy import stats

    from hylo_analytics.stats.summaries import ONE_RUN_NOTE

    out = vla.summarize(n_resamples=2000)
    cells = vla.aggregate(by=["agent_name", "run_id", "task_id"], metrics=["success"])
    iqm = out.summary.filter(pl.col("statistic") == "iqm")
    expected = {"oft-joint": 0.981, "pi05": 0.985, "xvla": 0.988}
    assert dict(iqm.select("agent_name", "estimate").iter_rows()) == pytest.approx(expected)
    for agent, value in expected.items():
        rates = cells.filter(pl.col("agent_name") == agent)["mean"].to_numpy()
        assert value == pytest.approx(stats.trim_mean(rates, 0.25))
    assert set(iqm["n_tasks"]) == {40} and set(iqm["n_episodes"]) == {2000}
    assert set(iqm["errors"]) == {"failure"}
    # the mean of equal-sized tasks is the policy's overall rate, inside its interval
    mean = out.summary.filter(pl.col("statistic") == "mean")
    overall = vla.aggregate(by=["agent_name"], metrics=["success"])
    joined = mean.join(overall.select("agent_name", "mean"), on="agent_name")
    assert (joined["estimate"] - joined["mean"]).abs().max() < 1e-12
    assert (mean["ci_low"] <= mean["estimate"]).all() and (
        mean["estimate"] <= mean["ci_high"]
    ).all()
    assert (iqm["ci_low"] <= iqm["ci_high"]).all()
    assert out.improvement.height == 6 and set(out.improvement["note"]) == {ONE_RUN_NOTE}
    assert out.improvement["estimate"].is_null().all()
    # a selector names every run it matches: pi05 on its four suites
    pi05 = vla.summarize("agent=pi05", n_resamples=200).summary
    assert pi05.filter(pl.col("statistic") == "iqm")["estimate"].item() == expected["pi05"]


@pytest.mark.parametrize("errors", ["exclude", None])
def test_libero_spatial_flips_are_the_wins_and_losses(
    vla: ha.Store, real_dir: Path, errors: str | None
) -> None:
    """xvla vs pi05 on libero_spatial: 7 fixes and 9 regressions with pi05's timeouts left
    out; under the harness's convention (timeouts are failures) the timeouts xvla solved are
    fixes too. Each flip names the real result files."""
    xvla, pi05 = f"agent=xvla,{SPATIAL}", f"agent=pi05,{SPATIAL}"
    flips = vla.flips(xvla, pi05, errors=errors)
    tasks = vla.compare(xvla, pi05, by=["task_id"], errors=errors, ci="none")
    tasks = tasks.filter(pl.col("level") != "overall")
    counted = flips.group_by("task_id").agg(
        fixes=(pl.col("change") == "fix").sum(),
        regressions=(pl.col("change") == "regression").sum(),
    )
    joined = tasks.join(counted, on="task_id", how="left").fill_null(0)
    assert joined["candidate_wins"].to_list() == joined["fixes"].to_list()
    assert joined["parent_wins"].to_list() == joined["regressions"].to_list()
    if errors == "exclude":
        assert (int(joined["fixes"].sum()), int(joined["regressions"].sum())) == (7, 9)
        assert flips["errored_side"].is_null().all()
    else:  # issue 40: the 29 "fixes" on pi05's timeouts say so, the 7 genuine ones do not
        errored = flips.filter(pl.col("errored_side").is_not_null())
        assert errored.height == 29 and set(errored["errored_side"]) == {"parent"}
        assert set(errored["change"]) == {"fix"} and set(errored["parent_status"]) == {"error"}
        assert set(errored["parent_reason"]) == {"harness error: timeout"}
        assert (
            errored["flip_note"].str.contains("counted as a failure under errors='failure'").all()
        )
        genuine = flips.filter(pl.col("errored_side").is_null())
        assert (genuine["change"] == "fix").sum() == 7 and genuine["flip_note"].is_null().all()
    assert set(flips["change"]) <= {"fix", "regression"}
    for column in ("candidate_path", "parent_path"):
        assert all(Path(p).is_file() and Path(p).is_relative_to(real_dir) for p in flips[column])


def test_runs_a_question_leaves_out_are_named(
    real_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40: LIBERO and the two molmoact2 trials in one store. The trials name their
    success success_at_end: rank and aggregate of success leave them out and say so, with
    the metrics they do have."""
    from hylo_analytics.cli import main

    store = ha.open_store(tmp_path / "s")
    store.ingest([real_dir / "vla-eval-harness", real_dir / "inspect-robots"], progress=False)
    ranking = store.rank(n_resamples=100)
    assert list(ranking.policies) == ["oft-joint", "pi05", "xvla"]
    assert ranking.left_out["run_id"].str.starts_with("inspect-robots:molmoact2").all()
    assert ranking.left_out.height == 2
    assert set(ranking.left_out["reason"]) == {"no score of 'success'; its metrics: success_at_end"}
    assert ranking.notes and "2 run(s) left out of the ranking" in ranking.notes[0]
    argv = ["aggregate", "--store", str(store.root), "--by", "agent_name,split", "--metric",
            "success", "--format", "json"]  # fmt: skip
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "2 run(s) have no score of success and are left out" in err
    assert "(its metrics: success_at_end)" in err


@pytest.mark.parametrize("errors", [None, "exclude"])
def test_a_verdict_resting_on_harness_errors_says_so(vla: ha.Store, errors: str | None) -> None:
    """Issue 40: X-VLA "improves" on pi05 on libero_spatial (+5.4 points) only while pi05's
    30 timeouts count as failures; left out, the difference is -0.43 points, inconclusive.
    Each comparison says so under either policy, with the counts."""
    xvla, pi05 = f"agent=xvla,{SPATIAL}", f"agent=pi05,{SPATIAL}"
    row = vla.compare(xvla, pi05, errors=errors).row(0, named=True)
    assert (row["n_errored_candidate"], row["n_errored_parent"]) == (0, 30)
    verdicts = {row["errors"]: row["verdict"], row["errors_other"]: row["verdict_other"]}
    assert verdicts == {"failure": "improved", "exclude": "inconclusive"}
    diffs = {row["errors"]: row["mean_diff"], row["errors_other"]: row["mean_diff_other"]}
    assert diffs["failure"] == pytest.approx(0.054) and diffs["exclude"] == pytest.approx(-0.2 / 47)
    assert row["errors_note"].startswith("the verdict rests on harness errors: 30 errored key(s)")


def test_the_report_says_what_rests_on_harness_errors(vla: ha.Store, tmp_path: Path) -> None:
    """Issue 40: the report of X-VLA against pi05 on libero_spatial says, beside the
    verdict, that it rests on pi05's timeouts, and marks the flips they make."""
    xvla, pi05 = f"agent=xvla,{SPATIAL}", f"agent=pi05,{SPATIAL}"
    report = vla.report(xvla, pi05)
    page = report.to_html()
    assert (
        "the verdict rests on harness errors: 30 errored key(s) (0 candidate / 30 parent)" in page
    )
    assert "29 of the 45 flips rest on a harness error" in page
    assert page.count("(errored: parent)") == 29
    assert "the verdict rests on harness errors" in report._repr_html_()


def test_the_pooled_verdict_resting_on_harness_errors_says_so(vla: ha.Store) -> None:
    """Issue 40: X-VLA over pi05 pooled over the four suites is improved only while pi05's
    30 timeouts count as failures; the pooled row says so, with its counts."""
    pooled = vla.pooled_compare("agent=xvla", "agent=pi05", n_resamples=200)
    row = pooled.filter(pl.col("level") == "pooled").row(0, named=True)
    assert (row["verdict"], row["verdict_other"], row["errors_other"]) == (
        "improved", "inconclusive", "exclude")  # fmt: skip
    assert (row["n_errored_candidate"], row["n_errored_parent"]) == (0, 30)
    assert row["errors_note"].startswith("the pooled verdict rests on harness errors: 30")
    excluded = vla.pooled_compare("agent=xvla", "agent=pi05", errors="exclude", n_resamples=200)
    other = excluded.filter(pl.col("level") == "pooled").row(0, named=True)
    assert (other["verdict"], other["verdict_other"]) == ("inconclusive", "improved")
    assert other["mean_diff"] == pytest.approx(row["mean_diff_other"], abs=1e-12)
