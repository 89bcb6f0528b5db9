"""Server time of the web app's views on a store of 1,000 runs x 500 episodes (no traces).

    python benchmarks/bench_serve.py            # 1,000 runs x 500 episodes (500k)
    python benchmarks/bench_serve.py --small    # 50 runs, a quick run

The store is written by the synthetic generator and ingested once (no scoring pass: the
EvalLogs carry their scores). Each view is requested through Starlette's TestClient (the
whole app, in process: routing, the DuckDB reads, the HTML), once cold and then ``--repeat``
times; the median is reported against the 300 ms target (runs, comparison and task views). The
comparison is kept per data version, so its cold figure is the one that pays for
``Store.compare``; the forest plot is a separate request (``vl-convert``), timed for the record.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import hylo_analytics as ha
from hylo_analytics.serve import create_app
from hylo_analytics.testing import SynthConfig, write_dataset

with warnings.catch_warnings():  # starlette's TestClient moves from httpx to httpx2
    warnings.filterwarnings("ignore", message="Using `httpx`")
    from starlette.testclient import TestClient

TARGET_MS = 300.0
TARGETED = {"runs", "runs, page 10, sorted by success", "runs, filtered", "comparison", "task"}


def build(root: Path, runs: int) -> Path:
    t0 = time.perf_counter()
    write_dataset(root / "logs", SynthConfig(runs=runs, tasks=10, seeds=50, traces_per_run=0))
    t1 = time.perf_counter()
    store = ha.open_store(root / "store")
    store.ingest(root / "logs", progress=False)
    print(
        f"store: {runs} runs x 500 episodes; logs {t1 - t0:.1f} s, ingest "
        f"{time.perf_counter() - t1:.1f} s"
    )
    return root / "store"


def timed(client: TestClient, url: str, repeat: int) -> tuple[float, float]:
    def once() -> float:
        t = time.perf_counter()
        r = client.get(url)
        elapsed = (time.perf_counter() - t) * 1000
        assert r.status_code == 200, (url, r.status_code, r.text[:300])
        return elapsed

    cold = once()
    return cold, statistics.median(once() for _ in range(repeat))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    runs = 50 if args.small else 1000
    with tempfile.TemporaryDirectory() as tmp:
        path = build(Path(tmp), runs)
        store = ha.open_store(path, create=False)
        ids = store.sql("SELECT run_id FROM runs ORDER BY run_id")["run_id"].to_list()
        parent, candidate = ids[0], ids[-1]
        task = store.sql("SELECT min(task_id) AS t FROM samples")["t"][0]
        client = TestClient(create_app(path), base_url="http://localhost")  # an allowed Host
        client.get("/api/version")
        # the first comparison of the process imports scipy, altair and vl-convert: not a page's cost
        client.get(f"/compare?parent={ids[1]}&candidate={ids[2]}")
        views = {
            "runs": "/",
            "runs, page 10, sorted by success": "/?page=10&sort=success",
            "runs, filtered": "/?q=2.5",
            "comparison": f"/compare?parent={parent}&candidate={candidate}",
            "task": f"/compare/task?parent={parent}&candidate={candidate}&task={task}",
            "forest plot (its own request)": (
                f"/compare/forest.svg?parent={parent}&candidate={candidate}"
            ),
            "episode": f"/episode?parent={parent}&candidate={candidate}&key={task}%23{1000}",
        }
        print(f"{'view':36} {'cold ms':>9} {'median ms':>10}  under {TARGET_MS:.0f} ms")
        for name, url in views.items():
            cold, warm = timed(client, url, args.repeat)
            ok = "yes" if max(cold, warm) < TARGET_MS else "NO"
            ok += "" if name in TARGETED else " (no target)"
            print(f"{name:36} {cold:9.1f} {warm:10.1f}  {ok}")


if __name__ == "__main__":
    main()
