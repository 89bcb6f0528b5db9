-- Current rows of runs: rows that no later commit superseded for their run.
-- The filter is the macro current_rows (hylo_analytics._sql): a row is superseded when its
-- batch is older than the newest run-wide tombstone of its run.
-- Grain: one row per (run_id).
with source as (
    select * from current_rows('runs')
)

select * from source
