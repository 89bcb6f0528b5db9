"""Spark ``local[2]``, as shipped, against DuckDB on a large store (issue 26, goal 6).

Each question runs twice, one process after the other, never two at once: DuckDB
(``open_store(path).sql(q)``, a child process) and ``hylo-analytics spark-sql --store PATH
--conf spark.driver.memory=6g --format parquet -o FILE q`` (the CLI: ``local_session``'s
settings, nothing else). A sampler reads ``VmHWM`` of every process in the child's tree each
0.5 s (the JVM is a grandchild of the CLI, so ``time -v`` would not see it) and the 1-minute
load average. The two answers are compared row for row (sorted by every column that is not a
float; floats within 1e-9 relative, NULLs and NaNs equal, lists compared as sorted lists).

    python benchmarks/bench_spark_scale.py --store /tmp/store10000000 --workdir /tmp/spark10

The store is only read. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import polars as pl

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent


def questions(parent: str, candidate: str) -> dict[str, tuple[str, str]]:
    """Name -> (label, query) of goal 1's four questions; the pair is one declared pair."""
    return {
        "aggregate_run": ("`select * from mart_aggregate_run`", "select * from mart_aggregate_run"),
        "compare_pair": (
            "`mart_compare` of one declared pair",
            f"select * from mart_compare where candidate = '{candidate}' and parent = '{parent}'",
        ),
        "compare_all": (
            "`select * from mart_compare` (every declared pair)",
            "select * from mart_compare",
        ),
        "preferred": (
            "`int_scores_preferred`: count(*), sum(value), valid, errored, ambiguous counts",
            "select count(*) as n, sum(value) as sum_value, "
            "sum(case when valid then 1 else 0 end) as n_valid, "
            "sum(case when errored then 1 else 0 end) as n_errored, "
            "sum(case when ambiguous then 1 else 0 end) as n_ambiguous "
            "from int_scores_preferred",
        ),
    }


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _hwm_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def run_measured(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run ``cmd``; wall time, exit code, stderr, peak RSS (MiB) of its Python and Java
    processes, the highest 1-minute load average seen."""
    peaks: dict[int, tuple[str, int]] = {}
    loads: list[float] = [os.getloadavg()[0]]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            tree = _children()
            stack = [proc.pid]
            while stack:
                pid = stack.pop()
                stack.extend(tree.get(pid, []))
                hwm = _hwm_kib(pid)
                if hwm is not None:
                    # the latest name: spark-submit's shell execs into the JVM (same pid)
                    peaks[pid] = (_comm(pid), max(hwm, peaks.get(pid, ("", 0))[1]))
            loads.append(os.getloadavg()[0])
            done.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    java = max((kib for name, kib in peaks.values() if name == "java"), default=0)
    python = peaks.get(proc.pid, ("", 0))[1]  # the child itself (comm: the script's name)
    return {
        "wall": wall,
        "rc": proc.returncode,
        "stdout": out,
        "stderr": err,
        "java_mib": java / 2**10,
        "python_mib": python / 2**10,
        "load": max(loads),
    }


DUCK_CHILD = """
import sys, hylo_analytics as ha
s = ha.open_store(sys.argv[1], create=False)
s.sql(sys.argv[2]).write_parquet(sys.argv[3])
"""


def _norm(value: Any) -> Any:
    if isinstance(value, list):
        return sorted((_norm(v) for v in value), key=repr)
    if isinstance(value, dict):
        return tuple(sorted((k, _norm(v)) for k, v in value.items()))
    return value


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    return bool(_norm(a) == _norm(b))


def same_answer(duck: pl.DataFrame, spark: pl.DataFrame) -> str:
    """'yes', or what differs."""
    if duck.columns != spark.columns:
        return f"no: columns {duck.columns} != {spark.columns}"
    if duck.height != spark.height:
        return f"no: {duck.height} rows != {spark.height}"
    floats = {c for c, t in duck.schema.items() if t in (pl.Float32, pl.Float64)}
    keys = [
        c
        for c, t in duck.schema.items()
        if c not in floats and not isinstance(t, pl.List | pl.Struct)
    ]
    keys = keys or duck.columns
    duck, spark = duck.sort(keys, nulls_last=True), spark.sort(keys, nulls_last=True)
    for col in duck.columns:
        for i, (a, b) in enumerate(zip(duck[col].to_list(), spark[col].to_list(), strict=True)):
            if not _close(a, b):
                return f"no: {col} row {i}: {a!r} != {b!r}"
    return "yes"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="the store (only read)")
    parser.add_argument("--workdir", required=True, help="where the answers are written")
    parser.add_argument("--driver-memory", default="6g")
    parser.add_argument("--only", default="", help="comma-separated question names")
    parser.add_argument("--conf", action="append", default=[], help="extra --conf for spark-sql")
    args = parser.parse_args(argv)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}
    import hylo_analytics as ha

    store = ha.open_store(args.store, create=False)
    pairs = store.sql(
        "select min(parent_run_id) p, max(parent_run_id) p2, max(run_id) c from comparisons"
    )
    parent, parent_max, candidate = pairs.row(0)
    assert parent == parent_max, "one declared parent expected"
    first = store.sql("select min(run_id) from runs").item()
    assert parent == first, (parent, first)
    del store
    wanted = [q for q in args.only.split(",") if q]
    rows = []
    for name, (label, query) in questions(parent, candidate).items():
        if wanted and name not in wanted:
            continue
        duck_out, spark_out = work / f"duckdb_{name}.parquet", work / f"spark_{name}.parquet"
        duck = run_measured(
            [sys.executable, "-c", DUCK_CHILD, args.store, query, str(duck_out)], env
        )
        cmd = [str(VENV_BIN / "hylo-analytics"), "spark-sql", "--store", args.store]
        cmd += ["--conf", f"spark.driver.memory={args.driver_memory}"]
        for conf in args.conf:
            cmd += ["--conf", conf]
        cmd += ["--format", "parquet", "-o", str(spark_out), query]
        spark = run_measured(cmd, env)
        if spark["rc"] == 0 and duck["rc"] == 0:
            equal = same_answer(pl.read_parquet(duck_out), pl.read_parquet(spark_out))
            answer = f"{pl.read_parquet(duck_out).height:,} rows"
        else:
            equal = "failed: " + (spark["stderr"].strip().splitlines() or ["?"])[-1][:300]
            if duck["rc"]:
                equal += " / duckdb: " + (duck["stderr"].strip().splitlines() or ["?"])[-1][:300]
            answer = ""
        rows.append((label, answer, duck, spark, equal))
        print(
            f"{name}: spark {spark['wall']:.1f} s java {spark['java_mib']:.0f} MiB python "
            f"{spark['python_mib']:.0f} MiB load {spark['load']:.1f}; duckdb {duck['wall']:.2f} s "
            f"{duck['python_mib']:.0f} MiB; equal: {equal}",
            file=sys.stderr,
            flush=True,
        )
    print(
        "| question at 10M samples | rows | Spark wall | peak RSS driver JVM | peak RSS Python "
        "| DuckDB wall (peak RSS) | equal to DuckDB | load (max 1-min) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, answer, duck, spark, equal in rows:
        print(
            f"| {label} | {answer} | {spark['wall']:.0f} s | {spark['java_mib'] / 1024:.2f} GiB "
            f"| {spark['python_mib']:.0f} MiB | {duck['wall']:.2f} s ({duck['python_mib']:.0f} MiB) "
            f"| {equal} | {spark['load']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
