"""The analysis spec wired end to end on the sample store: score -> derive -> post_derive ->
policies, idempotence, dry runs, key-path errors and ``hylo-analytics evaluate``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

import hylo_analytics as ha
from hylo_analytics.cli import main

BASE = "run-octo-ft-1.0.0-0000"
RUNS = [BASE, "run-octo-ft-1.1.0-0001", "run-octo-ft-1.2.0-rc1-0002"]

SPEC: dict[str, Any] = {
    "score": {
        "episode_steps": {"value": "trace.steps", "semantic": "count.steps", "unit": "steps",
                          "goal": "minimize"},
        "episode_return": {"value": "trace.return", "goal": "maximize", "role": "diagnostic",
                           "optional": True},
    },
    "derive": [{
        "kind": "token_cost",
        "pricing": {"version": 1, "models": {"openai/gpt-4o-mini": {
            "input": {"unit": "mtok", "price_per_million_tokens": 0.15},
            "output": {"unit": "mtok", "price_per_million_tokens": 0.6}}}},
        "output": {"name": "request_cost", "semantic_type": "money.cost", "unit": "usd",
                   "direction": "minimize", "role": "diagnostic"},
    }],
    "post_derive": [{
        "kind": "paired_baseline",
        "baseline_variant": "octo-ft@1.0.0",
        "match_on": [{"kind": "case_id"}, {"kind": "factor", "name": "task_id"}],
        "metric": "episode_steps",
        "formula": "baseline_over_candidate",
        "include_baseline": True,
        "output": {"name": "step_speedup", "semantic_type": "performance.speedup",
                   "unit": "ratio", "direction": "maximize", "role": "constraint"},
    }],
    "policies": [
        {"name": "faster-than-baseline", "metric": "performance.speedup", "per": "run",
         "aggregate": "mean", "must_greater": 1.0},
        {"name": "cost-cap", "metric": "money.cost", "must_less_equal": 0.001,
         "role": "diagnostic"},
    ],
}  # fmt: skip


@pytest.fixture()
def store(tmp_path: Path, sample_dir: Path) -> ha.Store:
    s = ha.open_store(tmp_path / "store")
    s.ingest(sample_dir, progress=False)
    return s


def _spec_file(tmp_path: Path, spec: dict[str, Any]) -> Path:
    path = tmp_path / "analysis.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _counts(store: ha.Store) -> list[tuple[Any, ...]]:
    return store.sql(
        "select source, count(*) as n, count(value) as n_valued from stg_scores "
        "group by 1 order by 1"
    ).rows()


def _expected_speedups(store: ha.Store) -> pl.DataFrame:
    """steps(baseline) / steps(candidate) per key, from the trace files' step counts."""
    steps = store.sql("select run_id, key, epoch, n_steps::double as steps from int_episode_stats")
    base = steps.filter(pl.col("run_id") == BASE).select("key", "epoch", base="steps")
    return (
        steps.join(base, on=["key", "epoch"])
        .filter(pl.col("steps") != 0)
        .select("run_id", "key", "epoch", expected=pl.col("base") / pl.col("steps"))
    )


@pytest.mark.slow
def test_all_four_sections_end_to_end(tmp_path: Path, store: ha.Store) -> None:
    report = ha.run_analysis(store, ha.load_analysis_spec(_spec_file(tmp_path, SPEC)))
    assert report.scoring is not None and report.scoring.ok
    assert report.scoring.runs == tuple(RUNS)

    # score: one row per sample and scorer, valued from the traces
    got = store.sql(
        "select s.run_id, s.key, s.value, e.n_steps from stg_scores as s "
        "join int_episode_stats as e using (run_id, key, epoch) "
        "where s.source = 'scorer:episode_steps'"
    )
    assert got.height == 600
    assert (got["value"] == got["n_steps"].cast(pl.Float64)).all()
    meta = json.loads(
        store.sql("select metadata from stg_scores where source = 'scorer:episode_steps' limit 1")[
            "metadata"
        ][0]
    )
    assert meta["direction"] == "minimize" and meta["semantic"] == "count.steps"

    # derive: the sample has no token counts: every cost is null with its reason, never 0
    costs = store.sql("select value from stg_scores where source = 'derive:token_cost'")
    assert costs.height == 600 and costs["value"].null_count() == 600

    # post_derive: one row per case of every run, speedup = baseline steps / candidate steps
    rows = store.sql(
        "select run_id, key, epoch, value, valid, skip_reason, source_kind, metadata "
        "from stg_scores where source = 'post_derive:step_speedup'"
    )
    assert rows.height == 600 and set(rows["source_kind"]) == {"derived"}
    cmp = rows.join(_expected_speedups(store), on=["run_id", "key", "epoch"], how="left")
    valued = cmp.filter(pl.col("valid"))
    assert valued.height == 596
    assert (valued["value"] - valued["expected"]).abs().max() < 1e-12  # type: ignore[operator]
    assert valued.filter(pl.col("run_id") == BASE)["value"].unique().to_list() == [1.0]
    # the 4 zero-step baseline episodes: an abstention with the diagnostic, not a NaN or inf
    bad = cmp.filter(~pl.col("valid"))
    assert bad["skip_reason"].unique().to_list() == [
        "zero_division: denominator of baseline_over_candidate is 0"
    ]
    assert bad["expected"].null_count() == bad.height
    m = json.loads(valued["metadata"][0])
    assert m["baseline_run"] == BASE and m["semantic_type"] == "performance.speedup"
    assert m["factors"] == {"task_id": valued["key"][0].split("#")[0]}
    (post,) = report.post_derived
    assert post.values.height == 596 and post.diagnostics["kind"].to_list() == ["zero_division"] * 4

    # policies: the baseline's mean speedup over itself is exactly 1, not > 1
    status = dict(report.run_status().select("run_id", "final_status").rows())
    assert status == {BASE: "failed_policy", RUNS[1]: "passed", RUNS[2]: "passed"}
    stored = store.sql(
        "select run_id, final_status from mart_run_policy_status order by run_id"
    ).rows()
    assert stored == sorted(status.items())


@pytest.mark.slow
def test_rerun_replaces_rows(tmp_path: Path, store: ha.Store) -> None:
    spec = ha.load_analysis_spec(_spec_file(tmp_path, SPEC))
    ha.run_analysis(store, spec)
    first = _counts(store)
    n_policy = store.sql("select count(*) as n from stg_policy_results")["n"][0]
    ha.run_analysis(store, spec)
    assert _counts(store) == first
    assert store.sql("select count(*) as n from stg_policy_results")["n"][0] == n_policy
    # no duplicate (run, key, epoch, metric) within a source
    dup = store.sql(
        "select count(*) as n from (select 1 from stg_scores "
        "group by run_id, key, epoch, metric, source having count(*) > 1)"
    )
    assert dup["n"][0] == 0


@pytest.mark.slow
def test_dry_run_sees_its_own_rows_and_writes_nothing(tmp_path: Path, store: ha.Store) -> None:
    spec = ha.load_analysis_spec(_spec_file(tmp_path, SPEC))
    before = _counts(store)
    dry = ha.run_analysis(store, spec, write=False)
    assert _counts(store) == before  # nothing written, yet post_derive read the pending scores
    assert dry.post_derived[0].values.height == 596
    assert "would score 1200 row(s)" in repr(dry) and "dry run" in repr(dry)
    real = ha.run_analysis(store, spec)
    assert dry.run_status().equals(real.run_status())
    assert dry.post_derived[0].values.equals(real.post_derived[0].values)


@pytest.mark.slow
def test_runs_selection_and_baseline_by_run_id(tmp_path: Path, store: ha.Store) -> None:
    spec = {**SPEC, "post_derive": [{**SPEC["post_derive"][0], "baseline_variant": BASE}]}
    ha.run_analysis(store, ha.load_analysis_spec(_spec_file(tmp_path, spec)), runs=[RUNS[2]])
    got = store.sql(
        "select run_id, count(*) as n from stg_scores where source like 'post_derive:%' group by 1"
    ).rows()
    assert got == [(RUNS[2], 200)]  # the baseline was read, not written


@pytest.mark.slow
@pytest.mark.parametrize(
    ("variant", "message"),
    [("octo-ft", "names 3 runs"), ("octo-ft@9.9", "no run has run_id")],
)
def test_unresolvable_baseline_names_the_key_path(
    tmp_path: Path, store: ha.Store, variant: str, message: str
) -> None:
    spec = {**SPEC, "post_derive": [{**SPEC["post_derive"][0], "baseline_variant": variant}]}
    with pytest.raises(ha.ConfigError, match=message) as info:
        ha.run_analysis(store, ha.load_analysis_spec(_spec_file(tmp_path, spec)))
    assert info.value.path == "post_derive[0].baseline_variant"


@pytest.mark.parametrize(
    ("section", "value", "path"),
    [
        ("score", {"episode_steps": {"value": "trace..steps"}}, "score.episode_steps.value"),
        ("score", {"s": {"schema": {"path": "output", "schema": {"type": 5}}}}, "score.s.schema.schema"),
        ("post_derive", [{**SPEC["post_derive"][0], "match_on": [{"kind": "case"}]}],
         "post_derive[0].match_on[0].kind"),
        ("post_derive", [{**SPEC["post_derive"][0], "output": {"unit": "ratio"}}],
         "post_derive[0].output.name"),
        ("post_derive", [{**SPEC["post_derive"][0], "include_baseline": "yes"}],
         "post_derive[0].include_baseline"),
    ],
)  # fmt: skip
def test_malformed_sections_name_the_key_path(
    tmp_path: Path, section: str, value: Any, path: str
) -> None:
    with pytest.raises(ha.ConfigError) as info:
        ha.load_analysis_spec(_spec_file(tmp_path, {**SPEC, section: value}))
    assert info.value.path == path


@pytest.mark.slow
def test_cli_evaluate_end_to_end(
    tmp_path: Path, store: ha.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _spec_file(tmp_path, SPEC)
    args = ["evaluate", "--store", str(tmp_path / "store"), "--spec", str(path)]
    assert main([*args, "--dry-run", "--format", "csv"]) == 0
    assert store.sql("select count(*) as n from stg_scores where source <> 'evallog'")["n"][0] == 0
    capsys.readouterr()
    assert main([*args, "--format", "csv", "--fail-on-policy"]) == 1
    out = capsys.readouterr()
    lines = out.out.strip().splitlines()
    assert lines[1].startswith(BASE) and lines[1].endswith("faster-than-baseline,failed_policy")
    assert lines[2].endswith(",passed") and lines[3].endswith(",passed")
    assert "scorer:episode_steps" in out.err
    assert "PairedBaseline('step_speedup' vs run-octo-ft-1.0.0-0000: 596 derived" in out.err
    assert (
        store.sql("select count(*) as n from stg_scores where source = 'post_derive:step_speedup'")[
            "n"
        ][0]
        == 600
    )
    bad = _spec_file(tmp_path, {**SPEC, "score": {"x": {"value": "a", "goal": "up"}}})
    assert main(["evaluate", "--store", str(tmp_path / "store"), "--spec", str(bad)]) == 2
    assert "score.x.goal: expected one of ['maximize', 'minimize']" in capsys.readouterr().err


def test_factor_from_sample_extra_and_missing_match(tmp_path: Path) -> None:
    """Autobench's shape: match on case id and a ``workload.size`` factor (nested or flat)."""
    import pyarrow as pa

    s = ha.open_store(tmp_path / "s")
    extra = [
        json.dumps({"workload": {"size": "small"}}),  # base c1
        json.dumps({"workload.size": "large"}),  # base c2 (flat key)
        json.dumps({"workload": {"size": "small"}}),  # cand c1
        json.dumps({"workload": {"size": "small"}}),  # cand c2: size differs from base
        json.dumps({"workload": {"size": "small"}}),  # cand c3: base has no c3
    ]
    samples = pa.table(
        {
            "run_id": ["base", "base", "cand", "cand", "cand"],
            "key": ["c1", "c2", "c1", "c2", "c3"],
            "epoch": [1] * 5,
            "extra": extra,
        }
    )
    scores = pa.table(
        {
            "run_id": ["base", "base", "cand", "cand", "cand"],
            "key": ["c1", "c2", "c1", "c2", "c3"],
            "epoch": [1] * 5,
            "metric": ["time.latency"] * 5,
            "value": [10.0, 40.0, 5.0, 20.0, 1.0],
            "source": ["evallog"] * 5,
            "source_kind": ["imported"] * 5,
        }
    )
    runs = pa.table({"run_id": ["base", "cand"], "agent_name": ["a", "a"],
                     "agent_version": ["1", "2"], "benchmark_id": ["b", "b"]})  # fmt: skip
    with s.parquet.lock():
        s.parquet.commit({"runs": runs, "samples": samples, "scores": scores})
    spec = {"post_derive": [{
        "kind": "paired_baseline", "baseline_variant": "a@1", "metric": "time.latency",
        "match_on": [{"kind": "case_id"}, {"kind": "factor", "name": "workload.size"}],
        "formula": "baseline_over_candidate", "include_baseline": False,
        "output": {"name": "speedup", "semantic_type": "performance.speedup"}}]}  # fmt: skip
    report = ha.run_analysis(s, ha.load_analysis_spec(spec))
    got = s.sql(
        "select run_id, key, value, skip_reason from stg_scores "
        "where source = 'post_derive:speedup' order by key"
    ).rows()
    assert got == [
        ("cand", "c1", 2.0, None),
        ("cand", "c2", None, "missing_match: no baseline case with this match key"),
        ("cand", "c3", None, "missing_match: no baseline case with this match key"),
    ]
    assert report.post_derived[0].diagnostics["kind"].to_list() == ["missing_match"] * 2


@pytest.mark.slow
def test_readme_example_runs_on_the_sample(tmp_path: Path, store: ha.Store) -> None:
    guide = Path(__file__).resolve().parents[1] / "docs" / "guide" / "06-analysis.md"
    section = guide.read_text()  # the README's analysis section, moved to the guide
    block = section.split("```yaml\n# analysis.yaml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "analysis.yaml"
    path.write_text(block)
    report = ha.run_analysis(store, ha.load_analysis_spec(path))
    assert report.run_status()["final_status"].to_list() == ["passed"] * 3
    assert report.post_derived[0].values.height == 596
