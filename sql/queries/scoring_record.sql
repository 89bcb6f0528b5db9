-- the per-sample record every declarative and Python scorer reads: the sample, its imported
-- scores, its trace's built-in reductions, its output and case, as one JSON object. Pieces
-- are spliced as JSON text so that present-but-null values stay distinct from missing ones
-- (json_merge_patch would drop nulls). Fields: runs (the runs scored), episodes
-- (int_episode_stats of those runs).
with s as (
    select * from stg_samples where run_id in (select run_id from {runs})
),
imported as (
    select run_id, key, epoch, json_group_object(metric, value) as scores
    from stg_scores
    where source_kind = 'imported' and run_id in (select run_id from {runs})
    group by run_id, key, epoch
),
cols as (
    select s.run_id, s.key, s.task_id, s.seed, s.epoch, s.episode_id, s.extra,
        cast(json_object(
            'run_id', s.run_id, 'key', s.key, 'task_id', s.task_id, 'seed', s.seed,
            'epoch', s.epoch, 'episode_id', s.episode_id, 'status', s.status,
            'trace_status', s.trace_status, 'scores', coalesce(i.scores, json('{{}}'))
        ) as varchar) as sample_cols,
        case when e.has_trace then cast(json_object(
            'steps', e.n_steps, 'interventions', e.n_interventions, 'return', e.total_reward,
            'success_once', e.success_once, 'success_at_end', e.success_at_end,
            'latency_p95', e.latency_p95, 'end_status', e.end_status,
            'end_reason', e.end_reason, 'errored', e.errored, 'n_events', e.n_events
        ) as varchar) end as trace
    from s
    left join imported as i on i.run_id = s.run_id and i.key = s.key and i.epoch = s.epoch
    left join {episodes} as e on e.run_id = s.run_id and e.episode_id = s.episode_id
)
select run_id, key, task_id, seed, epoch, episode_id, extra,
    json('{{"sample":' || case
        when json_type(extra) = 'OBJECT' and extra <> '{{}}'
        then left(sample_cols, length(sample_cols) - 1) || ',' || substr(ltrim(extra), 2)
        else sample_cols end
    || coalesce(',"trace":' || trace, '')
    || coalesce(',"output":' || cast(json_extract(extra, '$.output') as varchar), '')
    || coalesce(',"case":' || cast(json_extract(extra, '$.case') as varchar), '')
    || '}}') as record
from cols
