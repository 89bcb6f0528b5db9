"""The ingest of each real result set of ``../shared/data/real``, timed as a user runs it.

    python benchmarks/bench_real_formats.py               # best of 3 per set
    python benchmarks/bench_real_formats.py --repeat 5 --real /path/to/real

Each folder (LeRobot, lm-eval, Every Eval Ever, vla-eval's merged results, inspect-robots)
is ingested into a fresh, already opened store (``Store.ingest``: walk, read, hash, sniff,
parse, commit, publish), the best of ``--repeat`` wall times kept, with the files read, the
runs, samples and score rows stored and what was quarantined (the files that are no results:
a name-alike, a hand-made table, a JSON schema, leaderboard scrapes). The sets are small
(5-2,700 KB): the figures are per-ingest fixed costs more than throughput.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REAL = HERE.parent.parent / "shared" / "data" / "real"
SETS = ("lerobot", "lm-eval", "every_eval_ever", "vla-eval-harness", "inspect-robots")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", type=Path, default=REAL, help="the real data folder")
    parser.add_argument("--repeat", type=int, default=3, help="ingests per set (best kept)")
    args = parser.parse_args()
    import hylo_analytics as ha

    print(f"{'set':18} {'KB':>6} {'files':>5} {'runs':>5} {'samples':>8} {'scores':>7} "
          f"{'quar.':>5} {'best s':>7}")  # fmt: skip
    for name in SETS:
        folder = args.real / name
        kb = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1024
        best = float("inf")
        for _ in range(args.repeat):
            tmp = Path(tempfile.mkdtemp(prefix="bench_real_formats_"))
            try:
                store = ha.open_store(tmp / "store")
                t0 = time.perf_counter()
                report = store.ingest(folder, progress=False)
                best = min(best, time.perf_counter() - t0)
            finally:
                shutil.rmtree(tmp)
        print(f"{name:18} {kb:6.0f} {report.files_read:5d} {report.runs_added:5d} "
              f"{report.samples_added:8d} {report.scores_added:7d} {report.quarantined:5d} "
              f"{best:7.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
