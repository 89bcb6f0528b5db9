-- One row per current run: its policy checks and its final status. A failed constraint makes
-- the run 'failed_policy'; a constraint that could not be checked (metric abstained or missing)
-- makes it 'unverified'; otherwise 'passed'. The run's own status and scores are untouched.
-- PolicyEvaluation.run_status is this view over the evaluation's rows (one rule, one place).
-- Grain: one row per (run_id).
with runs as (
    select run_id, status from stg_runs
),

results as (
    select * from stg_policy_results
),

per_run as (
    select
        run_id,
        count(*) as n_checks,
        cast(sum(case when role = 'constraint' and passed = false then 1 else 0 end) as bigint)
            as n_failed,
        cast(sum(case when role = 'constraint' and passed is null then 1 else 0 end) as bigint)
            as n_unchecked,
        list(distinct policy order by policy)
            filter (where role = 'constraint' and passed = false) as failed_policies
    from results
    group by run_id
),

final as (
    select
        r.run_id,
        r.status,
        coalesce(p.n_checks, 0) as n_checks,
        coalesce(p.n_failed, 0) as n_failed,
        coalesce(p.n_unchecked, 0) as n_unchecked,
        coalesce(p.failed_policies, []) as failed_policies,
        case
            when coalesce(p.n_failed, 0) > 0 then 'failed_policy'
            when coalesce(p.n_unchecked, 0) > 0 then 'unverified'
            else 'passed'
        end as final_status
    from runs as r
    left join per_run as p on p.run_id = r.run_id
)

select * from final
