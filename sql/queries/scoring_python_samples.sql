-- a Python scorer's sample inputs: each sample's extra, status, agent and imported scores
-- (observations). Fields: runs (the runs scored).
select s.run_id, s.episode_id, s.extra, s.status, r.agent_name || '@' || r.agent_version as agent,
    o.observations
from stg_samples as s
left join stg_runs as r on r.run_id = s.run_id
left join (
    select run_id, key, epoch, cast(json_group_object(metric, value) as varchar) as observations
    from stg_scores
    where source_kind = 'imported' and run_id in (select run_id from {runs})
    group by run_id, key, epoch
) as o on o.run_id = s.run_id and o.key = s.key and o.epoch is not distinct from s.epoch
where s.run_id in (select run_id from {runs})
