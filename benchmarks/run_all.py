"""Every goal of the fast engine (issue 14) in one table.

    python benchmarks/run_all.py            # the full sizes (about 20-30 minutes on 2 cores)
    python benchmarks/run_all.py --small    # quick sizes, to check the scripts run
    python benchmarks/run_all.py --only bench_store bench_import

Each script's ``run(small)`` returns rows (goal, workload, hylo_analytics seconds, the reference
measured in the same run, the ratio, the target, met); this prints them as one Markdown table,
ready for docs/benchmarks.md, with the machine named.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

SCRIPTS = (
    "bench_ingest_evallog",  # goal 1
    "bench_ingest_traces",  # goal 2
    "bench_store",  # goals 3, 4, 5
    "bench_import",  # goal 5
    "bench_inspect",  # goal 6
    "bench_scale_engine",  # goal 7 (the engine)
    "bench_scale",  # goals 7 and 8 (from the store, per size)
)


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "met" if value else "**missed**"
    if isinstance(value, float):
        return format(value, fmt)
    return str(value)


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({cpu}), "
        f"Python {platform.python_version()}"
    )


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as Markdown; the reference's peak RSS and the load average are columns when
    some row carries them (``reference_rss_mb``, ``load``)."""
    extra = [k for k in ("reference_rss_mb", "load") if any(r.get(k) is not None for r in rows)]
    names = {"reference_rss_mb": "reference peak RSS", "load": "load (1 min)"}
    head = "| goal | workload | hylo_analytics | reference | ratio | target | | peak RSS |"
    head += "".join(f" {names[k]} |" for k in extra)
    lines = [head, "|---|---|---|---|---|---|---|---|" + "---|" * len(extra)]
    for r in rows:
        ref = r.get("reference") or ""
        if r.get("reference_s") is not None:
            ref = f"{ref} {r['reference_s']:.3f} s"
        rss = r.get("peak_rss_mb")
        cells = [
            str(r["goal"]),
            str(r["workload"]),
            f"{r['hylo_s']:.3f} s" if r.get("hylo_s") is not None else "",
            ref,
            f"{r['ratio']:.2f}x" if r.get("ratio") is not None else "",
            str(r["target"]),
            _cell(r.get("met"), ""),
            f"{rss:.0f} MB" if rss else "",
        ]
        if "reference_rss_mb" in extra:
            mb = r.get("reference_rss_mb")
            cells.append(f"{mb:.0f} MB" if mb else "")
        if "load" in extra:
            cells.append(f"{r['load']:.2f}" if r.get("load") is not None else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--only", nargs="+", metavar="SCRIPT", choices=SCRIPTS)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    rows: list[dict[str, Any]] = []
    missing: list[str] = []
    for name in args.only or SCRIPTS:
        t = time.perf_counter()
        print(f"# {name} ...", file=sys.stderr, flush=True)
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            print(f"# {name}: no such script, skipped", file=sys.stderr)
            missing.append(name)
            continue
        rows += module.run(args.small)
        print(f"# {name}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    print(f"Machine: {machine()}; {time.strftime('%Y-%m-%d')}\n")
    print(table(rows))
    met = sum(bool(r.get("met")) for r in rows)
    print(f"\n{met} of {len(rows)} targets met")
    if missing:
        print(f"scripts not found: {', '.join(missing)}")


if __name__ == "__main__":
    main()
