-- paired_baseline's input: one row per sample of $runs with the preferred value of $metric
-- and the match factors. {{preferred}}: the resolved scores of $runs and $metrics, pending
-- rows included (hylo_analytics.resolution.preferred_query); {{cols}}: ', <factor> as f<i>'
-- for each factor (hylo_analytics._sql.factor_sql).
with preferred as ({preferred}),
samples as (select * from stg_samples where list_contains($runs, run_id))
select s.run_id as variant, s.key, s.epoch,
    s.task_id as _task_id, s.seed as _seed, s.episode_id as _episode_id,
    $metric as metric, p.value{cols}
from samples as s
left join preferred as p
    on p.run_id = s.run_id and p.key = s.key and p.epoch is not distinct from s.epoch
    and p.metric = $metric
order by s.run_id, s.key, s.epoch
