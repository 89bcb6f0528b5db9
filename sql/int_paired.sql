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

zero_one_candidate as (
    -- per pair, the candidate's undeclared metrics whose every valid value in the run is 0 or
    -- 1 (when its harness counts an error as a failure). Grouped by the pair, one CTE per
    -- side, each used once: a filter on the pair reaches this scan of the scores (a shared
    -- aggregate over the failing runs read every declared pair's scores)
    select pr.candidate, pr.parent, k.metric
    from pairs as pr
    inner join int_key_scores as k on k.run_id = pr.candidate
    where pr.candidate_errors = 'failure' and declared_kind(k.metric) is null
    group by pr.candidate, pr.parent, k.metric
    having bool_and(k.value in (0, 1) or k.value is null)
),

zero_one_parent as (
    -- the same for the pair's parent
    select pr.candidate, pr.parent, k.metric
    from pairs as pr
    inner join int_key_scores as k on k.run_id = pr.parent
    where pr.parent_errors = 'failure' and declared_kind(k.metric) is null
    group by pr.candidate, pr.parent, k.metric
    having bool_and(k.value in (0, 1) or k.value is null)
),

paired as (
    select
        pr.candidate,
        pr.parent,
        pr.benchmark_id,
        pr.split,
        case when pr.candidate_errors = pr.parent_errors then pr.candidate_errors else 'mixed' end
            as errors,
        c.key,
        c.task_id,
        c.metric,
        case
            when c.value is null and c.errored and pr.candidate_errors = 'failure'
                and (declared_kind(c.metric) = 'binary' or zc.metric is not null)
                then 0.0
            else c.value
        end as candidate_value,
        case
            when p.value is null and p.errored and pr.parent_errors = 'failure'
                and (declared_kind(p.metric) = 'binary' or zp.metric is not null)
                then 0.0
            else p.value
        end as parent_value
    from pairs as pr
    inner join int_key_scores as c on c.run_id = pr.candidate
    inner join int_key_scores as p
        on p.run_id = pr.parent
        and p.key = c.key
        and p.metric = c.metric
    left join zero_one_candidate as zc
        on zc.candidate = pr.candidate and zc.parent = pr.parent and zc.metric = c.metric
    left join zero_one_parent as zp
        on zp.candidate = pr.candidate and zp.parent = pr.parent and zp.metric = p.metric
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
