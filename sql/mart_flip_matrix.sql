-- Each key's difficulty over the runs of its suite (benchmark_id, split): how many runs
-- solve it, fail it, errored on it, on the run's success metric (int_success_metric:
-- 'success', an inspect-robots run's success_at_end), from int_key_outcomes (each key's
-- outcome per run under the run's errors policy; errors names it, 'mixed' when the runs'
-- policies differ). Store.flip_matrix(runs of one suite)
-- gives the same counts (tested), and the order-dependent columns this view cannot have
-- (natural version order is not SQL): the latest run's outcome, newly broken keys.
-- n_runs: the suite's runs with that metric; n_missing: those without the key. n_valid:
-- the runs with a value under their errors policy (an errored key counted as a failure,
-- 0, by a run whose policy is 'failure': n_errored_as_failure of them); n_success,
-- n_failure, n_partial, n_errored (whatever the policy) and n_abstained count outcomes:
-- n_runs = n_success + n_failure + n_partial + n_errored + n_abstained + n_missing.
-- solve_rate: the mean value over n_valid (n_success / n_valid for 0/1 values), the
-- classical test theory "item difficulty" (p-value; lower is harder); null when no run has
-- a value. always_fails: no run solved it (not even partly) and at least one run failed it
-- (an errored key alone never makes a key fail everywhere); always_solved: every valid
-- value is 1.
-- Grain: one row per (benchmark_id, split, key, metric); null allowed in split, key.
with cells as (
    select o.*
    from int_key_outcomes as o
    inner join int_success_metric as m on m.run_id = o.run_id and m.metric = o.metric
),

suite_runs as (
    select benchmark_id, split, metric, count(distinct run_id) as n_runs
    from cells
    group by benchmark_id, split, metric
),

counts as (
    select
        benchmark_id,
        split,
        key,
        metric,
        min(task_id) as task_id,
        case when min(errors) = max(errors) then min(errors) else 'mixed' end as errors,
        count(*) as n_cells,
        count(value) as n_valid,
        count(*) filter (where outcome = 'success') as n_success,
        count(*) filter (where outcome = 'failure') as n_failure,
        count(*) filter (where outcome = 'partial') as n_partial,
        count(*) filter (where outcome = 'error') as n_errored,
        count(*) filter (where outcome = 'error' and value is not null) as n_errored_as_failure,
        count(*) filter (where outcome = 'abstained') as n_abstained,
        sum(value) as value_sum,
        min(value) as value_min
    from cells
    group by benchmark_id, split, key, metric
),

final as (
    select
        c.benchmark_id,
        c.split,
        c.key,
        c.task_id,
        c.metric,
        c.errors,
        s.n_runs,
        c.n_valid,
        c.n_success,
        c.n_failure,
        c.n_partial,
        c.n_errored,
        c.n_errored_as_failure,
        c.n_abstained,
        s.n_runs - c.n_cells as n_missing,
        case when c.n_valid > 0 then c.value_sum / c.n_valid end as solve_rate,
        c.n_success = 0 and c.n_partial = 0 and c.n_failure > 0 as always_fails,
        c.n_valid > 0 and c.value_min = 1 as always_solved
    from counts as c
    inner join suite_runs as s
        on s.benchmark_id is not distinct from c.benchmark_id
        and s.split is not distinct from c.split
        and s.metric = c.metric
)

select * from final
