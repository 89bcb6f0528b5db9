"""``hylo-analytics demo``: the README's main job on the bundled data."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from hylo_analytics._resources import sample_data_dir
from hylo_analytics._versions import version_ranks
from hylo_analytics.cli._common import emit, say
from hylo_analytics.errors import InputError

if TYPE_CHECKING:
    import polars as pl

_COMPARE_COLUMNS = (
    "candidate", "level", "n_pairs", "candidate_wins", "parent_wins", "ties", "n_dropped",
    "p_value", "p_holm", "p_verdict", "mean_diff", "ci_adj_low", "ci_adj_high", "ci_adj_level",
    "verdict", "verdict_note",
)  # fmt: skip


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="ingest the bundled data, score, compare agents, write charts and a report",
        description=(
            "The main job on the bundled data: ingest data/sample into a store, re-score every "
            "trace with the built-in scorers, print the runs, success with 95% intervals, and "
            "a paired comparison of every newer agent version against the oldest (overall and "
            "per task, Tango score intervals with the one-sided score test they invert, Holm "
            "within the per-task family, verdicts with their reasons); write charts (PNG and HTML) and a "
            "self-contained HTML report to --out."
        ),
    )
    p.add_argument(
        "--data",
        type=Path,
        default=None,
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
    say(f"\n{text}\n{'-' * len(text)}")


_METRICS = ("success", "steps", "latency_p95")


def run(args: argparse.Namespace) -> int:
    import polars as pl

    from hylo_analytics import charts
    from hylo_analytics.api import open_store
    from hylo_analytics.compare import StatisticalRule
    from hylo_analytics.report import run_labels, write_report

    data = args.data if args.data is not None else sample_data_dir()
    store = open_store(args.out / "store")
    say(store.ingest(data, progress=False))
    say(store.score())
    runs = store.runs()
    if runs.is_empty():
        raise InputError(
            f"no run was ingested from {data}: nothing to analyse; point --data at a folder "
            "of EvalLogs, or leave --data out for the bundled sample"
        )
    # demo prints what it finds: how to see a long table whole is a query of the store
    hint = (
        f"hylo-analytics runs, aggregate and compare --store {args.out / 'store'} --all "
        "print every row"
    )
    _title("Runs")
    emit(runs.drop("ingested_at"), "table", None, hint=hint)

    present = set(store.sql("SELECT DISTINCT metric FROM scores")["metric"])
    metrics = [m for m in _METRICS if m in present] or sorted(present)[:3]
    _title(
        "Per run (preferred score per episode; errors as each harness counts them; 95% interval)"
    )
    agg = store.aggregate(by=["run_id"], metrics=metrics)
    emit(
        agg.select("run_id", "metric", "n_total", "n_valid", "n_skipped", "mean",
                   "errors", "n_errors", "ci_low", "ci_high", "ci_method"),
        "table", None, hint=hint,
    )  # fmt: skip
    if "success" not in present:
        say("\nno success scores: nothing to compare")
        return 0

    # only runs of one benchmark and split are paired: one comparison per group
    groups = _groups(runs)
    if not groups:
        say("\nno two runs share a benchmark and split: nothing to compare")
        return 0
    rule = StatisticalRule()
    say(f"\nVerdicts: {rule.describe()}.")
    for (benchmark, split), (parent, candidates) in groups.items():
        _title(
            f"Paired comparison on success, {benchmark} · {split}: every run against "
            f"the parent {parent} (one-sided Tango score test p; each overall row its own family)"
        )
        overall = store.compare(candidates, parent, metrics=["success"], rule=rule)
        emit(overall.select(_COMPARE_COLUMNS), "table", None, hint=hint)
        for row in overall.filter(pl.col("drop_note").is_not_null()).iter_rows(named=True):
            say(f"* {row['candidate']}: {row['drop_note']} ({row['drop_reasons']})")

    # the detail, the charts and the report: the first group's newest run against its parent
    (benchmark, split), (parent, candidates) = next(iter(groups.items()))
    newest = candidates[-1]
    _title(f"Per task: {newest} vs {parent} (Holm within the per-task family)")
    per_task = store.compare([newest], parent, metrics=["success"], by=["task_id"], rule=rule)
    tasks = per_task.filter(pl.col("level") != "overall")
    emit(tasks.select("task_id", *_COMPARE_COLUMNS[2:]), "table", None)

    group = [parent, *candidates]
    labels = run_labels(runs.filter(pl.col("run_id").is_in(group)))
    task_success = (
        store.sql("SELECT * FROM mart_task_success WHERE list_contains($runs, run_id)",
                  {"runs": group})
        .with_columns(run=pl.col("run_id").replace_strict(labels, return_dtype=pl.String))
    )  # fmt: skip
    outputs = [
        (charts.success_rate_by_task(task_success), "success_by_task"),
        (charts.paired_forest(per_task), "paired_forest"),
    ]
    for chart, name in outputs:
        for suffix in (".png", ".html"):
            say(f"wrote {charts.save(chart, args.out / f'{name}{suffix}')}")
    say(f"wrote {write_report(store.parquet, newest, parent, args.out / 'report.html')}")
    return 0


def _groups(runs: pl.DataFrame) -> dict[tuple[str, str], tuple[str, list[str]]]:
    """(benchmark, split) -> (parent, candidates) for every group of two runs or more.

    The parent is the oldest version (then the first agent name, then id): in the bundled
    sample, the first release of the agent.
    """
    import polars as pl

    ordered = runs.with_columns(
        _unversioned=pl.col("agent_version").is_null(),  # as before: runs with no version last
        _version=version_ranks(runs["agent_version"]),  # natural order: 2.10.0 after 2.9.0
    ).sort("benchmark_id", "split", "_unversioned", "_version", "agent_name", "run_id",
           nulls_last=True)  # fmt: skip
    out: dict[tuple[str, str], tuple[str, list[str]]] = {}
    for (benchmark, split), frame in ordered.group_by("benchmark_id", "split", maintain_order=True):
        ids = frame["run_id"].to_list()
        if len(ids) >= 2:
            out[(str(benchmark), str(split))] = (ids[0], ids[1:])
    return out
