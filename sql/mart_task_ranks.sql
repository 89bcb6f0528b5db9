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

-- cells is read once, every count a window over it: each CTE read twice is inlined twice
-- by Spark, and over the unresolved rule (a store an older version wrote) its plan no
-- longer fits the driver's heap
numbered as (
    select
        *,
        round(mean * cast(68719476736 as double)) as unit,
        row_number() over (partition by benchmark_id, split, metric, run_id order by task_id)
            as run_row,
        row_number() over (partition by benchmark_id, split, metric, task_id order by run_id)
            as task_row,
        count(*) over (partition by benchmark_id, split, metric, run_id) as n_valid_tasks,
        count(*) over (partition by benchmark_id, split, metric, task_id) as n_on_task
    from cells
),

counted as (
    select
        *,
        sum(case when run_row = 1 then 1 else 0 end)
            over (partition by benchmark_id, split, metric) as n_runs,
        sum(case when task_row = 1 then 1 else 0 end)
            over (partition by benchmark_id, split, metric) as n_tasks
    from numbered
),

ranked as (
    -- on a complete task (every run of the suite has a valid mean there) the runs at least
    -- as good (peers included: the default RANGE frame) minus half of the ties beside it:
    -- the mid rank, in any engine's window functions
    select
        *,
        n_on_task = n_runs as complete,
        count(*) over (
            partition by benchmark_id, split, metric, task_id order by unit desc
        ) - cast(
            count(*) over (partition by benchmark_id, split, metric, task_id, unit) - 1 as double
        ) / 2
            as block_rank
    from counted
),

final as (
    select
        benchmark_id,
        split,
        metric,
        run_id,
        avg(case when complete then block_rank end) as avg_rank,
        avg(case when complete then mean end) as mean,
        count(case when complete then 1 end) as n_blocks,
        any_value(n_tasks) - any_value(n_valid_tasks) as n_missing,
        any_value(n_runs) as n_runs
    from ranked
    group by benchmark_id, split, metric, run_id
)

select * from final
