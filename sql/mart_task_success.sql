-- Success rate per run and task from the preferred success score, with a Wilson 95 % interval.
-- Abstentions (null value) are counted in n_skipped, never as failures.
with scores as (
    select * from int_scores_preferred where metric = 'success'
),

runs as (
    select run_id, agent_name, agent_version from stg_runs
),

counts as (
    select
        run_id,
        task_id,
        count(*) as n_total,
        count(value) as n_valid,
        count(*) - count(value) as n_skipped,
        sum(value) as successes
    from scores
    group by run_id, task_id
),

wilson as (
    select
        *,
        case when n_valid > 0 then successes / n_valid end as p_hat,
        1.959963984540054 as z
    from counts
),

final as (
    select
        w.run_id,
        r.agent_name,
        r.agent_version,
        w.task_id,
        w.n_total,
        w.n_valid,
        w.n_skipped,
        w.successes,
        w.p_hat as success_rate,
        case when n_valid > 0 then
            (p_hat + z * z / (2 * n_valid)
             - z * sqrt(p_hat * (1 - p_hat) / n_valid + z * z / (4.0 * n_valid * n_valid)))
            / (1 + z * z / n_valid)
        end as ci_low,
        case when n_valid > 0 then
            (p_hat + z * z / (2 * n_valid)
             + z * sqrt(p_hat * (1 - p_hat) / n_valid + z * z / (4.0 * n_valid * n_valid)))
            / (1 + z * z / n_valid)
        end as ci_high
    from wilson as w
    left join runs as r on r.run_id = w.run_id
)

select * from final
