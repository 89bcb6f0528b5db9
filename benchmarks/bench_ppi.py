"""Judge calibration by PPI++ (issue 42, item 6): coverage and width against the classical
and the judge-only intervals.

    python benchmarks/bench_ppi.py                    # about a minute
    python benchmarks/bench_ppi.py --reps 2000

Each cell draws ``--reps`` data sets of ``n`` trusted-labelled keys and ``N`` judge-only keys
of a policy whose true success rate is 0.3, graded by a judge of one of four kinds (``good``:
right 90% of the time either way; ``biased``: a false success 25%, a false failure 5%;
``weak``: right 65%; ``useless``: a coin). Every data set is one group of one
:func:`~hylo_analytics.stats.ppi.ppi_mean` call (no loop over data sets). Reported: the
coverage of the 95% intervals of PPI++ (tuned lam), plain PPI (lam = 1), the classical CLT
mean of the trusted grades and the judge-only mean; PPI++'s mean width over the classical
one's and its effective number of labels. The paired part: two policies (rates 0.45 and 0.35)
on shared keys with a key difficulty both feel, their difference by ``ppi_paired``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from hylo_analytics.stats.ppi import ppi_mean, ppi_paired

RATE = 0.3
JUDGES = {"good": (0.10, 0.10), "biased": (0.25, 0.05), "weak": (0.35, 0.35),
          "useless": (0.5, 0.5)}  # (P(judge says 1 | 0), P(judge says 0 | 1))  # fmt: skip


def _judge(y: np.ndarray, kind: str, rng: np.random.Generator) -> np.ndarray:
    false_pos, false_neg = JUDGES[kind]
    flip = rng.random(y.shape) < np.where(y == 1, false_neg, false_pos)
    return np.where(flip, 1 - y, y)


def _cell(n: int, big_n: int, kind: str, reps: int, rng: np.random.Generator) -> list[float]:
    y = (rng.random((reps, n + big_n)) < RATE).astype(float)
    f = _judge(y, kind, rng)
    t = y.copy()
    t[:, n:] = np.nan
    group = np.repeat(np.arange(reps), n + big_n)
    tuned = ppi_mean(t.ravel(), f.ravel(), group, n_groups=reps)
    plain = ppi_mean(t.ravel(), f.ravel(), group, n_groups=reps, lam=1.0)
    cover = [float(np.mean((lo <= RATE) & (hi >= RATE)))
             for lo, hi in ((tuned.low, tuned.high), (plain.low, plain.high),
                            (tuned.classical_low, tuned.classical_high),
                            (tuned.judge_low, tuned.judge_high))]  # fmt: skip
    ratio = float(np.nanmean(tuned.width_ratio))
    return [*cover, ratio, float(np.nanmedian(tuned.effective_n)), float(np.nanmean(tuned.lam))]


def _paired(n: int, big_n: int, kind: str, reps: int, rng: np.random.Generator) -> list[float]:
    keys = n + big_n
    hard = rng.random((reps, keys)) < 0.4
    ya = (rng.random((reps, keys)) < np.where(hard, 0.15, 0.65)).astype(float)
    yb = (rng.random((reps, keys)) < np.where(hard, 0.05, 0.55)).astype(float)
    truth = 0.1
    fa, fb = _judge(ya, kind, rng), _judge(yb, kind, rng)
    ta, tb = ya.copy(), yb.copy()
    ta[:, n:] = np.nan
    tb[:, n:] = np.nan
    group = np.repeat(np.arange(reps), keys)
    est = ppi_paired(ta.ravel(), fa.ravel(), tb.ravel(), fb.ravel(), group, n_groups=reps)
    cover = [float(np.mean((lo <= truth) & (truth <= hi)))
             for lo, hi in ((est.low, est.high), (est.classical_low, est.classical_high),
                            (est.judge_low, est.judge_high))]  # fmt: skip
    return [*cover, float(np.nanmean(est.width_ratio)), float(np.nanmedian(est.effective_n))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    print(f"rate {RATE}, {args.reps:,} data sets per row, 95% intervals\n")
    print(
        "| judge | n | N | PPI++ | PPI (lam=1) | classical | judge-only | width PPI++/classical "
        "| effective n | mean lam |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind in JUDGES:
        for n in (20, 50, 100, 200):
            for big_n in (1_000, 10_000):
                reps = args.reps if big_n == 1_000 else max(args.reps // 4, 100)
                c = _cell(n, big_n, kind, reps, rng)
                print(f"| {kind} | {n} | {big_n:,} | {c[0]:.3f} | {c[1]:.3f} | {c[2]:.3f} | "
                      f"{c[3]:.3f} | {c[4]:.2f} | {c[5]:.0f} | {c[6]:.2f} |")  # fmt: skip
    print("\npaired difference (true 0.10; two policies on shared keys, a key difficulty)\n")
    print(
        "| judge | n | N | PPI++ | classical | judge-only | width PPI++/classical | effective n |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for kind in JUDGES:
        for n in (20, 100):
            c = _paired(n, 2_000, kind, args.reps, rng)
            print(f"| {kind} | {n} | 2,000 | {c[0]:.3f} | {c[1]:.3f} | {c[2]:.3f} | "
                  f"{c[3]:.2f} | {c[4]:.0f} |")  # fmt: skip
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
