-- Plain statistics of every metric at two grains at once (grouping sets): per (run_id, metric)
-- with level = 'run' and task_id null, and per (run_id, task_id, metric) with level = 'task',
-- over the key-level scores (int_key_scores: one per key, epochs reduced by their mean).
-- Counts, coverage, the skip breakdown (list of {reason, count}, sorted by reason), mean,
-- std (ddof 1), stderr, and for 0/1 metrics the errors-as-failures rate (errored keys count
-- as 0: successes / (n_valid + n_errors)) and the Wilson interval (macros wilson_low /
-- wilson_high at ci_level()). Abstentions are counted in n_skipped, never averaged as 0:
-- n_total = n_valid + the sum of the breakdown's counts. hylo_analytics.aggregate gives the
-- same numbers (tested) plus medians, IQM, bootstrap intervals and other epoch reducers.
-- Grain: one row per (level, run_id, task_id, metric); null allowed in task_id.
with scores as (
    select * from int_key_scores
),

counts as (
    select
        case when grouping(task_id) = 1 then 'run' else 'task' end as level,
        run_id,
        task_id,
        metric,
        count(*) as n_total,
        count(value) as n_valid,
        count(*) - count(value) as n_skipped,
        count(*) filter (where errored) as n_errors,
        avg(value) as mean,
        stddev_samp(value) as std,
        sum(value) as value_sum,
        -- binary when the metric is declared binary (or not declared) and every valid value
        -- of the group is 0 or 1: a property of the group, never of other runs (aggregate's
        -- rule; a filter on run_id then reaches the scan)
        coalesce(declared_kind(metric), 'binary') = 'binary'
            and bool_and(value in (0, 1) or value is null) as is_binary
    from scores
    group by grouping sets ((run_id, metric), (run_id, task_id, metric))
),

reasons as (
    select
        case when grouping(task_id) = 1 then 'run' else 'task' end as level,
        run_id,
        task_id,
        metric,
        coalesce(skip_reason, 'no_valid_epoch') as skip_reason,
        count(*) as n
    from scores
    where not valid
    group by grouping sets (
        (run_id, metric, coalesce(skip_reason, 'no_valid_epoch')),
        (run_id, task_id, metric, coalesce(skip_reason, 'no_valid_epoch'))
    )
),

breakdown as (
    select
        level, run_id, task_id, metric,
        list({'reason': skip_reason, 'count': n} order by skip_reason) as skip_breakdown
    from reasons
    group by level, run_id, task_id, metric
),

final as (
    select
        c.level,
        c.run_id,
        c.task_id,
        c.metric,
        c.n_total,
        c.n_valid,
        c.n_skipped,
        c.n_errors,
        coalesce(b.skip_breakdown, []) as skip_breakdown,
        c.n_valid / c.n_total as coverage,
        c.mean,
        case when c.is_binary and c.n_valid + c.n_errors > 0
            then coalesce(c.value_sum, 0) / (c.n_valid + c.n_errors) end
            as success_rate_errors_as_failures,
        c.std,
        c.std / sqrt(c.n_valid) as stderr,
        c.value_sum,
        c.is_binary,
        case when c.is_binary then wilson_low(c.value_sum, c.n_valid, ci_z()) end as wilson_low,
        case when c.is_binary then wilson_high(c.value_sum, c.n_valid, ci_z()) end as wilson_high,
        ci_level() as ci_level
    from counts as c
    left join breakdown as b
        on b.level = c.level
        and b.run_id = c.run_id
        and b.task_id is not distinct from c.task_id
        and b.metric = c.metric
)

select * from final
