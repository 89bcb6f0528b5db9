"""Start-up cost: ``import hylo_analytics`` and ``hylo-analytics --help``, in fresh interpreters.

    python benchmarks/bench_import.py            # median of 5 runs per workload
    python benchmarks/bench_import.py --small    # median of 3

Goal (issue 14): ``import hylo_analytics`` <= 0.5 s, ``--help`` as fast. Each workload runs in
a new ``python -c`` (nothing cached in-process), measured against references run in the same
session: ``import polars, pyarrow, duckdb`` (the floor a store cannot go below) and ``python -c
pass`` (the interpreter's own start-up). Import rows time the statement inside the child
(perf_counter around it); CLI rows time the whole process, as a shell user waits for it.
``ratio`` is reference_s / hylo_s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import hylo_analytics  # cheap: the package itself imports nothing heavy

GOAL_S = 0.5
FLOOR = "import polars, pyarrow, duckdb"
ROOT = Path(hylo_analytics.__file__).resolve().parents[1]

_CHILD = """
import json, sys, time
t = time.perf_counter()
{body}
inner = time.perf_counter() - t
# VmHWM starts afresh at exec; ru_maxrss would carry the parent's peak over
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
rss = int(hwm.split()[1]) / 1024
print(json.dumps({{"inner": inner, "rss": rss}}), file=sys.stderr)
"""
_CLI = """
from hylo_analytics.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
"""
_ALL_NAMES = (
    "import hylo_analytics as ha\n"
    "for n in ha.__all__:\n"
    "    if n not in ('charts', 'build_report'): getattr(ha, n)"
)


def _once(body: str) -> tuple[float, float, float]:
    """(process wall s, statement s, peak RSS MiB) of ``body`` in a fresh interpreter."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    code = _CHILD.format(body=body)
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=ROOT,  # ``-c`` puts the working directory first on sys.path
    )
    wall = time.perf_counter() - t
    stats = json.loads(out.stderr.strip().splitlines()[-1])
    return wall, float(stats["inner"]), float(stats["rss"])


def _median(body: str, runs: int) -> dict[str, float]:
    samples = [_once(body) for _ in range(runs)]
    return {
        "wall": statistics.median(s[0] for s in samples),
        "inner": statistics.median(s[1] for s in samples),
        "rss": max(s[2] for s in samples),
    }


def run(small: bool) -> list[dict[str, Any]]:
    runs = 3 if small else 5
    floor = _median(FLOOR, runs)
    bare = _median("pass", runs)
    rows: list[dict[str, Any]] = []

    def row(
        workload: str,
        m: dict[str, float],
        *,
        cli: bool,
        ref: str,
        ref_m: dict[str, float],
        target: float = GOAL_S,
    ) -> None:
        key = "wall" if cli else "inner"
        hylo_s, ref_s = m[key], ref_m[key]
        rows.append(
            {
                "goal": "start-up (issue 14)",
                "workload": workload,
                "hylo_s": hylo_s,
                "reference": ref,
                "reference_s": ref_s,
                "ratio": ref_s / hylo_s if hylo_s else float("inf"),
                "target": f"<= {target:.2f} s",
                "met": hylo_s <= target,
                "peak_rss_mb": m["rss"],
            }
        )

    row("import hylo_analytics", _median("import hylo_analytics", runs),
        cli=False, ref=FLOOR, ref_m=floor)  # fmt: skip
    # a store's first use and what the package used to import eagerly: the floor, pyarrow's
    # compute and parquet modules and our own, nothing heavy (within 1.3x of the floor)
    row("import + open_store", _median("import hylo_analytics as ha; ha.open_store", runs),
        cli=False, ref=FLOOR, ref_m=floor, target=1.3 * floor["inner"])  # fmt: skip
    row("every public name (old eager import)", _median(_ALL_NAMES, runs),
        cli=False, ref=FLOOR, ref_m=floor, target=1.3 * floor["inner"])  # fmt: skip
    for argv in (["--help"], ["compare", "--help"], ["aggregate", "--help"]):
        row(f"hylo-analytics {' '.join(argv)}", _median(_CLI.format(argv=argv), runs),
            cli=True, ref="python -c pass (process)", ref_m=bare)  # fmt: skip
    rows.append(
        {
            "goal": "start-up (issue 14)",
            "workload": f"reference: {FLOOR}",
            "hylo_s": floor["inner"],
            "reference": "python -c pass (process)",
            "reference_s": bare["wall"],
            "ratio": bare["wall"] / floor["inner"],
            "target": "record",
            "met": True,
            "peak_rss_mb": floor["rss"],
        }
    )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--small", action="store_true", help="median of 3 runs instead of 5")
    args = p.parse_args()
    rows = run(args.small)
    print(f"{'workload':<40} {'hylo_s':>7} {'reference':<32} {'ref_s':>7} {'ratio':>6} "
          f"{'target':>10} {'met':>4} {'RSS MiB':>8}")  # fmt: skip
    for r in rows:
        print(
            f"{r['workload']:<40} {r['hylo_s']:7.3f} {r['reference']:<32} "
            f"{r['reference_s']:7.3f} {r['ratio']:6.2f} {r['target']:>10} "
            f"{'yes' if r['met'] else 'NO':>4} {r['peak_rss_mb']:8.0f}"
        )
    print(f"goal: import hylo_analytics and --help <= {GOAL_S} s")


if __name__ == "__main__":
    main()
