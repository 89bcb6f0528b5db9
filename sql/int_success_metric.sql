-- The metric that is each run's success, for the success marts: 'success'; a run without it
-- reads the metric its harness names its success by (the macro success_fallback, generated
-- from hylo_analytics._harness.SUCCESS_FALLBACK: an inspect-robots log's per-trial outcome
-- success_at_end, the operator's end-of-episode judgement).
-- Grain: one row per (run_id).
with stats as (
    select run_id, metric from int_score_stats where level = 'run'
),

fallback as (
    select run_id, success_fallback(source_format) as metric from stg_runs
),

final as (
    select
        s.run_id,
        case when bool_or(s.metric = 'success') then 'success' else min(s.metric) end as metric
    from stats as s
    left join fallback as f on f.run_id = s.run_id
    where s.metric = 'success' or s.metric = f.metric
    group by s.run_id
)

select * from final
