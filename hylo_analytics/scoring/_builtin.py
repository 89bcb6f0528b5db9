"""Built-in scorers and grade events, as one SQL query over ``int_episode_stats``.

Every built-in abstains, in this order, when the sample has no usable trace (the reason names
the trace status), when the episode errored (``end.status = "error"``, or the sample's status
when the trace has no end event), or when the trace has no ``end`` event (an incomplete trace
would under-count). Past these gates each scorer has its own reasons (``no step events``,
``no step latencies``, ...). The reductions themselves live in ``sql/int_episode_stats.sql``
so they can be checked from the DuckDB shell.
"""

from __future__ import annotations

from dataclasses import dataclass

from hylo_analytics._sql import query_sql
from hylo_analytics.scoring._common import ScorerDeclaration, sql_str

__all__ = [
    "BUILTINS",
    "BUILTIN_VERSION",
    "GRADES",
    "GRADE_VERSION",
    "Builtin",
    "builtin_sql",
    "grades_sql",
]

BUILTIN_VERSION = "builtin/1"
GRADE_VERSION = "grade/1"
GRADES = "grades"  # the pseudo-scorer turning grade events into scores


@dataclass(frozen=True)
class Builtin:
    """A built-in scorer: SQL expressions over one row of ``int_episode_stats``."""

    name: str
    value: str  # the score, evaluated only when no skip reason applies
    reason: str  # a scorer-specific skip reason (SQL, null = none)
    explanation: str
    declaration: ScorerDeclaration

    @property
    def source(self) -> str:
        return f"scorer:{self.name}"


_NO_REASON = "cast(null as varchar)"

BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in (
        Builtin(
            "success",
            "case when end_status = 'success' then 1.0 else 0.0 end",
            _NO_REASON,
            "'end.status=' || end_status || coalesce(' (' || end_reason || ')', '')",
            ScorerDeclaration("result.success", None, "maximize", "objective"),
        ),
        Builtin(
            "success_once",
            "case when success_once then 1.0 else 0.0 end",
            "case when n_steps = 0 then 'no step events' "
            "when n_success_flags = 0 then 'no info.success in any step' end",
            "'any step info.success (ManiSkill)'",
            ScorerDeclaration("result.success_once", None, "maximize", "diagnostic"),
        ),
        Builtin(
            "success_at_end",
            "case when success_at_end then 1.0 else 0.0 end",
            "case when n_steps = 0 then 'no step events' "
            "when success_at_end is null then 'last step has no info.success' end",
            "'last step info.success (ManiSkill)'",
            ScorerDeclaration("result.success_at_end", None, "maximize", "diagnostic"),
        ),
        Builtin(
            "steps",
            "cast(n_steps as double)",
            _NO_REASON,
            "'count of step events'",
            ScorerDeclaration("episode.steps", "steps", "minimize", "diagnostic"),
        ),
        Builtin(
            "safety_interventions",
            "cast(n_interventions as double)",
            _NO_REASON,
            "'count of intervention events'",
            ScorerDeclaration("safety.interventions", "count", "minimize", "constraint"),
        ),
        Builtin(
            "return",
            "total_reward",
            "case when n_rewards = 0 then 'no step rewards' end",
            "'sum of step rewards'",
            ScorerDeclaration("reward.return", None, "maximize", "diagnostic"),
        ),
        Builtin(
            "latency_p95",
            "latency_p95",
            "case when n_latencies = 0 then 'no step latencies' end",
            "'95th percentile of ' || n_latencies || ' step latencies'",
            ScorerDeclaration("time.latency.p95", "ms", "minimize", "diagnostic"),
        ),
    )
}

_GATE = """case
        when not has_trace then 'no trace (trace_status=' || coalesce(trace_status, 'null') || ')'
        when errored then 'episode errored'
        when n_end_events = 0 then 'no end event'
    end"""


def _one(b: Builtin, episodes: str) -> str:
    return f"""
    select run_id, key, task_id, seed, epoch, episode_id, {sql_str(b.name)} as metric,
           cast(case when skip_reason is null then {b.value} end as double) as value,
           skip_reason is null as valid,
           skip_reason,
           case when skip_reason is null then {b.explanation}
                when skip_reason = 'episode errored' then end_reason end as explanation,
           {sql_str(b.source)} as source, 'score' as source_kind,
           {sql_str(BUILTIN_VERSION)} as scorer_version,
           {sql_str(b.declaration.metadata_json())} as metadata,
           false as is_error
    from (select *, coalesce({_GATE}, {b.reason}) as skip_reason from {episodes})"""


def builtin_sql(names: list[str], episodes: str) -> str:
    """One query giving the rows of the built-ins ``names`` for the episodes in ``episodes``."""
    return "\nunion all\n".join(_one(BUILTINS[n], episodes) for n in names)


def grades_sql(some_runs: bool) -> str:
    """Score rows from grade events of the runs in the parameter ``$runs`` (every run unless
    ``some_runs``): a list parameter, so the filter reaches the scan of the events.

    The metric is the grade's ``name``, the source ``grade:<grader>``; a grader that graded the
    same name twice in one episode counts with its last grade. Values are read from the raw
    event so booleans count as 1/0 and a non-numeric value is an explicit skip reason: a grade
    event is the one kind whose line ``events.raw`` keeps (a trace's grade lines at ingest,
    a grader's events when written; every line in an older store), so this query reads no
    trace file (``hylo_analytics.ingest.traces._grade_lines``).
    """
    if some_runs:
        return query_sql(
            "scoring_grades",
            events_where="list_contains($runs, e.run_id)",
            samples_where="list_contains($runs, s.run_id)",
            version=sql_str(GRADE_VERSION),
        )
    return query_sql(
        "scoring_grades", events_where="true", samples_where="true", version=sql_str(GRADE_VERSION)
    )
