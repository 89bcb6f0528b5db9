-- Current rows of the materialized score resolution (table resolved_scores): each commit that
-- adds or supersedes a run's scores or samples writes the run's resolved rows again with a run
-- tombstone, so a row is current when its batch is not older than the newest tombstone of its
-- run. The rows are those of the rule int_scores_resolution for that run at that commit
-- (tests check table == rule after every kind of commit).
-- Grain: one row per (run_id, key, epoch, metric); null allowed in key, epoch.
with source as (
    select * from current_rows('resolved_scores')
)

select * from source
