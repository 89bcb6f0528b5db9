-- Each run's average rank over the tasks of its suite (benchmark_id, split) on its success
-- metric (int_success_metric), the table of a critical-difference diagram with the suite's
-- runs as the policies and its tasks as the blocks (Demšar 2006): on each task the runs are
-- ranked by their mean (mart_aggregate_task: the run's errors policy, keys weighed
-- equally), 1 the best, ties sharing their mid rank; avg_rank is a run's mean rank over the
-- complete tasks, those where every run of the suite has a valid mean (n_blocks), and mean
-- its mean over the same tasks; n_missing counts the suite's tasks the run has no valid mean
-- on (their tasks are left out for every run). Means equal to 2^-36 are one value (a mean
-- summed in another order is the tie it is), as in stats.critical_difference.
-- Store.critical_difference(the suite's runs, policy="run_id") gives the same avg_rank,
-- mean, n_blocks and n_missing (tested); Friedman's test, the critical difference and the
-- cliques are Python's.
-- Grain: one row per (benchmark_id, split, metric, run_id); null allowed in split.
with cells as (
    select r.benchmark_id, r.split, a.metric, a.run_id, a.task_id, a.mean
    from mart_aggregate_task as a
    inner join int_success_metric as m on m.run_id = a.run_id and m.metric = a.metric
    inner join stg_runs as r on r.run_id = a.run_id
    where a.n_valid > 0 and a.mean is not null and a.task_id is not null
),

suites as (
    select
        benchmark_id,
        split,
        metric,
        count(distinct run_id) as n_runs,
        count(distinct task_id) as n_tasks
    from cells
    group by benchmark_id, split, metric
),

complete as (
    -- the tasks every run of the suite has a valid mean on
    select c.benchmark_id, c.split, c.metric, c.task_id
    from cells as c
    inner join suites as s
        on s.benchmark_id = c.benchmark_id
        and s.split is not distinct from c.split
        and s.metric = c.metric
    group by c.benchmark_id, c.split, c.metric, c.task_id
    having count(*) = any_value(s.n_runs)
),

units as (
    select c.*, round(c.mean * cast(68719476736 as double)) as unit
    from cells as c
    inner join complete as b
        on b.benchmark_id = c.benchmark_id
        and b.split is not distinct from c.split
        and b.metric = c.metric
        and b.task_id = c.task_id
),

ranked as (
    select
        *,
        -- the runs at least as good (peers included: the default RANGE frame) minus half
        -- of the ties beside it: the mid rank, in any engine's window functions
        count(*) over (
            partition by benchmark_id, split, metric, task_id order by unit desc
        ) - cast(
            count(*) over (partition by benchmark_id, split, metric, task_id, unit) - 1 as double
        ) / 2
            as block_rank
    from units
),

runs as (
    select benchmark_id, split, metric, run_id, count(*) as n_valid_tasks
    from cells
    group by benchmark_id, split, metric, run_id
),

averages as (
    select
        benchmark_id,
        split,
        metric,
        run_id,
        avg(block_rank) as avg_rank,
        avg(mean) as mean,
        count(*) as n_blocks
    from ranked
    group by benchmark_id, split, metric, run_id
),

final as (
    select
        u.benchmark_id,
        u.split,
        u.metric,
        u.run_id,
        a.avg_rank,
        a.mean,
        coalesce(a.n_blocks, 0) as n_blocks,
        s.n_tasks - u.n_valid_tasks as n_missing,
        s.n_runs
    from runs as u
    inner join suites as s
        on s.benchmark_id = u.benchmark_id
        and s.split is not distinct from u.split
        and s.metric = u.metric
    left join averages as a
        on a.benchmark_id = u.benchmark_id
        and a.split is not distinct from u.split
        and a.metric = u.metric
        and a.run_id = u.run_id
)

select * from final
