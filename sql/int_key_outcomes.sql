-- Each key's outcome in each run, for the flip matrix (Store.flip_matrix, mart_flip_matrix):
-- the key-level score of int_key_scores (epochs reduced by their mean) named by what it
-- says: 'success' (1), 'failure' (0), 'partial' (a mean of several epochs between 0 and 1),
-- 'error' (no valid epoch, and an epoch errored: a harness error, never shown as a failure)
-- or 'abstained' (no valid epoch for another reason: no trace, a grader that abstained).
-- Only metrics whose every valid key value of the run lies in [0, 1] (success, a solve
-- share): a count such as steps has no success or failure, and its rows are left out.
-- The value under the run's errors policy (errors, macro run_errors: the convention of the
-- harness that wrote it; hylo_analytics._harness) is value; both policies' values are
-- given beside it, so errors are never silently counted either way: under 'failure' an
-- errored key of a 0/1 metric (declared binary, or declared nothing and every valid value of
-- the run 0 or 1: int_paired's rule) is a valid 0, its outcome still 'error'.
-- Grain: one row per (run_id, key, metric); null allowed in key.
with kinds as (
    -- properties of each run's metric, grouped (2,000 runs: 2,000 rows) and joined back: a
    -- window over the keys would hold every key's row at once (1M keys: 250 MB more)
    select
        run_id,
        metric,
        bool_and(value in (0, 1) or value is null) as zero_one,
        bool_and((value >= 0 and value <= 1) or value is null) as in_unit_range
    from int_key_scores
    group by run_id, metric
),

scored as (
    select
        k.run_id,
        r.benchmark_id,
        r.split,
        k.key,
        k.task_id,
        k.metric,
        run_errors(r.errors_policy, r.source_format) as errors,
        k.value,
        k.errored,
        k.skip_reason,
        d.zero_one
    from int_key_scores as k
    inner join stg_runs as r on r.run_id = k.run_id
    inner join kinds as d on d.run_id = k.run_id and d.metric = k.metric
    where d.in_unit_range
),

filled as (
    select
        *,
        case
            when value is null and errored and coalesce(declared_kind(metric) = 'binary', zero_one)
                then 0.0
            else value
        end as value_errors_as_failures
    from scored
),

final as (
    select
        run_id,
        benchmark_id,
        split,
        key,
        task_id,
        metric,
        errors,
        case
            when value is null then case when errored then 'error' else 'abstained' end
            when value = 1 then 'success'
            when value = 0 then 'failure'
            else 'partial'
        end as outcome,
        case when errors = 'failure' then value_errors_as_failures else value end as value,
        value as value_errors_excluded,
        value_errors_as_failures,
        skip_reason
    from filled
)

select * from final
