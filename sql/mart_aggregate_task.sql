-- Plain statistics of every metric per (run_id, task_id, metric) over the preferred score rows: counts,
-- coverage, skip breakdown, mean, std, stderr and Wilson 95 % for 0/1 metrics, under the
-- run's errors policy (column errors; n_errors counts the errored keys either way).
-- Computed once for both grains in int_score_stats.
-- Grain: one row per (run_id, task_id, metric); null allowed in task_id.
with stats as (
    select * from int_score_stats where level = 'task'
),

final as (
    select
        run_id, task_id, metric,
        n_total, n_valid, n_skipped, n_errors, skip_breakdown, coverage,
        errors, mean, std, stderr,
        is_binary, wilson_low, wilson_high, ci_level
    from stats
)

select * from final
