-- The counts of a pooled comparison over suites (Store.pooled_compare), for the declared
-- pairs (mart_compare, overall rows): each declared (candidate run, parent run) of one
-- suite (the runs' split, else their benchmark_id; int_paired pairs runs of the same
-- benchmark and split) is one suite row of the policy pair (candidate agent and version,
-- parent agent and version), and one 'pooled' row per policy pair and metric sums the
-- counts and weighs the suites' differences by 1/S (S: the suites with pairs), as papers
-- average suites and as Store.pooled_compare's default weights="suite" does. The test
-- (stratified sign flips), the MOVER interval and the verdict are Python's; tests check
-- the counts and the pooled difference agree. errors: the errors policy of the pairs
-- ('mixed' when the suites' differ). A policy pair with two declared runs of one suite
-- gives two suite rows of that suite: declare one run per suite.
-- Grain: one row per (candidate_agent, candidate_version, parent_agent, parent_version, metric, level, suite, candidate); null allowed in candidate_version, parent_version, suite, candidate.
with compared as (
    select * from mart_compare where level = 'overall'
),

runs as (
    select run_id, agent_name, agent_version, coalesce(split, benchmark_id) as suite
    from stg_runs
),

suites as (
    select
        rc.agent_name as candidate_agent,
        rc.agent_version as candidate_version,
        rp.agent_name as parent_agent,
        rp.agent_version as parent_version,
        c.metric,
        rc.suite,
        c.candidate,
        c.parent,
        c.errors,
        c.n_pairs,
        c.candidate_wins,
        c.parent_wins,
        c.ties,
        c.n_dropped,
        c.mean_diff
    from compared as c
    inner join runs as rc on rc.run_id = c.candidate
    inner join runs as rp on rp.run_id = c.parent
),

weighted as (
    select
        s.*,
        sum(case when s.n_pairs > 0 then 1 else 0 end) over (
            partition by
                s.candidate_agent, s.candidate_version, s.parent_agent, s.parent_version,
                s.metric
        ) as n_suites
    from suites as s
),

suite_rows as (
    select
        candidate_agent,
        candidate_version,
        parent_agent,
        parent_version,
        metric,
        'suite' as level,
        suite,
        candidate,
        parent,
        errors,
        case when n_pairs > 0 then cast(1.0 as double) / n_suites else cast(0.0 as double) end
            as weight,
        n_suites,
        n_pairs,
        candidate_wins,
        parent_wins,
        ties,
        n_dropped,
        mean_diff
    from weighted
),

pooled as (
    select
        candidate_agent,
        candidate_version,
        parent_agent,
        parent_version,
        metric,
        'pooled' as level,
        cast(null as varchar) as suite,
        cast(null as varchar) as candidate,
        cast(null as varchar) as parent,
        case when min(errors) = max(errors) then min(errors) else 'mixed' end as errors,
        sum(weight) as weight,
        max(n_suites) as n_suites,
        sum(n_pairs) as n_pairs,
        sum(candidate_wins) as candidate_wins,
        sum(parent_wins) as parent_wins,
        sum(ties) as ties,
        sum(n_dropped) as n_dropped,
        sum(case when n_pairs > 0 then weight * mean_diff else 0.0 end) as mean_diff
    from suite_rows
    group by candidate_agent, candidate_version, parent_agent, parent_version, metric
),

unioned as (
    select * from suite_rows
    union all
    select * from pooled
),

final as (
    select
        candidate_agent,
        candidate_version,
        parent_agent,
        parent_version,
        metric,
        level,
        suite,
        candidate,
        parent,
        errors,
        weight,
        cast(n_suites as bigint) as n_suites,
        cast(n_pairs as bigint) as n_pairs,
        cast(candidate_wins as bigint) as candidate_wins,
        cast(parent_wins as bigint) as parent_wins,
        cast(ties as bigint) as ties,
        cast(n_dropped as bigint) as n_dropped,
        mean_diff
    from unioned
)

select * from final
