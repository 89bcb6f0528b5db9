"""``hylo-analytics demo``: the README's main job on the bundled data."""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

from hylo_analytics import charts
from hylo_analytics.cli._common import emit
from hylo_analytics.compare import paired_compare
from hylo_analytics.store import open_store

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "data" / "sample"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="ingest the bundled data, compare two agents, write a chart",
        description=(
            "Ingest data/sample into a store, print the runs and a paired comparison of the "
            "oldest and newest agent version (overall and per task), and write a success-rate "
            "chart as PNG and HTML."
        ),
    )
    p.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        metavar="DIR",
        help="EvalLogs to ingest (default: the bundled data/sample)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("out"),
        metavar="DIR",
        help="where the store and the chart go (default: out/)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    store = open_store(args.out / "store")
    print(store.ingest(args.data, progress=False))
    runs = store.runs()
    print("\nRuns")
    emit(runs.drop("ingested_at"), "table", None)
    ordered = store.sql("SELECT run_id FROM stg_runs ORDER BY agent_version, run_id")["run_id"]
    parent, candidate = ordered[0], ordered[-1]
    success = store.sql(
        "SELECT run_id, key, task_id, value FROM stg_scores WHERE metric = 'success' "
        "AND source = 'evallog' AND run_id IN (?, ?)",
        [parent, candidate],
    )

    def scores(run: str, frame: pl.DataFrame) -> dict[str, float | None]:
        part = frame.filter(pl.col("run_id") == run)
        return dict(zip(part["key"], part["value"], strict=True))

    print(f"\nPaired comparison on success: candidate {candidate} vs parent {parent}")
    print(paired_compare(scores(candidate, success), scores(parent, success)))
    rows = []
    for (task,), part in success.group_by("task_id", maintain_order=True):
        pc = paired_compare(scores(candidate, part), scores(parent, part))
        rows.append(
            {
                "task_id": task,
                "n_pairs": pc.n_pairs,
                "candidate_wins": pc.candidate_wins,
                "parent_wins": pc.parent_wins,
                "ties": pc.ties,
                "p_value": pc.p_value,
            }
        )
    emit(pl.DataFrame(rows).sort("task_id"), "table", None)
    agg = store.sql("SELECT * FROM mart_task_success").with_columns(
        (pl.col("agent_name") + " " + pl.col("agent_version")).alias("agent")
    )
    chart = charts.success_rate_by_task(agg, run_label="agent")
    for suffix in (".png", ".html"):
        path = charts.save(chart, args.out / f"success_by_task{suffix}")
        print(f"wrote {path}")
    return 0
