-- pass@k and pass^k of every 0/1 metric per run and k, over the run's keys: Chen et al.'s
-- unbiased estimators, pass@k = 1 - C(n - c, k) / C(n, k) (some of k samples solve it) and
-- pass^k = C(c, k) / C(n, k) (all k do), for a key of n valid epochs of which c solved it,
-- averaged over the keys with at least k epochs (n_items; n_items_short: the keys left out
-- at that k, counted, never silently). k runs from 1 to the run's largest n. Each ratio is
-- a running product over i < k of (c - i) / (n - i), summed in logs where every factor is
-- positive and 0 where one is not (c < k). The epochs are int_scores_preferred's (the one
-- resolution) under the run's errors policy (errors, macro run_errors): under 'failure' an
-- errored epoch is a valid 0. A metric is 0/1 for a run when each of its valid epoch
-- values is 0 or 1; others (steps, a partial share) are left out. Store.pass_at_k gives
-- the same points (tested); its intervals, and other groupings than a run, are Python's.
-- Grain: one row per (run_id, metric, k).
with epochs as (
    select
        p.run_id,
        p.key,
        p.metric,
        p.epoch,
        case
            when p.value is null and p.errored
                and run_errors(r.errors_policy, r.source_format) = 'failure' then 0.0
            else p.value
        end as value,
        run_errors(r.errors_policy, r.source_format) as errors
    from int_scores_preferred as p
    inner join stg_runs as r on r.run_id = p.run_id
),

items as (
    select
        run_id,
        key,
        metric,
        any_value(errors) as errors,
        count(value) as n,
        count(case when value = 1 then 1 end) as c,
        bool_and(value in (0, 1) or value is null) as zero_one
    from epochs
    group by run_id, key, metric
),

zero_one_metrics as (
    -- the run's metric is 0/1 when every key's epochs are, and some key has a sample
    select run_id, metric, max(n) as max_n
    from items
    group by run_id, metric
    having bool_and(zero_one) and max(n) > 0
),

ranked as (
    -- each valid epoch of a 0/1 metric numbered i = 0 .. n - 1 within its key: one row per
    -- factor of the running products (a numbers table in any engine's SQL)
    select
        e.run_id,
        e.key,
        e.metric,
        row_number() over (
            partition by e.run_id, e.key, e.metric order by e.epoch
        ) - 1 as i
    from epochs as e
    inner join zero_one_metrics as b on b.run_id = e.run_id and b.metric = e.metric
    where e.value is not null
),

factors as (
    -- the i-th factors of both running products, summed in logs up to k = i + 1
    select
        i.run_id,
        i.key,
        i.metric,
        i.errors,
        i.n,
        f.i + 1 as k,
        sum(case when i.c > f.i then ln((i.c - f.i) / (i.n - f.i)) end) over w as log_hat,
        sum(case when i.n - i.c > f.i then ln((i.n - i.c - f.i) / (i.n - f.i)) end)
            over w as log_miss,
        bool_and(i.c > f.i) over w as all_hat,
        bool_and(i.n - i.c > f.i) over w as all_miss
    from items as i
    inner join ranked as f on f.run_id = i.run_id and f.key is not distinct from i.key and f.metric = i.metric
    window w as (partition by i.run_id, i.key, i.metric order by f.i)
),

points as (
    select
        run_id,
        metric,
        k,
        any_value(errors) as errors,
        count(*) as n_items,
        cast(sum(n) as bigint) as n_samples,
        avg(1 - case when all_miss then exp(log_miss) else 0 end) as pass_at_k,
        avg(case when all_hat then exp(log_hat) else 0 end) as pass_hat_k
    from factors
    group by run_id, metric, k
),

totals as (
    select i.run_id, i.metric, count(*) as n_keys
    from items as i
    inner join zero_one_metrics as b on b.run_id = i.run_id and b.metric = i.metric
    group by i.run_id, i.metric
),

final as (
    select
        p.run_id,
        p.metric,
        p.k,
        p.pass_at_k,
        p.pass_hat_k,
        p.n_items,
        t.n_keys - p.n_items as n_items_short,
        p.n_samples,
        p.errors
    from points as p
    inner join totals as t on t.run_id = p.run_id and t.metric = p.metric
)

select * from final
