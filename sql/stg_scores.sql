-- Current score rows. A commit supersedes a run's scores of one source (a re-score of one
-- scorer) or, with a null source, all of them (a re-ingested run). A row is current when its
-- batch is not older than the newest tombstone of either kind that covers it: the run-wide
-- kind is the macro current_rows (hylo_analytics._sql), the sourced kind is joined here.
-- Grain: one row per (run_id, key, epoch, metric, source); null allowed in key, epoch.
with source as (
    select * from current_rows('scores')
),

dead_source as (
    select run_id, source, max(batch_seq) as dead_before
    from raw_tombstones
    where table_name = 'scores' and source is not null
    group by run_id, source
),

final as (
    select s.*
    from source as s
    left join dead_source as d on d.run_id = s.run_id and d.source = s.source
    where d.dead_before is null or s.batch_seq >= d.dead_before
)

select * from final
