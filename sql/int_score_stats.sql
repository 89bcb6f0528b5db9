-- Plain statistics of every metric at two grains at once (grouping sets): per (run_id, metric)
-- with level = 'run' and task_id null, and per (run_id, task_id, metric) with level = 'task'.
-- Counts, coverage, the skip breakdown (list of {reason, count}, sorted by reason), mean,
-- std (ddof 1), stderr, and for 0/1 metrics the errors-as-failures rate and the Wilson 95 %
-- interval. Abstentions are counted in n_skipped, never averaged as 0:
-- n_total = n_valid + the sum of the breakdown's counts. The aggregate marts select one
-- grain; hylo_analytics.aggregate gives the same numbers (tested) plus medians, IQM,
-- bootstrap intervals and epoch reducers.
with scores as (
    select * from int_score_validity
),

kinds as (
    -- a metric is binary when every valid value it has anywhere is 0 or 1
    select metric, bool_and(value in (0, 1) or value is null) as is_binary
    from scores
    group by metric
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
        avg(value) as mean,
        stddev_samp(value) as std,
        sum(value) as value_sum
    from scores
    group by grouping sets ((run_id, metric), (run_id, task_id, metric))
),

reasons as (
    select
        case when grouping(task_id) = 1 then 'run' else 'task' end as level,
        run_id,
        task_id,
        metric,
        skip_reason,
        count(*) as n
    from scores
    where not is_valid
    group by grouping sets ((run_id, metric, skip_reason), (run_id, task_id, metric, skip_reason))
),

breakdown as (
    select
        level, run_id, task_id, metric,
        list({'reason': skip_reason, 'count': n} order by skip_reason) as skip_breakdown
    from reasons
    group by level, run_id, task_id, metric
),

wilson as (
    select
        c.*,
        k.is_binary,
        case when c.n_valid > 0 then c.value_sum / c.n_valid end as p_hat,
        1.959963984540054 as z
    from counts as c
    inner join kinds as k on k.metric = c.metric
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
        coalesce(b.skip_breakdown, []) as skip_breakdown,
        c.n_valid / c.n_total as coverage,
        c.mean,
        case when c.is_binary then c.value_sum / c.n_total end
            as success_rate_errors_as_failures,
        c.std,
        c.std / sqrt(c.n_valid) as stderr,
        c.value_sum,
        c.is_binary,
        case when c.is_binary and c.n_valid > 0 then
            (c.p_hat + c.z * c.z / (2 * c.n_valid)
             - c.z * sqrt(c.p_hat * (1 - c.p_hat) / c.n_valid
                          + c.z * c.z / (4.0 * c.n_valid * c.n_valid)))
            / (1 + c.z * c.z / c.n_valid)
        end as wilson_low,
        case when c.is_binary and c.n_valid > 0 then
            (c.p_hat + c.z * c.z / (2 * c.n_valid)
             + c.z * sqrt(c.p_hat * (1 - c.p_hat) / c.n_valid
                          + c.z * c.z / (4.0 * c.n_valid * c.n_valid)))
            / (1 + c.z * c.z / c.n_valid)
        end as wilson_high,
        cast(0.95 as double) as ci_level
    from wilson as c
    left join breakdown as b
        on b.level = c.level
        and b.run_id = c.run_id
        and b.task_id is not distinct from c.task_id
        and b.metric = c.metric
)

select * from final
