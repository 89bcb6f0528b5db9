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

import html
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import vl_convert as vlc
from scipy import stats
from statsmodels.stats.multitest import multipletests

from hylo_analytics import charts
from hylo_analytics.store import Store

__all__ = [
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


# -- HTML ----------------------------------------------------------------------------------

_CSS = """
:root { --ink:#1f2328; --muted:#59636e; --line:#d1d9e0; --bg:#f6f8fa;
        --improved:#0072B2; --regressed:#D55E00; --unchanged:#6E6E6E; --inconclusive:#B07800; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial,
       sans-serif; color:var(--ink); background:#fff; }
main { max-width: 1080px; margin: 0 auto; padding: 32px 40px 64px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 40px 0 12px; padding-bottom: 6px; border-bottom: 1px solid var(--line); }
.meta { color: var(--muted); font-size: 13px; margin-bottom: 20px; }
.summary { font-size: 17px; background: var(--bg); border-left: 4px solid var(--improved);
           padding: 14px 18px; border-radius: 4px; margin: 16px 0 20px; }
.summary.regressed { border-left-color: var(--regressed); }
.summary.inconclusive, .summary.unchanged { border-left-color: var(--unchanged); }
.cards { display: grid; grid-template-columns: repeat(4, 1fr); gap: 12px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 12px 14px; }
.card .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .value { font-size: 24px; font-weight: 600; margin-top: 2px; }
.card .sub { color: var(--muted); font-size: 12px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: 13.5px; margin: 8px 0; }
th, td { padding: 6px 8px; border-bottom: 1px solid var(--line); text-align: right;
         font-variant-numeric: tabular-nums; white-space: nowrap; }
th { background: var(--bg); font-weight: 600; white-space: normal; vertical-align: bottom; }
td:last-child, th:last-child { text-align: center; }
th:first-child, td:first-child { text-align: left; }
tbody tr:hover { background: #fafbfc; }
.verdict { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px;
           font-weight: 600; color: #fff; }
.verdict.improved { background: var(--improved); } .verdict.regressed { background: var(--regressed); }
.verdict.unchanged { background: var(--unchanged); } .verdict.inconclusive { background: var(--inconclusive); }
.chart { margin: 12px 0 4px; overflow-x: auto; } .chart svg { max-width: 100%; height: auto; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 20px; align-items: start; }
.note { color: var(--muted); font-size: 13px; }
code { font-size: 13px; background: var(--bg); padding: 1px 4px; border-radius: 3px; }
"""


def _pct(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "\u2013"
    return f"{x * 100:+.1f}" if signed else f"{x * 100:.1f}%"


def _p(x: float | None) -> str:
    return "\u2013" if x is None else (f"{x:.3f}" if x >= 0.001 else f"{x:.1e}")


def _svg(chart: Any) -> str:
    svg: str = vlc.vegalite_to_svg(chart.to_dict())
    return f'<div class="chart">{svg}</div>'


def _badge(verdict: str | None) -> str:
    v = html.escape(verdict or "")
    return f'<span class="verdict {v}">{v}</span>'


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def summary_sentence(headline: dict[str, Any]) -> str:
    """One sentence a reader can quote: rates, difference with CI, p, per-task verdicts."""
    h = headline
    return (
        f"Candidate {h['candidate']} succeeded on {_pct(h['candidate_rate'])} of "
        f"{h['n_pairs']} paired episodes versus {_pct(h['parent_rate'])} for parent "
        f"{h['parent']}: a difference of {_pct(h['diff'], True)} points "
        f"(95% CI {_pct(h['ci_low'], True)} to {_pct(h['ci_high'], True)}; "
        f"McNemar p = {_p(h['p_value'])}), {h['verdict']} overall. Per task: "
        f"{h['tasks_improved']} improved, {h['tasks_regressed']} regressed, "
        f"{h['tasks_unchanged']} unchanged, {h['tasks_inconclusive']} inconclusive "
        f"of {h['n_tasks']}."
    )


def _cards(h: dict[str, Any]) -> str:
    cards = [
        ("candidate", _pct(h["candidate_rate"]), html.escape(h["candidate"])),
        ("parent", _pct(h["parent_rate"]), html.escape(h["parent"])),
        (
            "difference",
            f"{_pct(h['diff'], True)} pts",
            f"95% CI {_pct(h['ci_low'], True)} to {_pct(h['ci_high'], True)}",
        ),
        (
            "paired outcomes",
            f"{h['candidate_wins']} / {h['parent_wins']} / {h['ties']}",
            f"candidate / parent wins / ties · p = {_p(h['p_value'])}",
        ),
    ]
    return (
        '<div class="cards">'
        + "".join(
            f'<div class="card"><div class="label">{k}</div><div class="value">{v}</div>'
            f'<div class="sub">{s}</div></div>'
            for k, v, s in cards
        )
        + "</div>"
    )


def _task_rows(tasks: pl.DataFrame) -> list[list[str]]:
    ordered = tasks.sort(["diff", "task_id"], descending=[True, False])
    return [
        [
            html.escape(r["task_id"]),
            str(r["n_pairs"]),
            _pct(r["candidate_rate"]),
            _pct(r["parent_rate"]),
            _pct(r["diff"], True),
            f"{_pct(r['ci_low'], True)} to {_pct(r['ci_high'], True)}",
            f"{r['candidate_wins']} / {r['parent_wins']} / {r['ties']}",
            _p(r["p_value"]),
            _p(r["p_adjusted"]),
            _badge(r["verdict"]),
        ]
        for r in ordered.iter_rows(named=True)
    ]


def _run_rows(runs: pl.DataFrame) -> list[list[str]]:
    return [
        [
            html.escape(r["run"]) + (f"<br><b>{r['role']}</b>" if r["role"] else ""),
            html.escape(f"{r['agent_name']} {r['agent_version']}"),
            str(r["n_samples"]),
            f"{r['n_scored']} / {r['n_total']}",
            _pct(r["success"]),
            f"{_pct(r['ci_low'])} to {_pct(r['ci_high'])}",
            "\u2013" if r["mean_steps"] is None else f"{r['mean_steps']:.1f}",
            "\u2013" if r["mean_inference_s"] is None else f"{r['mean_inference_s']:.2f}",
            str(r["n_errors"]),
        ]
        for r in runs.iter_rows(named=True)
    ]


def render_report(frames: dict[str, pl.DataFrame], *, title: str | None = None) -> str:
    """One self-contained HTML page from :func:`report_frames`' output."""
    h = frames["headline"].row(0, named=True)
    tasks, runs = frames["tasks"], frames["runs"]
    pair = runs.filter(pl.col("role").is_not_null())
    title = title or f"{h['candidate']} vs {h['parent']}"
    success = charts.success_rate_by_task(
        frames["task_success"],
        run_label="run",
        title="Success rate per task",
    )
    latency_order = pair.select("run").join(frames["latency"], on="run", how="left")
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        f"<h1>{html.escape(title)}</h1>",
        f'<div class="meta">hylo_analytics report · metric <code>{html.escape(h["metric"])}'
        f"</code> · generated {now}</div>",
        f'<div class="summary {html.escape(h["verdict"])}">{html.escape(summary_sentence(h))}</div>',
        _cards(h),
        "<h2>Per task</h2>",
        _table(
            [
                "task",
                "pairs",
                "candidate",
                "parent",
                "diff (pts)",
                "95% CI",
                "wins c / p / ties",
                "McNemar p",
                "Holm p",
                "verdict",
            ],
            _task_rows(tasks),
        ),
        f'<p class="note">Pairs are episodes both runs scored on the same task and seed; '
        f"{h['n_dropped']} shared episodes were dropped because a run abstained. Differences are "
        "candidate \u2212 parent in percentage points with a Bonett-Price 95% interval; p is the exact "
        "two-sided McNemar test, adjusted across tasks with Holm. Verdicts (interim rule): "
        "improved/regressed when the adjusted p &lt; 0.05, unchanged when the CI lies within "
        "±10 points, otherwise inconclusive.</p>",
        _svg(charts.paired_forest(tasks)),
        _svg(charts.win_loss_bars(tasks)),
        _svg(success),
        "<h2>Runs, coverage and cost</h2>",
        _table(
            [
                "run",
                "agent",
                "episodes",
                "scored / total",
                "success",
                "95% CI (Wilson)",
                "mean steps",
                "inference s / ep",
                "errors",
            ],
            _run_rows(runs),
        ),
        '<div class="grid2">',
        _svg(
            charts.cost_vs_success(
                runs.select(
                    pl.col("agent_version").alias("run"),
                    pl.col("mean_inference_s").alias("cost"),
                    "success",
                    "ci_low",
                    "ci_high",
                ).drop_nulls("cost"),
                cost_label="mean inference time per episode (s)",
                title="Cost vs success (all runs)",
            )
        ),
        _svg(
            charts.metric_trend(
                runs.select(
                    "agent_version",
                    pl.col("success").alias("value"),
                    "ci_low",
                    "ci_high",
                    pl.col("n_scored").alias("n"),
                ),
                title="Success across versions (all runs)",
            )
        ),
        "</div>",
        _svg(charts.coverage_breakdown(frames["coverage"])),
        _svg(
            charts.metric_distribution(
                latency_order, value_label="step latency (ms)", title="Step latency"
            )
        ),
    ]
    body = "\n".join(parts)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>"
        f"<body><main>\n{body}\n</main></body></html>\n"
    )


def write_report(
    store: Store, candidate: str, parent: str, path: str | Path, *, metric: str = "success"
) -> Path:
    """Compute the frames, render the page and write it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(report_frames(store, candidate, parent, metric=metric)))
    return path
