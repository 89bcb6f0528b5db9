"""Critical differences: the time at 20, 200 and 2,000 policies, and the size of the tests.

    python benchmarks/bench_critical_difference.py               # both tables
    python benchmarks/bench_critical_difference.py --only timing --store DIR
    python benchmarks/bench_critical_difference.py --only size --reps 2000

Timing: ``k`` policies on 50 tasks, each cell a success rate of 10 episodes (many ties, as
real rates): :func:`~hylo_analytics.stats.critical_difference.critical_difference_test` on
the matrix, :func:`~hylo_analytics.compare.critical_difference_scores` on a scores frame of
one row per cell, and (``--store``) ``Store.critical_difference`` on a store of ``k`` agents x
50 tasks x 2 seeds (written and ingested first, not timed), for both post-hoc tests. Process
CPU seconds and wall seconds; the machine is shared, so the wall time is the upper one.

Size: under the null (every policy the same; i.i.d. normal block values, and rates of 10
episodes with ties), the share of repetitions in which Friedman's chi-square, the
Iman-Davenport F, Nemenyi (any pair beyond the CD) and Wilcoxon-Holm (any pair) reject at
alpha = 0.05; goal <= 0.05 (plus Monte-Carlo error, sqrt(0.05 * 0.95 / reps)).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import polars as pl
from scipy import special

from hylo_analytics.compare import critical_difference_scores
from hylo_analytics.stats.critical_difference import (
    block_ranks,
    critical_difference_test,
    friedman_test,
)

SIZES = (20, 200, 2000)
TASKS = 50


def rates(k: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Tasks x policies success rates of 10 episodes: a skill per policy, a difficulty per
    task."""
    skill = rng.normal(size=k)
    difficulty = rng.normal(size=(n, 1))
    return rng.binomial(10, special.expit(skill[None, :] + difficulty)) / 10


def _timed(fn) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def timing(store_dir: Path | None) -> None:
    print("| policies | pairs | test | matrix (stats) | scores frame | store | cliques |")
    print("|---|---|---|---|---|---|---|")
    for k in SIZES:
        x = rates(k, TASKS, np.random.default_rng(k))
        frame = pl.DataFrame(
            {
                "agent": np.repeat([f"policy-{p:04d}" for p in range(k)], TASKS),
                "task_id": np.tile([f"task-{t:02d}" for t in range(TASKS)], k),
                "metric": "success",
                "value": x.T.ravel(),
            }
        )
        store = _store(store_dir, k) if store_dir is not None else None
        for test in ("nemenyi", "wilcoxon"):
            found = critical_difference_test(x, test=test)
            stats_t = _timed(lambda: critical_difference_test(x, test=test))  # noqa: B023
            frame_t = _timed(
                lambda: critical_difference_scores(frame, policy="agent", test=test)  # noqa: B023
            )
            store_t = (
                "-"
                if store is None
                else "{:.2f} / {:.2f} s".format(
                    *_timed(lambda: store.critical_difference(test=test, errors="failure"))  # noqa: B023
                )
            )
            print(
                f"| {k:,} | {k * (k - 1) // 2:,} | {test} | {stats_t[0]:.2f} / {stats_t[1]:.2f}"
                f" s | {frame_t[0]:.2f} / {frame_t[1]:.2f} s | {store_t} | "
                f"{len(found.clique_first):,} |",
                flush=True,
            )


def _store(root: Path, k: int):  # type: ignore[no-untyped-def]
    import hylo_analytics as ha
    from hylo_analytics.testing import SynthConfig, write_dataset

    folder = root / f"cd-{k}"
    if not (folder / "store").exists():
        config = SynthConfig(runs=k, tasks=TASKS, seeds=2, agents=k, traces_per_run=0)
        write_dataset(folder / "logs", config)
        ha.open_store(folder / "store").ingest(folder / "logs", progress=False)
    return ha.open_store(folder / "store")


def size(reps: int) -> None:
    print("| values | blocks | policies | Friedman chi2 | Iman-Davenport F | Nemenyi (any pair) "
          "| Wilcoxon-Holm (any pair) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for kind in ("normal", "rates of 10"):
        for n in (5, 10, 20, 50):
            for k in (3, 5, 10):
                rng = np.random.default_rng([n, k, len(kind)])
                hits = np.zeros(4)
                for _ in range(reps):
                    x = rng.normal(size=(n, k))
                    if kind != "normal":
                        x = rng.binomial(10, 0.5, size=(n, k)) / 10
                    f = friedman_test(block_ranks(x))
                    nemenyi = critical_difference_test(x, test="nemenyi")
                    wilcoxon = critical_difference_test(x, test="wilcoxon")
                    hits += [f.p < 0.05, f.f_p < 0.05, nemenyi.significant.any(),
                             wilcoxon.significant.any()]  # fmt: skip
                rate = hits / reps
                print(f"| {kind} | {n} | {k} | " + " | ".join(f"{r:.3f}" for r in rate) + " |",
                      flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=("timing", "size"))
    parser.add_argument("--reps", type=int, default=1000, help="null repetitions per cell")
    parser.add_argument("--store", type=Path, help="folder for the stores timed (kept)")
    args = parser.parse_args()
    if args.only in (None, "timing"):
        timing(args.store)
    if args.only in (None, "size"):
        size(args.reps)


if __name__ == "__main__":
    main()
