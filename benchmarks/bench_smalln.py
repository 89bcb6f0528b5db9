"""Small-n pooling: coverage of the 95 % intervals and mean squared error of the shrunk
per-task rates against the raw rates (Wilson), by seeded simulation.

A suite of ``tasks`` tasks, ``episodes`` episodes each (10-50: LIBERO, SimplerEnv, LeRobot),
true task rates drawn from a Beta prior of several shapes (middling, skewed, U-shaped, near 0,
near 1, and point masses: every task the same rate), successes binomial. Each replicate suite
is one group of :func:`hylo_analytics.stats.shrinkage.shrink_rates`, so all replicates of a
configuration are one vectorized call per interval. Printed side by side per configuration:
the share of tasks whose true rate each 95 % interval covers (raw Wilson; the plain
empirical-Bayes posterior; Laird-Louis' parametric bootstrap; the hierarchical interval, the
default), their mean widths, the MSE (x 1000) of the raw and of the shrunk rates, and the
share of replicates the fit called complete pooling. Coverage is averaged over tasks (the
empirical-Bayes sense: over the prior and the data); its Monte-Carlo standard error is about
``sqrt(0.95 * 0.05 / (reps * tasks))`` times a small design effect (0.002-0.004 here).

``--timing`` also times each interval at 2,000 runs x 10 tasks (and the stage on a frame).

    python benchmarks/bench_smalln.py [--reps 300] [--boot 100] [--timing]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

from hylo_analytics.stats.shrinkage import INTERVALS, shrink_rates

PRIORS: dict[str, tuple[float, float]] = {
    "Beta(2, 2)": (2, 2),
    "Beta(8, 2)": (8, 2),
    "Beta(0.5, 0.5)": (0.5, 0.5),
    "Beta(1, 12)": (1, 12),  # near 0
    "Beta(30, 3)": (30, 3),  # near 1, concentrated
    "point 0.7": (np.inf, 0.7),
    "point 0.95": (np.inf, 0.95),
}
SHAPES: tuple[tuple[int, int | None], ...] = ((10, 10), (10, 50), (50, 10), (50, 50), (20, None))


def configuration(
    prior: tuple[float, float], tasks: int, episodes: int | None, reps: int, boot: int, seed: int
) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    a, b = prior
    p = np.full(reps * tasks, b) if np.isinf(a) else rng.beta(a, b, reps * tasks)
    n = rng.integers(10, 51, reps * tasks) if episodes is None else np.full(reps * tasks, episodes)
    k = rng.binomial(n, p)
    g = np.repeat(np.arange(reps), tasks)
    row: dict[str, float] = {}
    for interval in INTERVALS:
        out = shrink_rates(k, n, g, interval=interval, n_resamples=boot, seed=seed)  # type: ignore[arg-type]
        row[f"cover_{interval}"] = float(np.mean((out.low <= p) & (p <= out.high)))
        row[f"width_{interval}"] = float(np.mean(out.high - out.low))
    row["cover_raw"] = float(np.mean((out.raw_low <= p) & (p <= out.raw_high)))
    row["width_raw"] = float(np.mean(out.raw_high - out.raw_low))
    row["mse_raw"] = float(np.mean((out.raw - p) ** 2) * 1000)
    row["mse_shrunk"] = float(np.mean((out.shrunk - p) ** 2) * 1000)
    row["complete"] = float(np.mean(out.fit.pooling == "complete"))
    return row


def table(reps: int, boot: int) -> pl.DataFrame:
    rows = []
    for i, (name, prior) in enumerate(PRIORS.items()):
        for j, (tasks, episodes) in enumerate(SHAPES):
            got = configuration(prior, tasks, episodes, reps, boot, seed=100 * i + j)
            shown = "10-50" if episodes is None else str(episodes)
            rows.append({"prior": name, "tasks": tasks, "episodes": shown, **got})
    return pl.DataFrame(rows)


def markdown(df: pl.DataFrame) -> str:
    head = (
        "| prior | tasks | episodes | raw (Wilson) | plain EB | Laird-Louis | hierarchical | "
        "width raw / hier. | MSE raw / shrunk (x1000) | complete |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    lines = [
        f"| {r['prior']} | {r['tasks']} | {r['episodes']} | {r['cover_raw']:.3f} | "
        f"{r['cover_plain']:.3f} | {r['cover_bootstrap']:.3f} | **{r['cover_hierarchical']:.3f}** | "
        f"{r['width_raw']:.3f} / {r['width_hierarchical']:.3f} | "
        f"{r['mse_raw']:.2f} / {r['mse_shrunk']:.2f} | {r['complete']:.2f} |"
        for r in df.iter_rows(named=True)
    ]
    return head + "\n".join(lines)


def timing(boot: int) -> str:
    from hylo_analytics.aggregate import shrunk_rates

    rng = np.random.default_rng(0)
    runs, tasks, episodes = 2000, 10, 10
    p = rng.beta(np.repeat(rng.uniform(0.5, 8, runs), tasks),
                 np.repeat(rng.uniform(0.5, 8, runs), tasks))  # fmt: skip
    lines = []
    for label, n in (("10 episodes", np.full(runs * tasks, episodes)),
                     ("10-50 episodes", rng.integers(10, 51, runs * tasks))):  # fmt: skip
        k = rng.binomial(n, p)
        g = np.repeat(np.arange(runs), tasks)
        for interval in INTERVALS:
            start = time.perf_counter()
            shrink_rates(k, n, g, interval=interval, n_resamples=boot)  # type: ignore[arg-type]
            lines.append(f"stats, {label}, {interval}: {time.perf_counter() - start:.2f} s")
    k = rng.binomial(episodes, p)
    e = np.arange(episodes)
    scores = pl.DataFrame({
        "run_id": np.repeat([f"r{i:04d}" for i in range(runs)], tasks * episodes),
        "task_id": np.tile(np.repeat([f"t{t}" for t in range(tasks)], episodes), runs),
        "key": np.tile([f"s{x}" for x in e], runs * tasks), "metric": "success",
        "value": (np.tile(e, runs * tasks) < np.repeat(k, episodes)).astype(float),
    })  # fmt: skip
    start = time.perf_counter()
    shrunk_rates(scores)
    lines.append(
        f"shrunk_rates on a frame of {scores.height:,} episodes (aggregate + hierarchical): "
        f"{time.perf_counter() - start:.2f} s"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=300, help="replicate suites per row")
    parser.add_argument("--boot", type=int, default=100, help="Laird-Louis refits")
    parser.add_argument("--timing", action="store_true", help="also time 2,000 runs x 10 tasks")
    args = parser.parse_args()
    start = time.perf_counter()
    df = table(args.reps, args.boot)
    print(markdown(df))
    print(f"\n{args.reps} replicate suites per row, {args.boot} Laird-Louis refits; "
          f"{time.perf_counter() - start:.0f} s")  # fmt: skip
    if args.timing:
        print()
        print(timing(200))


if __name__ == "__main__":
    main()
