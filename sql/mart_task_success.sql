-- Success rate per run and task from the preferred success score (int_score_stats), with its
-- Wilson interval and the agent that ran it (for charts), under the run's errors policy
-- (errors; hylo_analytics._harness): the rate of mart_success_rates, per task. Other
-- abstentions are counted in n_skipped, never as failures.
-- Grain: one row per (run_id, task_id).
with stats as (
    select s.*
    from int_score_stats as s
    join int_success_metric as m using (run_id, metric)  -- the run's success metric
    where s.level = 'task'
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
        s.errors,
        s.n_total,
        s.n_valid,
        s.n_skipped,
        s.n_errors,
        s.value_sum as successes,
        s.mean as success_rate,
        s.wilson_low as ci_low,
        s.wilson_high as ci_high
    from stats as s
    left join runs as r on r.run_id = s.run_id
)

select * from final
