"""Generate the bundled sample (or a larger one) of hylo EvalLogs and traces.

python data/generate.py                      # the committed data/sample
python data/generate.py --runs 50 --tasks 10 --seeds 50 --out /tmp/big
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from hylo_analytics.testing import SynthConfig, write_dataset


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "sample")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--tasks", type=int, default=10)
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument(
        "--traces-per-run",
        type=int,
        default=None,
        help="episodes per run that get a trace file (default: all)",
    )
    p.add_argument("--mean-steps", type=int, default=25)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.out.exists():
        shutil.rmtree(args.out)
    cfg = SynthConfig(
        runs=args.runs,
        tasks=args.tasks,
        seeds=args.seeds,
        traces_per_run=args.traces_per_run,
        mean_steps=args.mean_steps,
        seed=args.seed,
    )
    paths = write_dataset(args.out, cfg)
    print(f"wrote {len(paths)} EvalLogs under {args.out}")


if __name__ == "__main__":
    main()
