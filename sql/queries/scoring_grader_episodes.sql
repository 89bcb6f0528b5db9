-- a grader's inputs: each sample of the runs ($runs) with its episode's event lines as
-- written, in order, and its last event index (scoring/graders.py). Fields: events (the
-- events of the runs with their raw lines).
select s.run_id, s.key, s.task_id, s.seed, s.epoch, s.episode_id, s.status, s.trace_status,
       s.extra, e.raws, coalesce(e.last_idx, 0) as last_idx
from stg_samples as s
left join (
    select run_id, episode_id, list(raw order by idx) as raws, max(idx) as last_idx
    from ({events}) group by run_id, episode_id
) as e on e.run_id = s.run_id and e.episode_id = s.episode_id
where list_contains($runs, s.run_id)
order by s.run_id, s.key, s.epoch, s.episode_id
