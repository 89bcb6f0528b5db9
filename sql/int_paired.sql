-- Paired key-level scores of the declared pairs only (int_comparisons: a run's parent_run_id
-- from its EvalLog, and Store.declare_parent), never every pair of runs, on (key, metric),
-- from int_key_scores (the preferred score per episode, epochs of a key reduced by their
-- mean: the same pairs Store.compare makes). A pair is kept when both runs are of the same
-- benchmark_id and split; each declared (candidate, parent) is one orientation (declare
-- both to have both). The outcome is direction-aware (from the MetricSpec registry, view
-- metric_specs): for metrics to minimize (steps, safety_interventions, latency_p95) a lower
-- value wins. Pairs where either side abstained are kept with outcome 'dropped'. The
-- comparability gate (benchmark digest, scorer version) is Python's (Store.compare).
-- Each side is read under its run's errors policy (run_errors: the convention of the
-- harness that wrote it; hylo_analytics._harness): under 'failure' an errored key of a 0/1
-- metric (declared binary, or declared nothing and every valid value of the run 0 or 1) is
-- a failure (0), as Store.compare pairs it; under 'exclude' it is a drop.
-- Grain: one row per (candidate, parent, key, metric).
with directions as (
    -- the MetricSpec registry, exposed by the store as a view
    select metric, higher_is_better from metric_specs
),

pairs as (
    -- each side is read from int_key_scores on its own (no shared CTE, which DuckDB would
    -- materialize for every run): a query of one pair then resolves only that pair's scores
    select
        cp.candidate,
        cp.parent,
        rc.benchmark_id,
        rc.split,
        run_errors(rc.errors_policy, rc.source_format) as candidate_errors,
        run_errors(rp.errors_policy, rp.source_format) as parent_errors
    from int_comparisons as cp
    inner join stg_runs as rc on rc.run_id = cp.candidate
    inner join stg_runs as rp on rp.run_id = cp.parent
    where rc.benchmark_id = rp.benchmark_id and rc.split is not distinct from rp.split
),

candidate_side as (
    -- each side reads int_key_scores once, with its pair: a filter on the pair reaches the
    -- scan of the scores. zero_one: every valid value of the run's metric is 0 or 1 (a
    -- window over the side's own rows, not a second scan of the scores)
    select
        pr.candidate,
        pr.parent,
        pr.benchmark_id,
        pr.split,
        pr.candidate_errors,
        pr.parent_errors,
        k.key,
        k.task_id,
        k.metric,
        k.value,
        k.errored,
        bool_and(k.value in (0, 1) or k.value is null)
            over (partition by pr.candidate, pr.parent, k.metric) as zero_one
    from pairs as pr
    inner join int_key_scores as k on k.run_id = pr.candidate
),

parent_side as (
    -- the same for the pair's parent
    select
        pr.candidate,
        pr.parent,
        k.key,
        k.metric,
        k.value,
        k.errored,
        bool_and(k.value in (0, 1) or k.value is null)
            over (partition by pr.candidate, pr.parent, k.metric) as zero_one
    from pairs as pr
    inner join int_key_scores as k on k.run_id = pr.parent
),

paired as (
    -- under 'failure' an errored key of a 0/1 metric (declared binary, or declared nothing
    -- and zero_one) is a failure (0.0)
    select
        c.candidate,
        c.parent,
        c.benchmark_id,
        c.split,
        case when c.candidate_errors = c.parent_errors then c.candidate_errors else 'mixed' end
            as errors,
        c.key,
        c.task_id,
        c.metric,
        case
            when c.value is null and c.errored and c.candidate_errors = 'failure'
                and coalesce(declared_kind(c.metric) = 'binary', c.zero_one)
                then 0.0
            else c.value
        end as candidate_value,
        case
            when p.value is null and p.errored and c.parent_errors = 'failure'
                and coalesce(declared_kind(p.metric) = 'binary', p.zero_one)
                then 0.0
            else p.value
        end as parent_value
    from candidate_side as c
    inner join parent_side as p
        on p.candidate = c.candidate
        and p.parent = c.parent
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
        errors,
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
