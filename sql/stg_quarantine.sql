-- Every rejected input item, with the file, line and field it was found at.
-- Grain: one row per (batch_seq, path, line, field, error); null allowed in line, field.
with source as (
    select * from raw_quarantine
),

final as (
    select path, line, field, error, sha256, ingested_at, batch_seq
    from source
)

select * from final
