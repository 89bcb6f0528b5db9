"""A checksum of every table and view on the bundled sample: results stay identical.

    python benchmarks/checksums.py              # print one line per relation
    python benchmarks/checksums.py --check FILE # compare with a saved listing (exit 1 on change)

The sample (``data/sample``) is ingested and re-scored into a fresh store, then each table and
view is read whole, sorted by every column, and hashed. Columns that name the machine or the
moment are left out (:mod:`hylo_analytics.testing.checksums`), so a speed-up that changes
no answer prints the same listing before and after. Every ordered pair of the sample's runs is
declared (``Store.declare_parent``), so ``int_paired`` and ``mart_compare`` hold every pair.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import hylo_analytics as ha
from hylo_analytics._resources import resource_dir
from hylo_analytics.testing.checksums import frame_checksum, store_checksums


def listing() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        store = ha.open_store(Path(tmp) / "store")
        store.ingest(resource_dir("data/sample"), progress=False)
        store.score()
        runs = store.sql("SELECT run_id FROM runs ORDER BY run_id")["run_id"].to_list()
        for parent in runs:  # every ordered pair: the pairs mart_compare held before issue 16
            store.declare_parent([r for r in runs if r != parent], parent)
        lines = [
            f"{name:28} {rows:8d} rows  {digest}"
            for name, (rows, digest) in store_checksums(store.parquet).items()
        ]
        ids = store.sql("SELECT run_id FROM runs ORDER BY run_id")["run_id"].to_list()
        answers = {
            "Store.aggregate(run)": store.aggregate(("run_id",), metrics=["success", "steps"]),
            "Store.aggregate(run,task)": store.aggregate(("run_id", "task_id")),
            "Store.compare(by task)": store.compare(ids[1:], ids[0], by=["task_id"]),
        }
        for name, frame in answers.items():
            lines.append(f"{name:28} {frame.height:8d} rows  {frame_checksum(frame)}")
        return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", type=Path, help="a saved listing to compare with")
    args = ap.parse_args()
    lines = listing()
    if args.check is None:
        print("\n".join(lines))
        return
    saved = args.check.read_text().splitlines()
    changed = [f"- {a}\n+ {b}" for a, b in zip(saved, lines, strict=False) if a != b]
    if changed or len(saved) != len(lines):
        print("tables changed:\n" + "\n".join(changed))
        sys.exit(1)
    print(f"{len(lines)} relations identical to {args.check}")


if __name__ == "__main__":
    main()
