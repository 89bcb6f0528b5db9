-- One row per current run, with its sample counts by status.
-- Grain: one row per (run_id).
with runs as (
    select * from stg_runs
),

samples as (
    select * from stg_samples
),

counts as (
    select
        run_id,
        count(*) as n_samples_stored,
        count(distinct task_id) as n_tasks,
        cast(sum(case when status = 'error' then 1 else 0 end) as bigint) as n_errors,
        cast(sum(case when trace_status = 'ok' then 1 else 0 end) as bigint) as n_traces
    from samples
    group by run_id
),

final as (
    select
        r.run_id,
        r.agent_name,
        r.agent_version,
        r.benchmark_id,
        r.split,
        r.source_format,
        coalesce(c.n_samples_stored, 0) as n_samples,
        coalesce(c.n_tasks, 0) as n_tasks,
        coalesce(c.n_errors, 0) as n_errors,
        coalesce(c.n_traces, 0) as n_traces,
        r.ingested_at
    from runs as r
    left join counts as c on c.run_id = r.run_id
)

select * from final
