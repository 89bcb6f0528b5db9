-- The one score per (run_id, key, epoch, metric): the value of metric M for that episode. Every
-- reader goes through this view (aggregate, compare, policies, derivers, export, the report,
-- charts and every mart_*), so one question gets one answer. It reads the resolution the store
-- materialized at publish (stg_resolved_scores: the rule of int_scores_resolution, evaluated
-- once per commit for the runs it touched), so a filter on run_id reaches the Parquet scan and
-- a question about k runs reads those runs' row groups. A store not yet resolved (written by an
-- older version and not written since) reads the rule itself instead: the store says which.
-- Columns and meaning are the rule's (int_scores_resolution).
-- Grain: one row per (run_id, key, epoch, metric); null allowed in key, epoch.
with resolved as (
    select * from stg_resolved_scores
),

final as (
    select
        run_id,
        key,
        task_id,
        seed,
        epoch,
        episode_id,
        metric,
        value,
        valid,
        skip_reason,
        errored,
        explanation,
        source,
        source_kind,
        scorer_version,
        metadata,
        n_sources,
        n_abstained,
        ambiguous,
        n_key_epochs
    from resolved
)

select * from final
