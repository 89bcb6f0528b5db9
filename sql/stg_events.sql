-- Current rows of events: rows that no later commit superseded for their run.
-- A row is superseded when a tombstone for its run was committed after it, i.e. when its
-- batch is older than the run's newest tombstone (the macro current_rows, hylo_analytics._sql).
-- A tombstone with source 'grade:<grader>' (a re-run grader, hylo_analytics.scoring.graders)
-- supersedes only that grader's grade events.
-- Grain: one row per (run_id, episode_id, idx).
with source as (
    select * from current_rows('events')
),

dead_grader as (
    select run_id, substr(source, 7) as grader, max(batch_seq) as dead_before
    from raw_tombstones
    where table_name = 'events' and source like 'grade:%'
    group by run_id, source
),

final as (
    select s.*
    from source as s
    left join dead_grader as g on g.run_id = s.run_id and g.grader = s.grader
    where g.dead_before is null or s.batch_seq >= g.dead_before or s.type <> 'grade'
)

select * from final
