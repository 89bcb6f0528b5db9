-- Paired key-level scores of the declared pairs only (int_comparisons: a run's parent_run_id
-- from its EvalLog, and Store.declare_parent), never every pair of runs, on (key, metric),
-- from int_key_scores (the preferred score per episode, epochs of a key reduced by their
-- mean: the same pairs Store.compare makes). A pair is kept when both runs are of the same
-- benchmark_id and split; each declared (candidate, parent) is one orientation (declare
-- both to have both). The outcome is direction-aware (from the MetricSpec registry, view
-- metric_specs): for metrics to minimize (steps, safety_interventions, latency_p95) a lower
-- value wins. Pairs where either side abstained are kept with outcome 'dropped'. The
-- comparability gate (benchmark digest, scorer version) is Python's (Store.compare).
-- Grain: one row per (candidate, parent, key, metric).
with directions as (
    -- the MetricSpec registry, exposed by the store as a view
    select metric, higher_is_better from metric_specs
),

pairs as (
    -- each side is read from int_key_scores on its own (no shared CTE, which DuckDB would
    -- materialize for every run): a query of one pair then resolves only that pair's scores
    select cp.candidate, cp.parent, rc.benchmark_id, rc.split
    from int_comparisons as cp
    inner join stg_runs as rc on rc.run_id = cp.candidate
    inner join stg_runs as rp on rp.run_id = cp.parent
    where rc.benchmark_id = rp.benchmark_id and rc.split is not distinct from rp.split
),

paired as (
    select
        pr.candidate,
        pr.parent,
        pr.benchmark_id,
        pr.split,
        c.key,
        c.task_id,
        c.metric,
        c.value as candidate_value,
        p.value as parent_value
    from pairs as pr
    inner join int_key_scores as c on c.run_id = pr.candidate
    inner join int_key_scores as p
        on p.run_id = pr.parent
        and p.key = c.key
        and p.metric = c.metric
),

oriented as (
    select
        pr.*,
        coalesce(d.higher_is_better, true) as higher_is_better,
        case
            when coalesce(d.higher_is_better, true) then pr.candidate_value - pr.parent_value
            else pr.parent_value - pr.candidate_value
        end as improvement
    from paired as pr
    left join directions as d on d.metric = pr.metric
),

final as (
    select
        candidate,
        parent,
        benchmark_id,
        split,
        key,
        task_id,
        metric,
        higher_is_better,
        candidate_value,
        parent_value,
        candidate_value - parent_value as diff,
        case
            when candidate_value is null or parent_value is null then 'dropped'
            when improvement > 0 then 'candidate'
            when improvement < 0 then 'parent'
            else 'tie'
        end as outcome
    from oriented
)

select * from final
