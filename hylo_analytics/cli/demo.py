"""``hylo-analytics demo``: the README's main job on the bundled data."""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

from hylo_analytics import charts
from hylo_analytics.api import open_store
from hylo_analytics.cli._common import emit
from hylo_analytics.report import write_report

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "data" / "sample"

_COMPARE_COLUMNS = (
    "candidate", "level", "n_pairs", "candidate_wins", "parent_wins", "ties", "n_dropped",
    "p_value", "p_holm", "mean_diff", "ci_low", "ci_high", "verdict",
)  # fmt: skip


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="ingest the bundled data, score, compare agents, write charts and a report",
        description=(
            "The main job on the bundled data: ingest data/sample into a store, re-score every "
            "trace with the built-in scorers, print the runs, success with 95% intervals, and "
            "a paired comparison of every newer agent version against the oldest (overall and "
            "per task, McNemar p, Holm-adjusted, verdicts); write charts (PNG and HTML) and a "
            "self-contained HTML report to --out."
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
        help="where the store, charts and report go (default: out/)",
    )
    p.set_defaults(func=run)


def _title(text: str) -> None:
    print(f"\n{text}\n{'-' * len(text)}")


def run(args: argparse.Namespace) -> int:
    store = open_store(args.out / "store")
    print(store.ingest(args.data, progress=False))
    print(store.score())
    _title("Runs")
    emit(store.runs().drop("ingested_at"), "table", None)

    runs = store.sql("SELECT run_id FROM stg_runs ORDER BY agent_version, run_id")["run_id"]
    parent, candidates = runs[0], runs[1:].to_list()
    _title("Success per run (preferred score per episode; Wilson 95% interval)")
    agg = store.aggregate(by=["run_id"], metrics=["success", "steps", "latency_p95"])
    emit(
        agg.select("run_id", "metric", "n_total", "n_valid", "n_skipped", "mean",
                   "success_rate_errors_as_failures", "ci_low", "ci_high", "ci_method"),
        "table", None,
    )  # fmt: skip

    _title(
        f"Paired comparison on success against the parent {parent} "
        "(one-sided exact McNemar p, Holm-adjusted; statistical verdict rule)"
    )
    overall = store.compare(candidates, parent, metrics=["success"])
    emit(overall.select(_COMPARE_COLUMNS), "table", None)
    newest = candidates[-1]
    _title(f"Per task: {newest} vs {parent}")
    per_task = store.compare([newest], parent, metrics=["success"], by=["task_id"])
    tasks = per_task.filter(pl.col("level") != "overall")
    emit(tasks.select("task_id", *_COMPARE_COLUMNS[2:]), "table", None)

    task_success = store.sql("SELECT * FROM mart_task_success").with_columns(
        (pl.col("agent_name") + " " + pl.col("agent_version")).alias("agent")
    )
    forest = tasks.select(
        "task_id", "n_pairs", "candidate_wins", "parent_wins", "ties", "ci_low", "ci_high",
        "verdict", "p_value", diff="mean_diff", p_adjusted="p_holm",
    )  # fmt: skip
    outputs = [
        (charts.success_rate_by_task(task_success, run_label="agent"), "success_by_task"),
        (charts.paired_forest(forest), "paired_forest"),
    ]
    for chart, name in outputs:
        for suffix in (".png", ".html"):
            print(f"wrote {charts.save(chart, args.out / f'{name}{suffix}')}")
    print(f"wrote {write_report(store, newest, parent, args.out / 'report.html')}")
    return 0
