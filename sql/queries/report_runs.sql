-- The report's run table: every stored run with the mean inference seconds per episode (the
-- sum of its step latencies).
with cost as (
    select run_id, avg(inference_s) as mean_inference_s
    from (
        select run_id, episode_id, sum(latency_ms) / 1000.0 as inference_s
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
    r.benchmark_id,
    r.split,
    r.n_samples,
    r.n_errors,
    c.mean_inference_s
from mart_runs as r
left join cost as c on c.run_id = r.run_id
order by r.agent_version, r.run_id
