-- One score per (run_id, key, metric): the epochs of a key reduced by their mean. The key
-- ("<task_id>#<seed>") is the unit of analysis everywhere (aggregates, paired comparisons):
-- epochs of one key are not independent samples of the benchmark, so each key weighs the
-- same. Abstained epochs are left out of the mean; a key with no valid epoch abstains with the
-- smallest of its epochs' skip reasons, and is errored when any of its epochs errored.
-- hylo_analytics' reducers ('mean', the default) give the same rows (tested). A key of one
-- epoch (n_key_epochs = 1, the common case) is its own mean and passes through ungrouped; only
-- keys of several epochs are grouped (the same expressions, so the rows are the same).
-- Grain: one row per (run_id, key, metric); null allowed in key.
with single as (
    -- each branch reads int_scores_preferred on its own: a CTE read twice is materialized
    -- by DuckDB, and a run filter of the query would no longer reach the scan
    select
        run_id,
        key,
        task_id,
        seed,
        metric,
        cast(1 as bigint) as n_epochs,
        cast(value is not null as bigint) as n_valid_epochs,
        value,
        value is not null as valid,
        case when value is null then skip_reason end as skip_reason,
        value is null and errored as errored
    from int_scores_preferred
    where n_key_epochs = 1
),

several as (
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
    from int_scores_preferred
    where n_key_epochs > 1
    group by run_id, key, metric
),

final as (
    select * from single
    union all
    select * from several
)

select * from final
