-- Current rows of the materialized score resolution (table resolved_scores): each commit that
-- adds or supersedes a run's scores or samples writes the run's resolved rows again with a run
-- tombstone, so a row is current when its batch is not older than the newest tombstone of its
-- run. The rows are those of the rule int_scores_resolution for that run at that commit
-- (tests check table == rule after every kind of commit).
-- Grain: one row per (run_id, key, epoch, metric); null allowed in key, epoch.
with source as (
    select * from raw_resolved_scores
),

dead_run as (
    select run_id, max(batch_seq) as dead_before
    from raw_tombstones
    where table_name = 'resolved_scores'
    group by run_id
),

final as (
    select s.*
    from source as s
    left join dead_run as r on r.run_id = s.run_id
    where r.dead_before is null or s.batch_seq >= r.dead_before
)

select * from final
