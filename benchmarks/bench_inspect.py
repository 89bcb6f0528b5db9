"""Goal 6: our Inspect log reader and ingest vs ``inspect_ai.analysis.samples_df``, same logs.

    python benchmarks/bench_inspect.py            # 12 and 48 logs x 400 sample rows
    python benchmarks/bench_inspect.py --small    # 6 logs, a quick run

The logs are real: written by ``inspect_ai`` itself with the deterministic test model
(``tests/_inspect_logs.py``), half ``.eval``, half ``.json``, 200 samples x 2 epochs each. They
are generated once, in a child process, and cached under the temp folder (``--cache``), since
writing them takes ~15 s a log. Two sizes show both the per-log fixed costs (12 logs) and the
per-sample costs (48 logs). Each is timed, best of ``--repeat``, in this one process:

* ``samples_df``: Inspect's own frame of all samples (the reference);
* our reader alone: read + hash the files, then ``inspect.parse`` into Arrow runs/samples/scores;
* our full ``Store.ingest`` into a fresh, already opened store (read, hash, parse, commit).

Target: ingest >= 10x faster than ``samples_df``. The machine is shared: absolute figures are
noisy, the ratios (measured back to back) less so.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOAL = "6"
TARGET = 10.0
SAMPLES, EPOCHS = 200, 2
CACHE = Path(tempfile.gettempdir()) / "hylo_bench_inspect"

_GEN = """
import sys, warnings
from pathlib import Path
warnings.simplefilter("ignore")
sys.path.insert(0, sys.argv[1])
from _inspect_logs import make_logs
root, samples, epochs = Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for i in map(int, sys.argv[5:]):
    tmp = root / f"l{i}.tmp"
    make_logs(tmp, n=samples, epochs=epochs, formats=("eval",) if i % 2 == 0 else ("json",))
    tmp.rename(root / f"l{i}")
"""


def make_logs(n_logs: int, cache: Path = CACHE) -> list[Path]:
    """``n_logs`` cached logs (log ``i`` is ``.eval`` when ``i`` is even), made if missing."""
    root = cache / f"{SAMPLES}x{EPOCHS}"
    root.mkdir(parents=True, exist_ok=True)
    todo = [i for i in range(n_logs) if not (root / f"l{i}").is_dir()]
    if todo:
        for i in todo:
            shutil.rmtree(root / f"l{i}.tmp", ignore_errors=True)
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", _GEN, str(HERE.parent / "tests"), str(root)]
            + [str(SAMPLES), str(EPOCHS)]
            + [str(i) for i in todo],
            check=True,
        )
        print(f"generated {len(todo)} logs in {time.perf_counter() - t:.0f} s", flush=True)
    return sorted(
        p
        for i in range(n_logs)
        for p in (root / f"l{i}").rglob("*")
        if p.suffix in (".eval", ".json")
    )


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(paths: list[Path], repeat: int) -> tuple[float, float, float]:
    """``(samples_df, our reader, our ingest)`` seconds, best of ``repeat`` each."""
    import duckdb
    from inspect_ai.analysis import samples_df

    import hylo_analytics as ha
    from hylo_analytics.ingest import inspect
    from hylo_analytics.ingest._files import read_files

    n_rows = len(paths) * SAMPLES * EPOCHS
    names = [str(p) for p in paths]

    def reference() -> None:
        assert len(samples_df(names, quiet=True)) == n_rows

    def reader() -> None:
        con = duckdb.connect()
        out = inspect.parse(con, list(read_files(paths)))
        assert out.samples.num_rows == n_rows and not out.problems
        con.close()

    t_ref = _best(reference, repeat)
    t_parse = _best(reader, repeat)
    t_ingest = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):  # a fresh store each time; opening it is not timed
            store = ha.open_store(Path(tmp) / f"s{i}")
            t = time.perf_counter()
            rep = store.ingest(paths, progress=False)
            t_ingest = min(t_ingest, time.perf_counter() - t)
            assert rep.samples_added == n_rows and rep.quarantined == 0
    return t_ref, t_parse, t_ingest


def run(small: bool, repeat: int = 3, cache: Path = CACHE) -> list[dict[str, object]]:
    """Rows of the benchmark table: reader alone and full ingest, at each size."""
    warnings.simplefilter("ignore")  # pandas deprecations inside inspect_ai.analysis
    sizes = (6,) if small else (12, 48)
    paths_all = make_logs(max(sizes), cache)
    measure(paths_all[:1], 1)  # imports and first-call costs, on both sides
    rows: list[dict[str, object]] = []
    for n in sizes:
        paths = paths_all[:n]
        t_ref, t_parse, t_ingest = measure(paths, repeat)
        mib = sum(p.stat().st_size for p in paths) / 2**20
        what = f"{n} Inspect logs ({n // 2} .eval + {n - n // 2} .json, {mib:.0f} MiB), "
        what += f"{n * SAMPLES * EPOCHS:,} samples"
        for label, t in (("reader alone", t_parse), ("Store.ingest", t_ingest)):
            rows.append(
                {
                    "goal": GOAL,
                    "workload": f"{what}: {label}",
                    "hylo_s": t,
                    "reference": "inspect_ai.analysis.samples_df",
                    "reference_s": t_ref,
                    "ratio": t_ref / t,
                    "target": f">= {TARGET:.0f}x (on ingest)",
                    "met": t_ref / t >= TARGET,
                    "peak_rss_mb": _rss_mb(),
                }
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--small", action="store_true", help="6 logs, for a quick check")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cache", type=Path, default=CACHE, help="where the generated logs are kept")
    args = ap.parse_args()
    for r in run(args.small, args.repeat, args.cache):
        print(
            f"{r['workload']}\n  hylo {r['hylo_s']:7.3f} s   samples_df {r['reference_s']:7.3f} s"
            f"   {r['ratio']:5.1f}x   target {r['target']}: {'met' if r['met'] else 'NOT met'}"
            f"   peak RSS {r['peak_rss_mb']:.0f} MiB"
        )


if __name__ == "__main__":
    main()
