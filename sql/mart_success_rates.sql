-- Success rate per run two ways, so errors are never silently counted either way; the figures
-- are int_score_stats' (the same numbers as mart_aggregate_run and aggregate()).
-- success_rate_errors_excluded: the mean over keys with a valid success (abstentions left out).
-- success_rate_errors_as_failures: errored keys (the episode's sample status is 'error', e.g.
-- a vla-eval timeout) count as 0; other abstentions (no trace, a grader that abstained) stay
-- out of both rates and are counted in n_skipped_other.
-- Grain: one row per (run_id).
with stats as (
    select s.*
    from int_score_stats as s
    join int_success_metric as m using (run_id, metric)  -- the run's success metric
    where s.level = 'run'
),

runs as (
    select run_id, agent_name, benchmark_id, split, source_format from stg_runs
),

final as (
    select
        s.run_id,
        r.agent_name,
        r.benchmark_id,
        r.split,
        r.source_format,
        s.n_total,
        s.n_valid,
        s.n_errors,
        s.n_skipped - s.n_errors as n_skipped_other,
        s.value_sum as successes,
        s.mean as success_rate_errors_excluded,
        s.success_rate_errors_as_failures
    from stats as s
    left join runs as r on r.run_id = s.run_id
)

select * from final
