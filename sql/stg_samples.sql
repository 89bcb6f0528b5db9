-- Current rows of samples: rows that no later commit superseded for their run.
-- The filter is the macro current_rows (hylo_analytics._sql): a row is superseded when its
-- batch is older than the newest run-wide tombstone of its run.
-- Grain: one row per (run_id, key, epoch).
with source as (
    select * from current_rows('samples')
)

select * from source
