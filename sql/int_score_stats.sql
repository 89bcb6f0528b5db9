-- Plain statistics of every metric at two grains at once (grouping sets): per (run_id, metric)
-- with level = 'run' and task_id null, and per (run_id, task_id, metric) with level = 'task',
-- over the key-level scores (int_key_scores: one per key, epochs reduced by their mean), under
-- each run's errors policy (errors: the convention of the harness that wrote it, macro
-- run_errors; hylo_analytics._harness). Under 'failure' an errored key of a 0/1 group is a
-- valid 0 (in n_valid and n_errors, out of the skip breakdown); under 'exclude' it abstains.
-- n_scored counts the keys with a value of their own (errors never filled in).
-- Counts, coverage, the skip breakdown (list of {reason, count}, sorted by reason), mean,
-- std (ddof 1), stderr, and for 0/1 metrics the Wilson interval (macros wilson_low /
-- wilson_high at ci_level()), all on one denominator, n_valid. Abstentions are counted in
-- n_skipped, never averaged as 0: n_total = n_valid + the sum of the breakdown's counts.
-- hylo_analytics.aggregate gives the same numbers (tested) plus medians, IQM, bootstrap
-- intervals and other epoch reducers.
-- Grain: one row per (level, run_id, task_id, metric); null allowed in task_id.
with scores as (
    select
        k.*,
        run_errors(r.errors_policy, r.source_format) as errors,
        k.errored and run_errors(r.errors_policy, r.source_format) = 'failure' as fails
    from int_key_scores as k
    left join stg_runs as r on r.run_id = k.run_id
),

counts as (
    select
        case when grouping(task_id) = 1 then 'run' else 'task' end as level,
        run_id,
        task_id,
        metric,
        any_value(errors) as errors,
        count(*) as n_total,
        count(value) as n_scored,
        count(*) filter (where errored) as n_errors,
        count(*) filter (where fails) as n_fails,
        avg(value) as scored_mean,
        stddev_samp(value) as scored_std,
        coalesce(sum(value), 0) as value_sum,
        -- binary when the metric is declared binary (or not declared) and every valid value
        -- of the group is 0 or 1: a property of the group, never of other runs (aggregate's
        -- rule; a filter on run_id then reaches the scan)
        coalesce(declared_kind(metric), 'binary') = 'binary'
            and bool_and(value in (0, 1) or value is null) as is_binary
    from scores
    group by grouping sets ((run_id, metric), (run_id, task_id, metric))
),

filled as (
    -- the errors policy: a 0/1 group's failing errors join its denominator as zeros
    select
        *,
        n_scored + case when is_binary then n_fails else 0 end as n_valid,
        is_binary and n_fails > 0 as is_filled
    from counts
),

spread as (
    -- std (ddof 1) on the policy's values: a filled 0/1 group's from its counts
    select
        *,
        case
            when not is_filled then scored_std
            when n_valid > 1
                then sqrt(value_sum * (n_valid - value_sum) / (n_valid * (n_valid - 1.0)))
        end as std
    from filled
),

reasons as (
    select
        case when grouping(task_id) = 1 then 'run' else 'task' end as level,
        run_id,
        task_id,
        metric,
        fails,
        coalesce(skip_reason, 'no_valid_epoch') as skip_reason,
        count(*) as n
    from scores
    where not valid
    group by grouping sets (
        (run_id, metric, fails, coalesce(skip_reason, 'no_valid_epoch')),
        (run_id, task_id, metric, fails, coalesce(skip_reason, 'no_valid_epoch'))
    )
),

breakdown as (
    select
        r.level, r.run_id, r.task_id, r.metric,
        list({'reason': r.skip_reason, 'count': r.n} order by r.skip_reason) as skip_breakdown
    from (
        -- a failing error of a filled group is a valid 0, not a skip
        select r.level, r.run_id, r.task_id, r.metric, r.skip_reason, sum(r.n)::bigint as n
        from reasons as r
        inner join filled as f
            on f.level = r.level
            and f.run_id = r.run_id
            and f.task_id is not distinct from r.task_id
            and f.metric = r.metric
        where not (r.fails and f.is_filled)
        group by r.level, r.run_id, r.task_id, r.metric, r.skip_reason
    ) as r
    group by r.level, r.run_id, r.task_id, r.metric
),

final as (
    select
        c.level,
        c.run_id,
        c.task_id,
        c.metric,
        c.errors,
        c.n_total,
        c.n_valid,
        c.n_total - c.n_valid as n_skipped,
        c.n_errors,
        c.n_scored,
        coalesce(b.skip_breakdown, []) as skip_breakdown,
        c.n_valid / c.n_total as coverage,
        case when c.is_filled then c.value_sum / c.n_valid else c.scored_mean end as mean,
        c.std,
        c.std / sqrt(c.n_valid) as stderr,
        case when c.n_scored > 0 or c.is_filled then c.value_sum end as value_sum,
        c.is_binary,
        case when c.is_binary then wilson_low(c.value_sum, c.n_valid, ci_z()) end as wilson_low,
        case when c.is_binary then wilson_high(c.value_sum, c.n_valid, ci_z()) end as wilson_high,
        ci_level() as ci_level
    from spread as c
    left join breakdown as b
        on b.level = c.level
        and b.run_id = c.run_id
        and b.task_id is not distinct from c.task_id
        and b.metric = c.metric
)

select * from final
