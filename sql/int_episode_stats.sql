-- One row per current sample with the reductions of its trace that the built-in scorers read.
-- A sample without a stored trace still has a row (trace_status says why), so every scorer can
-- abstain for it explicitly. success_once / success_at_end follow ManiSkill: any step's
-- info.success / the last step's info.success (inspect-robots uses success_at_end for a reduced
-- end-of-episode judgement instead). latency_p95 interpolates linearly (numpy's default).
-- Grain: one row per (run_id, key, epoch).
with samples as (
    select * from stg_samples
),

steps as (
    select run_id, episode_id, idx, reward, success, latency_ms
    from stg_events
    where type = 'step'
),

others as (
    select run_id, episode_id, idx, type, reason, status
    from stg_events
    where type <> 'step'
),

-- steps are nearly all events: aggregate them without per-aggregate filters
per_episode_steps as (
    select
        run_id,
        episode_id,
        count(*) as n_steps,
        count(reward) as n_rewards,
        sum(reward) as total_reward,
        count(success) as n_success_flags,
        bool_or(success) as success_once,
        -- max_by skips null arguments: encode null so the last step's missing flag stays null
        case max_by(case when success then 1 when not success then 0 else -1 end, idx)
            when 1 then true
            when 0 then false
        end as success_at_end,
        count(latency_ms) as n_latencies,
        percentile_cont(0.95) within group (order by latency_ms) as latency_p95
    from steps
    group by run_id, episode_id
),

per_episode_others as (
    select
        run_id,
        episode_id,
        count(*) as n_other_events,
        count(*) filter (where type = 'intervention') as n_interventions,
        count(*) filter (where type = 'end') as n_end_events,
        nullif(max_by(coalesce(status, ''), idx) filter (where type = 'end'), '') as end_status,
        nullif(max_by(coalesce(reason, ''), idx) filter (where type = 'end'), '') as end_reason
    from others
    group by run_id, episode_id
),

final as (
    select
        s.run_id,
        s.key,
        s.task_id,
        s.seed,
        s.epoch,
        s.episode_id,
        s.status as sample_status,
        s.trace_status,
        coalesce(s.trace_status in ('ok', 'partial'), false) as has_trace,
        coalesce(e.n_steps, 0) + coalesce(o.n_other_events, 0) as n_events,
        coalesce(e.n_steps, 0) as n_steps,
        coalesce(o.n_interventions, 0) as n_interventions,
        coalesce(o.n_end_events, 0) as n_end_events,
        coalesce(e.n_rewards, 0) as n_rewards,
        e.total_reward,
        coalesce(e.n_success_flags, 0) as n_success_flags,
        e.success_once,
        e.success_at_end,
        coalesce(e.n_latencies, 0) as n_latencies,
        e.latency_p95,
        o.end_status,
        o.end_reason,
        coalesce(o.end_status = 'error', s.status = 'error', false) as errored
    from samples as s
    left join per_episode_steps as e
        on e.run_id = s.run_id and e.episode_id = s.episode_id
    left join per_episode_others as o
        on o.run_id = s.run_id and o.episode_id = s.episode_id
)

select * from final
