-- Wins, losses and ties of each declared (candidate, parent) pair (int_comparisons: the
-- EvalLog's parent_run_id and Store.declare_parent; never every pair of runs), per metric,
-- over the paired key-level scores (int_paired): overall (level 'overall', task_id null) and
-- per task (level 'task_id'). Abstentions are counted in n_dropped, never as losses. The
-- exact McNemar p-value, adjusted p-values, CIs and verdicts are computed by Store.compare,
-- which returns the same counts (tests check that they agree). errors: the errors policy the
-- pairs were read under (each run's harness convention; 'mixed' when the two differ).
-- Both levels come from one pass over the pairs (grouping sets). The output is bounded by
-- the declared pairs (int_comparisons), never quadratic in runs; a filter on candidate and
-- parent reaches the scan of the resolved scores (one pair reads two runs).
-- Grain: one row per (candidate, parent, metric, level, task_id); null allowed in task_id.
with paired as (
    select * from int_paired
),

counts as (
    select
        candidate,
        parent,
        metric,
        case when grouping(task_id) = 1 then 'overall' else 'task_id' end as level,
        task_id,
        any_value(errors) as errors,
        sum(case when outcome <> 'dropped' then 1 else 0 end) as n_pairs,
        sum(case when outcome = 'candidate' then 1 else 0 end) as candidate_wins,
        sum(case when outcome = 'parent' then 1 else 0 end) as parent_wins,
        sum(case when outcome = 'tie' then 1 else 0 end) as ties,
        sum(case when outcome = 'dropped' then 1 else 0 end) as n_dropped,
        avg(case when outcome <> 'dropped' then diff end) as mean_diff
    from paired
    group by grouping sets ((candidate, parent, metric), (candidate, parent, metric, task_id))
),

final as (
    select
        candidate,
        parent,
        metric,
        level,
        task_id,
        errors,
        cast(n_pairs as bigint) as n_pairs,
        cast(candidate_wins as bigint) as candidate_wins,
        cast(parent_wins as bigint) as parent_wins,
        cast(ties as bigint) as ties,
        cast(n_dropped as bigint) as n_dropped,
        mean_diff
    from counts
)

select * from final
