-- Success rate per run under its errors policy (errors: the convention of the harness that
-- wrote it; hylo_analytics._harness), with its Wilson interval on its own denominator: the
-- harness's own number (vla-eval counts an errored episode as a failure; Inspect and hylo
-- leave it out). The two policies' rates are also given, each with its own interval, so errors
-- are never silently counted either way; the figures are int_score_stats' (the same numbers as
-- mart_aggregate_run and aggregate()).
-- success_rate_errors_excluded: successes / n_scored (keys with a valid success).
-- success_rate_errors_as_failures: successes / (n_scored + n_errors): errored keys (the
-- episode's sample status is 'error', e.g. a vla-eval timeout) count as 0. Other abstentions
-- (no trace, a grader that abstained) stay out of every rate and are counted in
-- n_skipped_other.
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
        s.errors,
        s.n_total,
        s.n_valid,
        s.n_errors,
        s.n_total - s.n_scored - s.n_errors as n_skipped_other,
        s.value_sum as successes,
        s.mean as success_rate,
        s.wilson_low as ci_low,
        s.wilson_high as ci_high,
        case when s.n_scored > 0 then s.value_sum / s.n_scored end
            as success_rate_errors_excluded,
        wilson_low(s.value_sum, s.n_scored, ci_z()) as errors_excluded_ci_low,
        wilson_high(s.value_sum, s.n_scored, ci_z()) as errors_excluded_ci_high,
        case when s.is_binary and s.n_scored + s.n_errors > 0
            then coalesce(s.value_sum, 0) / (s.n_scored + s.n_errors) end
            as success_rate_errors_as_failures,
        case when s.is_binary
            then wilson_low(coalesce(s.value_sum, 0), s.n_scored + s.n_errors, ci_z()) end
            as errors_as_failures_ci_low,
        case when s.is_binary
            then wilson_high(coalesce(s.value_sum, 0), s.n_scored + s.n_errors, ci_z()) end
            as errors_as_failures_ci_high,
        s.ci_level
    from stats as s
    left join runs as r on r.run_id = s.run_id
)

select * from final
