-- Current rows of runs: rows that no later commit superseded for their run.
-- A row is superseded when a tombstone for its run was committed after it, i.e. when its
-- batch is older than the run's newest tombstone (a join on one number per run, not a
-- correlated search through every tombstone).
-- Grain: one row per (run_id).
with source as (
    select * from raw_runs
),

dead as (
    select run_id, max(batch_seq) as dead_before
    from raw_tombstones
    where table_name = 'runs'
    group by run_id
),

final as (
    select s.*
    from source as s
    left join dead as d on d.run_id = s.run_id
    where d.dead_before is null or s.batch_seq >= d.dead_before
)

select * from final
