"""A one-file HTML report comparing a candidate run with its parent.

The report is two steps so either can be replaced: :func:`report_frames` asks the store for
a handful of small frames (headline, per task, runs, coverage, latency), and
:func:`render_report` turns those frames into one self-contained HTML page (charts inlined as
SVG, CSS inline, no network needed to view it). The frames follow the contracts of
:mod:`hylo_analytics.charts`.

No statistics live here: the paired numbers and verdicts are :func:`~hylo_analytics.compare.compare_runs`' (one
call, overall and per task), success rates and their intervals are :func:`aggregate_scores`', both
on the one score resolution (:mod:`hylo_analytics.resolution`). The page states the rule and
thresholds its verdicts used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from hylo_analytics._harness import Errors
from hylo_analytics._redact import Redactor, redact_secrets
from hylo_analytics._sql import query_sql
from hylo_analytics._text import did_you_mean
from hylo_analytics.aggregate import aggregate_scores
from hylo_analytics.compare import RelativeNoiseRule, StatisticalRule, compare_runs, flip_runs
from hylo_analytics.compare.engine import Family
from hylo_analytics.compare.trends import Trend
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.metrics import Direction
from hylo_analytics.report._html import render_report, report_fragment, summary_sentence
from hylo_analytics.resolution import success_metric
from hylo_analytics.stats.bootstrap import DEFAULT_RESAMPLES
from hylo_analytics.store import ParquetStore, pinned
from hylo_analytics.store.runs import natural_order

__all__ = [
    "ComparisonReport",
    "build_report",
    "describe_rule",
    "render_report",
    "report_frames",
    "run_labels",
    "summary_sentence",
    "write_report",
]

Rule = StatisticalRule | RelativeNoiseRule


_VALUES = query_sql("report_values")

_RUNS = query_sql("report_runs")

_HAS_STEPS = "select count(*) > 0 from int_scores_preferred where metric = 'steps'"

_COVERAGE = query_sql("report_coverage")

_LATENCY = query_sql("report_latency")

# Store.compare's columns under the names of the charts' paired contract
_TASK_COLUMNS = {
    "task_id": "task_id",
    "n_pairs": "n_pairs",
    "candidate_wins": "candidate_wins",
    "parent_wins": "parent_wins",
    "ties": "ties",
    "n_dropped": "n_dropped",
    "mean_candidate": "candidate_rate",
    "mean_parent": "parent_rate",
    "mean_diff": "diff",
    "ci_low": "ci_low",
    "ci_high": "ci_high",
    "test": "test",
    "p_value": "p_value",
    "p_worse": "p_worse",
    "p_mcnemar": "p_mcnemar",
    "p_verdict": "p_adjusted",
    "verdict": "verdict",
    "verdict_note": "verdict_note",
    "drop_note": "drop_note",
    "drop_reasons": "drop_reasons",
    "ci_method": "ci_method",
    "ci_adj_low": "verdict_ci_low",
    "ci_adj_high": "verdict_ci_high",
    "ci_adj_level": "verdict_ci_level",
    "family_size": "family_size",
}


def describe_rule(rule: Rule) -> str:
    """The verdict rule and its thresholds in words (the rule's own :meth:`describe`)."""
    return rule.describe()


@pinned
def report_frames(
    store: ParquetStore,
    candidate: str,
    parent: str,
    *,
    metric: str = "success",
    rule: Rule | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    force: bool = False,
    directions: Mapping[str, Direction] | None = None,
    family: Family = "comparison",
    errors: Errors | None = None,
) -> dict[str, pl.DataFrame]:
    """The report's data: small frames keyed by section.

    Keys: ``comparison`` (:func:`~hylo_analytics.compare.compare_runs`' frame as is: overall
    and per task, the one-sided test each interval inverts in each direction (``test``;
    ``p_mcnemar`` the exact McNemar), Holm within each family, Tango's score CI, verdicts by ``rule`` with their notes, dropped pairs), ``tasks``
    (its per-task rows renamed to the :func:`charts.paired_forest` contract: ``diff``,
    ``p_adjusted`` = the p the verdict used, ``candidate_rate``/``parent_rate`` = means over
    the pairs), ``headline`` (its overall row plus verdict counts per task and the rule in
    words), ``task_success`` and ``runs`` (:func:`aggregate_scores`: success with Wilson CIs
    per task of the two runs, and per run for every stored run of the parent's suite, in
    natural run order, with the mean of the ``steps`` metric and inference seconds per
    episode), ``coverage`` (``run, metric, reason, n``), ``latency`` (step latency
    quantiles), ``flips`` (the keys behind the per-task wins and losses, from
    :func:`~hylo_analytics.compare.flip_runs`: ``task_id, key, change, candidate_value,
    parent_value, sample_id``, each side's episode ids joined by ", " and its source file). ``metric`` must be binary (0/1); ``rule`` defaults to
    :class:`StatisticalRule` (Store.compare's default); ``force`` passes the comparability gate.
    """
    # a run id, a unique prefix or a selector such as "agent=xvla,benchmark=libero_spatial"
    candidate, parent = store.resolve_run(candidate), store.resolve_run(parent)
    params = {"metric": metric, "candidate": candidate, "parent": parent}
    n, n_not_binary = store.sql(_VALUES, params).row(0)
    if n == 0 and metric == "success":  # an inspect-robots pair's success is success_at_end
        metric = success_metric(store, [candidate, parent]) or metric
        params["metric"] = metric
        n, n_not_binary = store.sql(_VALUES, params).row(0)
    if n_not_binary:
        raise InputError(f"metric {metric!r} is not binary (values other than 0/1); use success")
    if n == 0:
        held = store.sql(
            "select metric from stg_scores where run_id in ($candidate, $parent) group by "
            "metric having count(distinct run_id) = 2 order by 1",
            {"candidate": candidate, "parent": parent},
        )["metric"].to_list()
        raise SelectionError(
            f"runs {candidate!r} and {parent!r} share no scored key for {metric!r}"
            f"{did_you_mean([metric], held)}; both have scores of {', '.join(held) or 'none'}"
        )
    rule = rule or StatisticalRule()
    comparison = compare_runs(
        store,
        candidate,
        parent,
        metrics=[metric],
        by=["task_id"],
        force=force,
        rule=rule,
        n_resamples=n_resamples,
        seed=seed,
        directions=directions,
        family=family,
        errors=errors,
    )
    overall = comparison.filter(pl.col("level") == "overall")
    if overall["n_pairs"].sum() == 0:
        raise SelectionError(
            f"runs {candidate!r} and {parent!r} share no scored key for {metric!r}: compare "
            "two runs of the same tasks and seeds"
        )
    tasks = (
        comparison.filter(pl.col("level") != "overall")
        .select(pl.col(list(_TASK_COLUMNS)).name.map(_TASK_COLUMNS.__getitem__))
        .sort("task_id")
    )
    headline = _headline(overall, tasks, rule, n_resamples, seed)
    # every rate on the page is aggregate's on the store, under one errors policy: a run's
    # rate is the same number in the runs table, the task chart and the mart
    task_success = (
        aggregate_scores(
            store,
            by=["run_id", "task_id"],
            metrics=[metric],
            seed=seed,
            runs=[candidate, parent],
            errors=errors,
        )
        .select(
            pl.col("run_id").alias("run"),
            "task_id",
            pl.col("mean").alias("success_rate"),
            "ci_low",
            "ci_high",
            "n_valid",
            "n_skipped",
        )
        .sort(pl.col("run") != parent, "task_id")
    )
    has_steps = store.sql(_HAS_STEPS).item()
    if not has_steps:  # no run has steps (inspect-robots)
        steps = pl.DataFrame(schema={"run": pl.String, "mean_steps": pl.Float64})
    else:
        steps = aggregate_scores(store, by=["run_id"], metrics=["steps"], ci="none").select(
            pl.col("run_id").alias("run"), pl.col("mean").alias("mean_steps")
        )
    per_run = aggregate_scores(
        store, by=["run_id"], metrics=[metric], seed=seed, errors=errors
    ).select(
        pl.col("run_id").alias("run"),
        "n_total",
        pl.col("n_valid").alias("n_scored"),
        "errors",
        (pl.col("mean") * pl.col("n_valid")).round().cast(pl.Int64).alias("successes"),
        pl.col("mean").alias("success"),
        "ci_low",
        "ci_high",
        "ci_method",
    )
    runs = (
        store.sql(_RUNS)
        .join(steps, on="run", how="left", maintain_order="left")
        .join(per_run, on="run", how="left", maintain_order="left")
        .with_columns(
            pl.when(pl.col("run") == candidate)
            .then(pl.lit("candidate"))
            .when(pl.col("run") == parent)
            .then(pl.lit("parent"))
            .alias("role"),
        )
    )
    # the runs the pair can be set against: the parent's benchmark and split
    par = runs.filter(pl.col("run") == parent).row(0, named=True)
    runs = runs.filter(
        pl.col("benchmark_id").eq_missing(par["benchmark_id"]),
        pl.col("split").eq_missing(par["split"]),
    )
    # in natural run order (2.3.0 before 2.294.0), as `runs` and Store.runs list them
    runs = natural_order(runs.rename({"run": "run_id"})).rename({"run_id": "run"})
    labels = run_labels(runs, id_column="run")
    headline = headline.with_columns(
        candidate_label=pl.lit(labels[candidate]),
        parent_label=pl.lit(labels[parent]),
        benchmark_id=pl.lit(par["benchmark_id"], pl.String),
        split=pl.lit(par["split"], pl.String),
    )
    runs = runs.with_columns(label=pl.col("run").replace_strict(labels, return_dtype=pl.String))

    def labelled(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.with_columns(
            label=pl.col("run").replace_strict(
                labels, default=pl.col("run"), return_dtype=pl.String
            )
        )

    pair_params = {"candidate": candidate, "parent": parent}
    flips = flip_runs(
        store,
        candidate,
        parent,
        metrics=[metric],
        force=force,
        directions=directions,
        errors=errors,
    )
    pooled = _pooled(
        store, candidate, parent, metric, force=force, rule=rule, n_resamples=n_resamples,
        seed=seed, directions=directions, errors=errors,
    )  # fmt: skip
    return {
        "flips": _flip_frame(flips),
        "pooled": pooled,
        "headline": headline,
        "tasks": tasks,
        "comparison": comparison,
        "runs": runs,
        "coverage": labelled(store.sql(_COVERAGE, pair_params)),
        "latency": labelled(store.sql(_LATENCY, pair_params)),
        "task_success": labelled(task_success),
    }


def _flip_frame(flips: pl.DataFrame) -> pl.DataFrame:
    """The report's flips: one text cell per link (redacted as every string of the page)."""
    return flips.select(
        "task_id",
        "key",
        "change",
        "candidate_value",
        "parent_value",
        "candidate_status",
        "parent_status",
        "errored_side",
        "flip_note",
        "sample_id",
        pl.col("candidate_episode_ids").list.join(", ").alias("candidate_episodes"),
        pl.col("parent_episode_ids").list.join(", ").alias("parent_episodes"),
        "candidate_path",
        "parent_path",
    ).sort("task_id", maintain_order=True)


def run_labels(runs: pl.DataFrame, *, id_column: str = "run_id") -> dict[str, str]:
    """Run id -> what a person calls the run: agent name and version, whatever the log has.

    A run without an agent name is its id; two runs that would share a label get their id
    appended, so a label never names two runs. The report, the demo and the charts' callers
    all label runs with this one rule.
    """
    frame = runs.select(
        pl.col(id_column).alias("run"),
        pl.coalesce(
            pl.concat_str("agent_name", "agent_version", separator=" "),
            pl.col("agent_name"),
            pl.col(id_column),
        ).alias("label"),
    )
    shared = frame.filter(pl.col("label").is_duplicated())["run"].to_list()
    return {run: f"{label} ({run})" if run in shared else label for run, label in frame.iter_rows()}


# what each interval method of ``compare`` is, in words (the report names the one used)
_CI_TEXT = {
    "tango": "Tango's score 95% interval for paired proportions",
    "newcombe": "Newcombe's hybrid score 95% interval for paired proportions",
    "percentile": "a percentile bootstrap 95% interval of the paired differences",
    "bca": "a BCa bootstrap 95% interval of the paired differences",
    "studentized": "a studentized bootstrap 95% interval of the paired differences",
    "normal": "a normal (Wald) 95% interval of the paired differences",
}


def _pooled(
    store: ParquetStore, candidate: str, parent: str, metric: str, **options: Any
) -> pl.DataFrame:
    """The pair's two policies over every suite both ran (``Store.pooled_compare`` of their
    agents), so a page about one suite shows the benchmark-level answer beside it; empty
    when they share fewer than two suites or an agent has several runs on one suite (no
    unambiguous pooling)."""
    from hylo_analytics.compare.pooled_runs import pooled_compare_runs

    agents = dict(
        store.sql(
            "select run_id, agent_name from stg_runs where run_id in ($c, $p)",
            {"c": candidate, "p": parent},
        ).iter_rows()
    )
    cand, par = agents.get(candidate), agents.get(parent)
    names = [a for a in (cand, par) if a]
    if len(names) < 2 or cand == par or any(c in a for a in names for c in ",="):
        return pl.DataFrame()
    try:
        rows = pooled_compare_runs(
            store, f"agent={cand}", f"agent={par}", metrics=[metric], **options
        )
    except ValueError:  # a suite with several runs of one agent, or one side missing
        return pl.DataFrame()
    if rows.filter(pl.col("level") != "pooled").height < 2:
        return pl.DataFrame()
    return rows


def _headline(
    overall: pl.DataFrame, tasks: pl.DataFrame, rule: Rule, n_resamples: int, seed: int
) -> pl.DataFrame:
    counts = tasks.select(
        pl.len().alias("n_tasks"),
        *(
            (pl.col("verdict") == v).sum().cast(pl.Int64).alias(f"tasks_{v}")
            for v in ("improved", "regressed", "unchanged", "inconclusive")
        ),
    )
    head = overall.select(
        "candidate",
        "parent",
        "metric",
        pl.col(list(_TASK_COLUMNS)[1:]).name.map(_TASK_COLUMNS.__getitem__),
        "verdict_rule",
        "forced",
        "gate_note",
        "errors",
        "errors_note",
        pl.lit(describe_rule(rule)).alias("rule_text"),
        pl.col("ci_method").replace_strict(_CI_TEXT, default=pl.col("ci_method")).alias("ci_text"),
        # a metric whose direction is unknown is tested both ways: its p is two-sided
        pl.when(pl.col("direction") == "unknown")
        .then(pl.lit("two-sided"))
        .otherwise(pl.lit("one-sided"))
        .alias("p_sides"),
    )
    return pl.concat([head, counts], how="horizontal")


@dataclass(frozen=True)
class ComparisonReport:
    """The report's frames, with a summary for the console and a table view for Jupyter.

    ``frames`` is :func:`report_frames`' output; :meth:`to_html` renders the full page and
    :meth:`save` writes it.
    """

    frames: Mapping[str, pl.DataFrame]

    @property
    def headline(self) -> dict[str, Any]:
        """The pooled comparison as a dict (rates, difference and CI, wins, p, verdict)."""
        row: dict[str, Any] = self.frames["headline"].row(0, named=True)
        return row

    @property
    def tasks(self) -> pl.DataFrame:
        """One row per task: paired counts, difference, CI, p, adjusted p, verdict."""
        return self.frames["tasks"]

    @property
    def flips(self) -> pl.DataFrame:
        """One row per key that flipped, per task: the pairs behind the wins and losses."""
        return self.frames["flips"]

    def __repr__(self) -> str:
        h = self.headline
        return (
            f"ComparisonReport(candidate={h['candidate']!r}, parent={h['parent']!r}, "
            f"metric={h['metric']!r}, n_pairs={h['n_pairs']}, "
            f"diff={h['diff'] * 100:+.1f} pts [{h['ci_low'] * 100:+.1f}, "
            f"{h['ci_high'] * 100:+.1f}], p={h['p_value']:.3g}, verdict={h['verdict']!r})"
        )

    def __str__(self) -> str:
        return summary_sentence(self.headline)

    def _repr_html_(self) -> str:
        return report_fragment(dict(self.frames))

    def to_html(self, *, title: str | None = None) -> str:
        """The full self-contained page (charts inlined as SVG)."""
        from hylo_analytics.report.trend import trend_section

        return render_report(dict(self.frames), title=title, sections=trend_section(self.frames))

    def save(self, path: str | Path) -> Path:
        """Write :meth:`to_html` to ``path`` (parent folders are created)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_html())
        return path


def build_report(
    store: ParquetStore,
    candidate: str,
    parent: str,
    *,
    metric: str = "success",
    redact: bool = False,
    trend: Trend | None = None,
    **options: Any,
) -> ComparisonReport:
    """Compare ``candidate`` with ``parent`` in ``store`` and keep the frames for display.

    ``options`` go to :func:`report_frames` (``rule``, ``n_resamples``, ``seed``, ``force``).
    Values under secret-looking keys in any JSON text shown are always replaced by
    ``[redacted]``; ``redact=True`` (for a page to share) also turns absolute paths into
    paths relative to the run's folder or file names and removes the home folder and host
    name (:class:`hylo_analytics._redact.Redactor`). ``trend``: a trend whose section the
    page adds (:func:`hylo_analytics.report.trend.agent_trend` is the candidate's agent's).
    """
    from hylo_analytics.report._stats import stat_frames
    from hylo_analytics.report.trend import trend_frames
    from hylo_analytics.store import as_parquet

    store = as_parquet(store)  # a Store (the facade) holds its ParquetStore
    frames = report_frames(store, candidate, parent, metric=metric, **options)
    frames = {**frames, **stat_frames(store, frames)}
    if trend is not None:
        frames = {**frames, **trend_frames(trend)}
    return ComparisonReport(redact_frames(frames, store, redact=redact))


def redact_frames(
    frames: Mapping[str, pl.DataFrame], store: ParquetStore, *, redact: bool
) -> dict[str, pl.DataFrame]:
    """``frames`` with every string cell passed through the redaction: the
    secrets always, paths and host names with ``redact`` (the run folders of the store's
    sources are the roots paths are made relative to)."""
    fix: Callable[[str], Any] = redact_secrets
    if redact:
        sources = store.sql("SELECT DISTINCT source_path FROM stg_runs")["source_path"]
        fix = Redactor.for_roots(str(Path(s).parent) for s in sources.drop_nulls()).text
    out = {}
    for name, frame in frames.items():
        text = [c for c, t in frame.schema.items() if t == pl.String]
        out[name] = frame.with_columns(pl.col(text).map_elements(fix, return_dtype=pl.String))
    return out


def write_report(
    store: ParquetStore,
    candidate: str,
    parent: str,
    path: str | Path,
    *,
    metric: str = "success",
    redact: bool = False,
    trend: Trend | None = None,
    **options: Any,
) -> Path:
    """Compute the frames, render the page and write it to ``path`` (``redact``, ``trend``:
    as :func:`build_report`)."""
    report = build_report(
        store, candidate, parent, metric=metric, redact=redact, trend=trend, **options
    )
    return report.save(path)
