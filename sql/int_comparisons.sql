-- The (candidate, parent) pairs the pairing views hold, and nothing else: a run's parent
-- named in its EvalLog (top-level parent_run_id, runs.parent_run_id; for a v0.2 log
-- eval.parent_run_id), and the pairs a user declared (Store.declare_parent, stg_comparisons).
-- Never every pair of runs: 1,000 runs of one benchmark would be ~1e6 pairs and, with
-- int_paired's keys, ~2e9 rows. A run is never its own parent. declared_by is 'log' when the
-- candidate's log names the parent (whether or not it was also declared), else 'store'.
-- Store.compare pairs any two runs and needs no row here.
-- Grain: one row per (candidate, parent).
with from_logs as (
    select run_id as candidate, parent_run_id as parent, 'log' as declared_by
    from stg_runs
    where parent_run_id is not null
),

declared as (
    select run_id as candidate, parent_run_id as parent, 'store' as declared_by
    from stg_comparisons
),

unioned as (
    select * from from_logs
    union all
    select * from declared
),

final as (
    select candidate, parent, min(declared_by) as declared_by
    from unioned
    where candidate <> parent
    group by candidate, parent
)

select * from final
