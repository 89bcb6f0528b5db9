-- The latency section: step latency quantiles of each run of the pair.
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
