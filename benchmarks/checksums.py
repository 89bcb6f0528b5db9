"""A checksum of every table and view on the bundled sample: results stay identical.

    python benchmarks/checksums.py              # print one line per relation
    python benchmarks/checksums.py --check FILE # compare with a saved listing (exit 1 on change)

The sample (``data/sample``) is ingested and re-scored into a fresh store, then each table and
view is read whole, sorted by every column, and hashed. Columns that name the machine or the
moment (paths, ingest times, batch numbers, sha of the raw bytes is kept) are left out, so a
speed-up that changes no answer prints the same listing before and after.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

import polars as pl

import hylo_analytics as ha
from hylo_analytics._resources import resource_dir
from hylo_analytics._sql import view_names

# what differs between two runs that give the same answers
VOLATILE = {"ingested_at", "batch_seq", "source_path", "trace_path", "path", "dead_before"}
RELATIONS = (
    "runs", "samples", "events", "scores", "quarantine", "ingested_files", "policy_results",
)  # fmt: skip


def checksum(frame: pl.DataFrame) -> str:
    cols = sorted(c for c in frame.columns if c not in VOLATILE)
    as_text = []
    for c in cols:
        dtype = frame.schema[c]
        if dtype.is_nested():  # lists and structs: their Python form, a few rows at most
            as_text.append(pl.Series(c, [repr(v) for v in frame[c].to_list()]))
        elif dtype.is_float():  # sums in another thread order differ in the last bits
            as_text.append(frame[c].round_sig_figs(10).cast(pl.String))
        else:
            as_text.append(frame[c].cast(pl.String))
    text = pl.DataFrame(as_text).sort(cols, nulls_last=True).write_csv()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def listing() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        store = ha.open_store(Path(tmp) / "store")
        store.ingest(resource_dir("data/sample"), progress=False)
        store.score()
        names = [*RELATIONS, *(v for v in view_names() if not v.startswith("stg_"))]
        lines = []
        for name in names:
            frame = store.sql(f"SELECT * FROM {name}")
            lines.append(f"{name:28} {frame.height:8d} rows  {checksum(frame)}")
        ids = store.sql("SELECT run_id FROM runs ORDER BY run_id")["run_id"].to_list()
        answers = {
            "Store.aggregate(run)": store.aggregate(("run_id",), metrics=["success", "steps"]),
            "Store.aggregate(run,task)": store.aggregate(("run_id", "task_id")),
            "Store.compare(by task)": store.compare(ids[1:], ids[0], by=["task_id"]),
        }
        for name, frame in answers.items():
            lines.append(f"{name:28} {frame.height:8d} rows  {checksum(frame)}")
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
