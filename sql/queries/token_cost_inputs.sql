-- token_cost's input: one row per sample (and per usage row without a sample) with its
-- token counts and model and provider names. Fields: {{run_filter}} (empty, or a filter on
-- $runs), {{preferred}} (the resolved scores of the usage metrics), {{pivot}} (one column
-- u_<kind> per token kind), {{usage}} (those columns), {{tokens}} and {{strings}} (the counts
-- and names as the inputs' columns).
with samples as (
    select run_id, key, task_id, seed, epoch, episode_id, extra from stg_samples {run_filter}
),
runs as (select run_id, extra from stg_runs {run_filter}),
picked as (
    -- the one score resolution, of the usage metrics only
    select run_id, key, epoch, metric, value
    from ({preferred})
),
usage as (
    select run_id, key, epoch, {pivot} from picked group by run_id, key, epoch
),
joined as (
    select
        coalesce(s.run_id, u.run_id) as run_id,
        coalesce(s.key, u.key) as key,
        s.task_id, s.seed,
        coalesce(s.epoch, u.epoch) as epoch,
        s.episode_id, s.extra, {usage}
    from samples as s
    full outer join usage as u
        on s.run_id = u.run_id
        and s.key is not distinct from u.key
        and s.epoch is not distinct from u.epoch
),
final as (
    select s.run_id, s.key, s.task_id, s.seed, s.epoch, s.episode_id,
        {tokens},
        {strings}
    from joined as s
    left join runs as r on r.run_id = s.run_id
)
select * from final order by run_id, key, epoch
