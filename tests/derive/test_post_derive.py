"""post_derive over the store: a factor-only ``match_on`` keeps each candidate row's identity."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

import hylo_analytics as ha

SIZES = [f"s{i}" for i in range(8)]


def _store(tmp_path: Path, base_sizes: list[str]) -> ha.Store:
    """A baseline run and a candidate run whose cases share no key, only ``workload.size``."""
    s = ha.open_store(tmp_path / "s")
    keys = [f"b{i}" for i in range(len(base_sizes))] + [f"c{i}" for i in range(8)]
    runs_of = ["base"] * len(base_sizes) + ["cand"] * 8
    sizes = [*base_sizes, *SIZES]
    values = [10.0 * (i + 1) for i in range(len(base_sizes))] + [5.0 * (i + 1) for i in range(8)]
    n = len(keys)
    samples = pa.table(
        {
            "run_id": runs_of,
            "key": keys,
            "epoch": [1] * n,
            "task_id": [f"t{k[1:]}" for k in keys],
            "seed": list(range(n)),
            "episode_id": [f"ep-{k}" for k in keys],
            "extra": [json.dumps({"workload": {"size": z}}) for z in sizes],
        }
    )
    scores = pa.table(
        {
            "run_id": runs_of,
            "key": keys,
            "epoch": [1] * n,
            "metric": ["time.latency"] * n,
            "value": values,
            "source": ["evallog"] * n,
            "source_kind": ["imported"] * n,
        }
    )
    runs = pa.table({"run_id": ["base", "cand"], "agent_name": ["a", "a"],
                     "agent_version": ["1", "2"], "benchmark_id": ["b", "b"]})  # fmt: skip
    with s.parquet.lock():
        s.parquet.commit({"runs": runs, "samples": samples, "scores": scores})
    return s


SPEC = {"post_derive": [{
    "kind": "paired_baseline", "baseline_variant": "a@1", "metric": "time.latency",
    "match_on": [{"kind": "factor", "name": "workload.size"}],
    "formula": "baseline_over_candidate", "include_baseline": False,
    "output": {"name": "speedup", "semantic_type": "performance.speedup"}}]}  # fmt: skip


def test_factor_only_match_keeps_each_candidate_rows_identity(tmp_path: Path) -> None:
    s = _store(tmp_path, SIZES)
    report = ha.run_analysis(s, ha.load_analysis_spec(SPEC))
    assert report.post_derived[0].values.height == 8
    got = s.sql(
        "select run_id, key, task_id, seed, epoch, episode_id, value, skip_reason "
        "from stg_scores where source = 'post_derive:speedup' order by key"
    ).rows()
    # c_i (5*(i+1)) is matched with b_i (10*(i+1)) through size s_i: speedup 2 everywhere
    assert got == [("cand", f"c{i}", f"t{i}", 8 + i, 1, f"ep-c{i}", 2.0, None) for i in range(8)]
    agg = s.aggregate(metrics=["speedup"]).row(0, named=True)
    assert (agg["run_id"], agg["n_total"], agg["n_valid"], agg["mean"]) == ("cand", 8, 8, 2.0)


def test_factor_only_match_several_baseline_cases_is_ambiguous_per_candidate(
    tmp_path: Path,
) -> None:
    # two baseline cases of size s0: each candidate of that size is its own diagnostic row
    s = _store(tmp_path, ["s0", *SIZES])
    ha.run_analysis(s, ha.load_analysis_spec(SPEC))
    got = s.sql(
        "select key, value, skip_reason from stg_scores "
        "where source = 'post_derive:speedup' order by key"
    ).rows()
    assert len(got) == 8
    assert got[0] == (
        "c0",
        None,
        "ambiguous_match: 1 candidate row(s), 2 baseline row(s) of the metric for this match key",
    )
    assert [k for k, v, _ in got[1:] if v is not None] == [f"c{i}" for i in range(1, 8)]
    agg = s.aggregate(metrics=["speedup"]).row(0, named=True)
    assert (agg["n_total"], agg["n_valid"]) == (8, 7)
