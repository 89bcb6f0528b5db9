-- Success rate per run and task from the preferred success score (int_score_stats), with its
-- Wilson interval and the agent that ran it (for charts). Abstentions are counted in
-- n_skipped, never as failures.
-- Grain: one row per (run_id, task_id).
with stats as (
    -- 'success'; an inspect-robots log names its per-trial outcome success_at_end (the
    -- operator's end-of-episode judgement): that is its success when it has no 'success'
    select s.*
    from int_score_stats as s
    where s.level = 'task' and (s.metric = 'success' or (s.metric = 'success_at_end'
        and s.run_id in (select run_id from stg_runs where source_format like 'inspect-robots/%')))
    qualify s.metric = min(s.metric) over (partition by s.run_id)  -- 'success' sorts first
),

runs as (
    select run_id, agent_name, agent_version from stg_runs
),

final as (
    select
        s.run_id,
        r.agent_name,
        r.agent_version,
        s.task_id,
        s.n_total,
        s.n_valid,
        s.n_skipped,
        s.value_sum as successes,
        s.mean as success_rate,
        s.wilson_low as ci_low,
        s.wilson_high as ci_high
    from stats as s
    left join runs as r on r.run_id = s.run_id
)

select * from final
