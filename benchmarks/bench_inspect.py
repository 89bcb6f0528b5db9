"""Our Inspect log reader vs ``inspect_ai.analysis.samples_df`` on the same logs.

    python benchmarks/bench_inspect.py [--logs 6] [--samples 200] [--epochs 2] [--repeat 3]

Generates real logs with ``inspect_ai`` and the deterministic test model (half ``.eval``,
half ``.json``) into a temporary folder, then times, best of ``--repeat``:

* ``samples_df``: Inspect's own frame of all samples (the reference);
* ``parse``: our reader alone (zip + zstd + DuckDB JSON) into Arrow runs/samples/scores;
* ``ingest``: a full ``Store.ingest`` into a fresh, already opened store (read, hash, parse,
  commit Parquet).

Target: ``parse`` and ``ingest`` >= 10x faster than ``samples_df``. The machine is shared:
figures are noisy, ratios less so.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))


def _best(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--logs", type=int, default=6)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", type=Path, help="keep/reuse the generated logs here")
    args = ap.parse_args()
    warnings.simplefilter("ignore")

    from _inspect_logs import make_logs
    from inspect_ai.analysis import samples_df

    import hylo_analytics as ha
    from hylo_analytics.ingest import inspect
    from hylo_analytics.ingest._files import read_files

    tmp = Path(tempfile.mkdtemp(prefix="bench_inspect_"))
    logs = args.dir or tmp / "logs"
    try:
        t = time.perf_counter()
        paths = sorted(p for p in logs.rglob("*") if p.suffix in (".eval", ".json"))
        if not paths:
            for i in range(args.logs):
                fmt = ("eval",) if i % 2 == 0 else ("json",)
                paths += make_logs(logs / f"l{i}", n=args.samples, epochs=args.epochs, formats=fmt)
        gen = time.perf_counter() - t
        n_rows = args.logs * args.samples * args.epochs
        size = sum(p.stat().st_size for p in paths) / 2**20
        print(f"{len(paths)} logs, {n_rows} sample rows, {size:.1f} MiB (generated in {gen:.1f}s)")

        ref = samples_df([str(p) for p in paths], quiet=True)
        assert len(ref) == n_rows, (len(ref), n_rows)
        t_ref = _best(lambda: samples_df([str(p) for p in paths], quiet=True), args.repeat)

        def parse() -> None:
            files = list(read_files(paths))
            con = duckdb.connect()
            out = inspect.parse(con, files)
            assert out.samples.num_rows == n_rows and not out.problems
            con.close()

        t_parse = _best(parse, args.repeat)

        t_ingest = float("inf")
        for _ in range(args.repeat):  # a fresh store each time; opening it is not timed
            d = Path(tempfile.mkdtemp(dir=tmp))
            store = ha.open_store(d / "s")
            t = time.perf_counter()
            rep = store.ingest(paths, progress=False)
            t_ingest = min(t_ingest, time.perf_counter() - t)
            assert rep.samples_added == n_rows and rep.quarantined == 0
            shutil.rmtree(d)
        print(f"samples_df (reference)  {t_ref:8.3f} s")
        print(f"our parse               {t_parse:8.3f} s   {t_ref / t_parse:6.1f}x faster")
        print(f"our full ingest         {t_ingest:8.3f} s   {t_ref / t_ingest:6.1f}x faster")
        print("target: >= 10x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
