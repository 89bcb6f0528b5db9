-- The latest state of every source file seen: one row per path.
-- Grain: one row per (path).
with source as (
    select * from raw_ingested_files
),

ranked as (
    select
        *,
        row_number() over (partition by path order by batch_seq desc) as rn
    from source
),

final as (
    select * exclude (rn) from ranked where rn = 1
)

select * from final
