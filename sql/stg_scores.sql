-- Current score rows. A commit supersedes a run's scores of one source (a re-score of one
-- scorer) or, with a null source, all of them (a re-ingested run).
with source as (
    select * from raw_scores
),

dead as (
    select run_id, source, batch_seq from raw_tombstones where table_name = 'scores'
),

final as (
    select s.*
    from source as s
    where not exists (
        select 1 from dead as d
        where d.run_id = s.run_id
          and (d.source is null or d.source = s.source)
          and d.batch_seq > s.batch_seq
    )
)

select * from final
