-- Comparisons a user declared (Store.declare_parent): run_id is compared with parent_run_id.
-- A pair declared again keeps its first declaration. Declarations are by run id and are not
-- superseded when a run is re-ingested. Pairs named by the EvalLogs themselves
-- (runs.parent_run_id) are joined in by int_comparisons.
-- Grain: one row per (run_id, parent_run_id).
with source as (
    select * from raw_comparisons
),

final as (
    select
        run_id,
        parent_run_id,
        min(declared_at) as declared_at,
        min(batch_seq) as batch_seq
    from source
    group by run_id, parent_run_id
)

select * from final
