-- Current rows of events: rows that no later commit superseded for their run.
with source as (
    select * from raw_events
),

dead as (
    select run_id, batch_seq from raw_tombstones where table_name = 'events'
),

final as (
    select s.*
    from source as s
    where not exists (
        select 1 from dead as d
        where d.run_id = s.run_id and d.batch_seq > s.batch_seq
    )
)

select * from final
