-- One score per (run_id, key, metric): the epochs of a key reduced by their mean. The key
-- ("<task_id>#<seed>") is the unit of analysis everywhere (aggregates, paired comparisons):
-- epochs of one key are not independent samples of the benchmark, so each key weighs the
-- same. Abstained epochs are left out of the mean; a key with no valid epoch abstains with the
-- smallest of its epochs' skip reasons, and is errored when any of its epochs errored.
-- hylo_analytics' reducers ('mean', the default) give the same rows (tested).
-- Grain: one row per (run_id, key, metric); null allowed in key.
with scores as (
    select * from int_scores_preferred
),

final as (
    select
        run_id,
        key,
        any_value(task_id) as task_id,
        any_value(seed) as seed,
        metric,
        count(*) as n_epochs,
        count(value) as n_valid_epochs,
        avg(value) as value,
        count(value) > 0 as valid,
        case when count(value) = 0 then min(skip_reason) end as skip_reason,
        count(value) = 0 and bool_or(errored) as errored
    from scores
    group by run_id, key, metric
)

select * from final
