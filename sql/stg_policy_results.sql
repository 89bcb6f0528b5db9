-- Current rows of policy_results: rows that no later commit superseded for their run.
-- The filter is the macro current_rows (hylo_analytics._sql): a row is superseded when its
-- batch is older than the newest run-wide tombstone of its run.
-- Grain: one row per (run_id, key, policy); null allowed in key.
with source as (
    select * from current_rows('policy_results')
)

select * from source
