"""Time and size of every page of the web app on a store of many runs (2,000 by default).

    python benchmarks/bench_serve_pages.py --store PATH   # an existing store (the 1M one)
    python benchmarks/bench_serve_pages.py --runs 2000    # writes 2,000 runs x 50 episodes

Each page is requested through Starlette's TestClient (the whole app in process) once cold,
then ``--repeat`` times warm (the median); its size is the bytes of the response. The
ranking page computes ``Store.rank`` in the background on its first request (a page that
reloads itself until it is done): its cold figure is the time until the ranks are shown.
A page the app refuses is printed with its status (a pooled page needs two suites).
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


def build(root: Path, runs: int) -> Path:
    write_dataset(root / "logs", SynthConfig(runs=runs, tasks=10, seeds=5, traces_per_run=0))
    store = ha.open_store(root / "store")
    store.ingest(root / "logs", progress=False)
    return root / "store"


def fetch(client: TestClient, url: str, wait: float = 300.0) -> tuple[int, int]:
    """Status and bytes of ``url``, waiting out a page that is still being computed."""
    deadline = time.perf_counter() + wait
    while True:
        r = client.get(url)
        if 'data-pending="1"' not in r.text or time.perf_counter() > deadline:
            return r.status_code, len(r.content)
        time.sleep(0.2)


def timed(client: TestClient, url: str, repeat: int) -> tuple[float, float, int, int]:
    t = time.perf_counter()
    status, size = fetch(client, url)
    cold = (time.perf_counter() - t) * 1000
    warm = []
    for _ in range(repeat):
        t = time.perf_counter()
        fetch(client, url)
        warm.append((time.perf_counter() - t) * 1000)
    return cold, statistics.median(warm), status, size


def pages(store: ha.Store) -> dict[str, str]:
    runs = store.runs()
    ids = runs["run_id"].to_list()
    parent, candidate = ids[0], ids[min(2, len(ids) - 1)]
    task = store.sql("SELECT min(task_id) AS t FROM samples")["t"][0]
    agents = runs["agent_name"].unique().to_list()
    return {
        "runs": "/",
        "runs, natural version order": "/?sort=agent",
        "runs, page 20, sorted by success": "/?page=20&sort=success",
        "runs, filtered": "/?q=2.5",
        "comparison": f"/compare?parent={parent}&candidate={candidate}",
        "forest plot (its own request)": (
            f"/compare/forest.svg?parent={parent}&candidate={candidate}"
        ),
        "task": f"/compare/task?parent={parent}&candidate={candidate}&task={task}",
        "pooled": f"/pooled?candidate=agent={agents[0]}&parent=agent={agents[-1]}",
        "ranking of the runs": "/rank?policy=run_id",
        "ranking, page 2": "/rank?policy=run_id&page=2",
        "ranking: strengths chart": "/rank/strengths.svg?policy=run_id",
        "ranking: verdict heatmap (top 50)": "/rank/heatmap.svg?policy=run_id",
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", type=Path, help="an existing store (default: write one)")
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.store or build(Path(tmp), args.runs)
        store = ha.open_store(path, create=False)
        print(f"store: {store.sql('SELECT count(*) AS n FROM runs')['n'][0]:,} runs")
        client = TestClient(create_app(path), base_url="http://localhost")
        client.get("/api/version")
        print(f"{'page':36} {'status':>6} {'cold ms':>9} {'warm ms':>9} {'KB':>8}")
        for name, url in pages(store).items():
            cold, warm, status, size = timed(client, url, args.repeat)
            print(f"{name:36} {status:6} {cold:9.0f} {warm:9.0f} {size / 1000:8.1f}")


if __name__ == "__main__":
    main()
