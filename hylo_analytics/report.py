"""A one-file HTML report comparing a candidate run with its parent.

The report is two steps so either can be replaced: :func:`report_frames` asks the store for
a handful of small frames (headline, per task, runs, coverage, latency), and
:func:`render_report` turns those frames into one self-contained HTML page (charts inlined as
SVG, CSS inline, no network needed to view it). The frames follow the contracts of
:mod:`hylo_analytics.charts`.

Until the comparison module's verdict specs are wired in, verdicts come from
:func:`interim_verdicts`, a deliberately simple, documented rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from scipy import stats
from statsmodels.stats.multitest import multipletests

from hylo_analytics._report_html import render_report, report_fragment, summary_sentence
from hylo_analytics.store import Store

__all__ = [
    "ComparisonReport",
    "build_report",
    "interim_verdicts",
    "mcnemar_two_sided",
    "paired_diff_ci",
    "render_report",
    "report_frames",
    "summary_sentence",
    "wilson_ci",
    "write_report",
]

Z95 = 1.959963984540054

# One score per (run, key, epoch) for the metric: the most authoritative source wins
# (score > derived > observation > imported, the store's precedence order).
_PREFERRED = """
with scores as (
    select * from stg_scores where metric = $metric
),

ranked as (
    select
        run_id, key, epoch, task_id, value, skip_reason,
        row_number() over (
            partition by run_id, key, epoch
            order by case source_kind
                when 'score' then 1 when 'derived' then 2
                when 'observation' then 3 else 4 end,
                source
        ) as rn
    from scores
),

final as (
    select run_id, key, epoch, task_id, value, skip_reason from ranked where rn = 1
)
"""

_PAIRED_TASKS = (
    _PREFERRED
    + """
, cand as (select * from final where run_id = $candidate),
par as (select * from final where run_id = $parent),

pairs as (
    select c.task_id, c.value as cv, p.value as pv
    from cand as c
    join par as p on p.key = c.key and p.epoch is not distinct from c.epoch
),

per_task as (
    select
        task_id,
        count(*) as n_shared,
        cast(sum(case when cv is not null and pv is not null then 1 else 0 end) as bigint)
            as n_pairs,
        cast(sum(case when cv > pv then 1 else 0 end) as bigint) as candidate_wins,
        cast(sum(case when cv < pv then 1 else 0 end) as bigint) as parent_wins,
        cast(sum(case when cv = pv then 1 else 0 end) as bigint) as ties,
        avg(case when pv is not null then cv end) as candidate_rate,
        avg(case when cv is not null then pv end) as parent_rate,
        cast(sum(case when cv not in (0, 1) or pv not in (0, 1) then 1 else 0 end) as bigint)
            as n_not_binary
    from pairs
    group by task_id
)

select * from per_task order by task_id
"""
)

_RUNS = (
    _PREFERRED
    + """
, per_run as (
    select
        run_id,
        count(*) as n_total,
        count(value) as n_scored,
        sum(value) as successes
    from final
    group by run_id
),

cost as (
    select
        run_id,
        avg(inference_s) as mean_inference_s,
        avg(n_steps) as mean_steps
    from (
        select run_id, episode_id, sum(latency_ms) / 1000.0 as inference_s, count(*) as n_steps
        from stg_events
        where type = 'step'
        group by run_id, episode_id
    ) as episodes
    group by run_id
)

select
    r.run_id as run,
    r.agent_name,
    r.agent_version,
    r.n_samples,
    r.n_errors,
    p.n_total,
    p.n_scored,
    p.successes,
    c.mean_steps,
    c.mean_inference_s
from mart_runs as r
left join per_run as p on p.run_id = r.run_id
left join cost as c on c.run_id = r.run_id
order by r.agent_version, r.run_id
"""
)

_COVERAGE = """
select
    run_id as run,
    metric,
    case when value is not null then 'scored'
         else coalesce(skip_reason, 'no reason given') end as reason,
    count(*) as n
from stg_scores
where run_id in ($candidate, $parent)
group by all
order by run, metric, reason
"""

_LATENCY = """
select
    run_id as run,
    count(latency_ms) as n,
    avg(latency_ms) as mean,
    quantile_cont(latency_ms, 0.05) as q05,
    quantile_cont(latency_ms, 0.25) as q25,
    quantile_cont(latency_ms, 0.5) as q50,
    quantile_cont(latency_ms, 0.75) as q75,
    quantile_cont(latency_ms, 0.95) as q95
from stg_events
where type = 'step' and run_id in ($candidate, $parent)
group by run_id
"""


_TASK_SUCCESS = """
select
    run_id as run, task_id, success_rate, ci_low, ci_high, n_valid, n_skipped
from mart_task_success
where run_id in ($candidate, $parent)
order by case when run_id = $parent then 0 else 1 end, task_id
"""


# -- statistics (small, vectorized, tested against scipy / statsmodels) --------------------


def wilson_ci(successes: pl.Expr, n: pl.Expr, z: float = Z95) -> tuple[pl.Expr, pl.Expr]:
    """Wilson score interval for a proportion, as two polars expressions (null when n = 0)."""
    p = successes / n
    centre = p + z * z / (2 * n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)).sqrt()
    denom = 1 + z * z / n
    valid = n > 0
    low = pl.when(valid).then((centre - half) / denom)
    high = pl.when(valid).then((centre + half) / denom)
    return low, high


def paired_diff_ci(
    candidate_wins: pl.Expr, parent_wins: pl.Expr, n_pairs: pl.Expr, z: float = Z95
) -> tuple[pl.Expr, pl.Expr]:
    """Bonett-Price adjusted Wald interval for a paired difference of two proportions.

    Adding one to each discordant count (two to ``n``) keeps the interval honest when there
    are few or no discordant pairs, where the plain Wald interval collapses to a point.
    """
    n2 = n_pairs + 2
    p12 = (candidate_wins + 1) / n2
    p21 = (parent_wins + 1) / n2
    centre = p12 - p21
    half = z * ((p12 + p21 - centre * centre) / n2).sqrt()
    valid = n_pairs > 0
    low = pl.when(valid).then((centre - half).clip(-1.0, 1.0))
    high = pl.when(valid).then((centre + half).clip(-1.0, 1.0))
    return low, high


def mcnemar_two_sided(candidate_wins: np.ndarray, parent_wins: np.ndarray) -> np.ndarray:
    """Exact two-sided McNemar p per row: twice the smaller binomial tail, capped at 1.

    The same test as ``statsmodels ... mcnemar(exact=True)``; no discordant pairs gives 1.
    """
    b = np.asarray(candidate_wins, dtype=np.int64)
    c = np.asarray(parent_wins, dtype=np.int64)
    n = b + c
    tail = stats.binom.cdf(np.minimum(b, c), n, 0.5)
    p: np.ndarray = np.where(n > 0, np.minimum(1.0, 2.0 * tail), 1.0)
    return p


def interim_verdicts(
    frame: pl.DataFrame, *, alpha: float = 0.05, margin: float = 0.1, p_column: str = "p_adjusted"
) -> pl.Series:
    """Provisional verdict per row until the comparison module's verdict specs are wired in.

    improved / regressed: ``p_column`` < ``alpha``, by the sign of ``diff``; unchanged: the
    95 % CI of the difference lies inside ``±margin``; otherwise inconclusive.
    """
    significant = pl.col(p_column) < alpha
    verdict = (
        pl.when(significant & (pl.col("diff") > 0))
        .then(pl.lit("improved"))
        .when(significant & (pl.col("diff") < 0))
        .then(pl.lit("regressed"))
        .when((pl.col("ci_low") >= -margin) & (pl.col("ci_high") <= margin))
        .then(pl.lit("unchanged"))
        .otherwise(pl.lit("inconclusive"))
    )
    return frame.select(verdict.alias("verdict")).get_column("verdict")


# -- frames --------------------------------------------------------------------------------


def _with_paired_stats(frame: pl.DataFrame) -> pl.DataFrame:
    low, high = paired_diff_ci(pl.col("candidate_wins"), pl.col("parent_wins"), pl.col("n_pairs"))
    p = mcnemar_two_sided(frame["candidate_wins"].to_numpy(), frame["parent_wins"].to_numpy())
    counts = ["n_pairs", "candidate_wins", "parent_wins", "ties"]
    frame = frame.with_columns(pl.col(counts).cast(pl.Int64))  # unsigned would wrap below
    return frame.with_columns(
        pl.when(pl.col("n_pairs") > 0)
        .then((pl.col("candidate_wins") - pl.col("parent_wins")) / pl.col("n_pairs"))
        .alias("diff"),
        low.alias("ci_low"),
        high.alias("ci_high"),
        pl.Series("p_value", p, dtype=pl.Float64),
    )


def report_frames(
    store: Store, candidate: str, parent: str, *, metric: str = "success"
) -> dict[str, pl.DataFrame]:
    """The report's data, computed in the store: small frames keyed by section.

    Keys: ``tasks`` (one row per task, the :func:`charts.paired_forest` contract plus rates),
    ``headline`` (one row: all tasks pooled), ``task_success`` (``mart_task_success`` rows of
    the two runs, Wilson CIs), ``runs`` (every stored run: success with Wilson
    CI, mean steps and inference seconds per episode), ``coverage`` (``run, metric, reason,
    n``), ``latency`` (step latency quantiles per run). ``metric`` must be binary (0/1).
    """
    known = set(store.sql("select run_id from stg_runs")["run_id"].to_list())
    for role, run in (("candidate", candidate), ("parent", parent)):
        if run not in known:
            raise ValueError(f"{role} run {run!r} is not in the store; runs: {sorted(known)}")
    params = {"metric": metric, "candidate": candidate, "parent": parent}
    tasks = store.sql(_PAIRED_TASKS, params)
    if tasks.is_empty():
        raise ValueError(f"runs {candidate!r} and {parent!r} share no scored key for {metric!r}")
    if tasks["n_not_binary"].sum() > 0:
        raise ValueError(f"metric {metric!r} is not binary (values other than 0/1); use success")
    tasks = _with_paired_stats(tasks.drop("n_not_binary"))
    adjusted = multipletests(tasks["p_value"].to_numpy(), method="holm")[1]
    tasks = tasks.with_columns(pl.Series("p_adjusted", adjusted, dtype=pl.Float64))
    tasks = tasks.with_columns(interim_verdicts(tasks))
    headline = _headline(tasks, candidate, parent, metric)
    low, high = wilson_ci(pl.col("successes"), pl.col("n_scored"))
    runs = store.sql(_RUNS, {"metric": metric}).with_columns(
        (pl.col("successes") / pl.col("n_scored")).alias("success"),
        low.alias("ci_low"),
        high.alias("ci_high"),
        pl.when(pl.col("run") == candidate)
        .then(pl.lit("candidate"))
        .when(pl.col("run") == parent)
        .then(pl.lit("parent"))
        .alias("role"),
    )
    return {
        "headline": headline,
        "tasks": tasks,
        "runs": runs,
        "coverage": store.sql(_COVERAGE, {"candidate": candidate, "parent": parent}),
        "latency": store.sql(_LATENCY, {"candidate": candidate, "parent": parent}),
        "task_success": store.sql(_TASK_SUCCESS, {"candidate": candidate, "parent": parent}),
    }


def _headline(tasks: pl.DataFrame, candidate: str, parent: str, metric: str) -> pl.DataFrame:
    n = pl.col("n_pairs")
    pooled = tasks.select(
        pl.lit(candidate).alias("candidate"),
        pl.lit(parent).alias("parent"),
        pl.lit(metric).alias("metric"),
        n.sum().alias("n_pairs"),
        (pl.col("n_shared").sum() - n.sum()).alias("n_dropped"),
        ((pl.col("candidate_rate") * n).sum() / n.sum()).alias("candidate_rate"),
        ((pl.col("parent_rate") * n).sum() / n.sum()).alias("parent_rate"),
        pl.col("candidate_wins").sum(),
        pl.col("parent_wins").sum(),
        pl.col("ties").sum(),
        pl.len().alias("n_tasks"),
        *(
            (pl.col("verdict") == v).sum().alias(f"tasks_{v}")
            for v in ("improved", "regressed", "unchanged", "inconclusive")
        ),
    )
    pooled = _with_paired_stats(pooled)
    return pooled.with_columns(interim_verdicts(pooled, p_column="p_value"))


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
        return render_report(dict(self.frames), title=title)

    def save(self, path: str | Path) -> Path:
        """Write :meth:`to_html` to ``path`` (parent folders are created)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_html())
        return path


def build_report(
    store: Store, candidate: str, parent: str, *, metric: str = "success"
) -> ComparisonReport:
    """Compare ``candidate`` with ``parent`` in ``store`` and keep the frames for display."""
    return ComparisonReport(report_frames(store, candidate, parent, metric=metric))


def write_report(
    store: Store, candidate: str, parent: str, path: str | Path, *, metric: str = "success"
) -> Path:
    """Compute the frames, render the page and write it to ``path``."""
    return build_report(store, candidate, parent, metric=metric).save(path)
