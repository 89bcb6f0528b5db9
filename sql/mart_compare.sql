-- Wins, losses and ties of each declared (candidate, parent) pair (int_comparisons: the
-- EvalLog's parent_run_id and Store.declare_parent; never every pair of runs), per metric,
-- over the paired key-level scores (int_paired): overall (level 'overall', task_id null) and
-- per task (level 'task_id'). Abstentions are counted in n_dropped, never as losses. The
-- exact McNemar p-value, adjusted p-values, CIs and verdicts are computed by Store.compare,
-- which returns the same counts (tests check that they agree).
-- Grain: one row per (candidate, parent, metric, level, task_id); null allowed in task_id.
with paired as (
    select * from int_paired
),

overall as (
    select
        candidate,
        parent,
        metric,
        'overall' as level,
        cast(null as varchar) as task_id,
        count(*) as n_rows,
        sum(case when outcome <> 'dropped' then 1 else 0 end) as n_pairs,
        sum(case when outcome = 'candidate' then 1 else 0 end) as candidate_wins,
        sum(case when outcome = 'parent' then 1 else 0 end) as parent_wins,
        sum(case when outcome = 'tie' then 1 else 0 end) as ties,
        sum(case when outcome = 'dropped' then 1 else 0 end) as n_dropped,
        avg(case when outcome <> 'dropped' then diff end) as mean_diff
    from paired
    group by candidate, parent, metric
),

per_task as (
    select
        candidate,
        parent,
        metric,
        'task_id' as level,
        task_id,
        count(*) as n_rows,
        sum(case when outcome <> 'dropped' then 1 else 0 end) as n_pairs,
        sum(case when outcome = 'candidate' then 1 else 0 end) as candidate_wins,
        sum(case when outcome = 'parent' then 1 else 0 end) as parent_wins,
        sum(case when outcome = 'tie' then 1 else 0 end) as ties,
        sum(case when outcome = 'dropped' then 1 else 0 end) as n_dropped,
        avg(case when outcome <> 'dropped' then diff end) as mean_diff
    from paired
    group by candidate, parent, metric, task_id
),

unioned as (
    select * from overall
    union all
    select * from per_task
),

final as (
    select
        candidate,
        parent,
        metric,
        level,
        task_id,
        cast(n_pairs as bigint) as n_pairs,
        cast(candidate_wins as bigint) as candidate_wins,
        cast(parent_wins as bigint) as parent_wins,
        cast(ties as bigint) as ties,
        cast(n_dropped as bigint) as n_dropped,
        mean_diff
    from unioned
)

select * from final
