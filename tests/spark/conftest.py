"""One local Spark session for the whole test session, and the stores the parity tests read.

A session takes 20-80 s to start on a shared machine, so it is started once (``local[2]``,
bound to 127.0.0.1, UI off, two shuffle partitions) and stopped at the end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import hylo_analytics as ha
from hylo_analytics.testing.synth import SynthConfig, write_dataset

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
BENCHMARKS, RUNS_PER_BENCHMARK = 40, 5  # 200 runs; pairs stay within a benchmark


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from hylo_analytics.spark import local_session

    session = local_session("hylo-analytics-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_sample_store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    """The sample, ingested, re-scored from its traces (scores of two source kinds)."""
    store = ha.open_store(tmp_path_factory.mktemp("spark-sample") / "store")
    store.ingest(SAMPLE, progress=False)
    store.score()
    # every ordered pair declared, so int_paired / mart_compare hold rows to compare
    runs = store.sql("select run_id from stg_runs order by run_id")["run_id"].to_list()
    for parent in runs:
        store.declare_parent([r for r in runs if r != parent], parent)
    return store


@pytest.fixture(scope="session")
def generated_store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    """200 small runs in 40 benchmarks, ingested in two commits, one run re-ingested changed
    (so tombstones supersede rows), and a few policy checks."""
    data = tmp_path_factory.mktemp("spark-gen")
    logs: list[Path] = []
    for b in range(BENCHMARKS):
        cfg = SynthConfig(
            runs=RUNS_PER_BENCHMARK, tasks=2, seeds=3, mean_steps=4, seed=b,
            benchmark_id=f"hylo-sim/bench-{b:02d}",
        )  # fmt: skip
        for path in write_dataset(data / f"b{b:02d}", cfg):
            log = json.loads(path.read_text())
            log["run_id"] = f"{log['run_id']}-b{b:02d}"  # run ids unique across benchmarks
            path.write_text(json.dumps(log))
            logs.append(path)
    store = ha.open_store(data / "store")
    store.ingest(data / "b00", progress=False)
    store.ingest(data, progress=False)
    changed = json.loads(logs[0].read_text())
    changed["samples"][0]["scores"]["success"] = 1.0 - (
        changed["samples"][0]["scores"]["success"] or 0
    )
    logs[0].write_text(json.dumps(changed))
    store.ingest(logs[0], progress=False)
    # policy checks, so the ordered distinct list of failed policies has something to sort
    run_ids = store.sql("select run_id from stg_runs order by run_id limit 3")["run_id"].to_list()
    checks = pa.table(
        {
            "run_id": [run_ids[0]] * 4 + [run_ids[1]] * 2 + [run_ids[2]],
            "key": ["a", "b", "c", "d", "a", "b", None],
            "policy": ["zeta", "alpha", "alpha", "mid", "p", "q", "watch"],
            "metric": ["success"] * 7,
            "passed": [False, False, False, True, None, True, False],
            "role": ["constraint"] * 6 + ["diagnostic"],
        }
    )
    with store.parquet.lock():
        store.parquet.commit({"policy_results": checks})
    # each benchmark's runs against its first run, so the pairing views have rows on both engines
    firsts = store.sql(
        "select benchmark_id, list(run_id order by run_id) as runs from stg_runs group by 1"
    )
    for runs in firsts["runs"].to_list():
        store.declare_parent(runs[1:], runs[0])
    return store
