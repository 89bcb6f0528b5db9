-- Success rate per run two ways, so harness errors are never silently counted either way.
-- success_rate_errors_excluded: mean of the non-null success scores (abstentions left out).
-- success_rate_errors_as_failures: abstentions whose skip_reason starts with 'harness error'
-- (an episode the harness never ran to an outcome, e.g. a vla-eval timeout) count as 0;
-- other abstentions stay out of both rates and are counted in n_skipped_other.
with scores as (
    select * from stg_scores where metric = 'success'
),

runs as (
    select run_id, agent_name, benchmark_id, split, source_format from stg_runs
),

counts as (
    select
        run_id,
        count(*) as n_total,
        count(value) as n_valid,
        cast(sum(case when value is null and skip_reason like 'harness error%' then 1 else 0 end)
            as bigint) as n_harness_errors,
        sum(value) as successes
    from scores
    group by run_id
),

final as (
    select
        c.run_id,
        r.agent_name,
        r.benchmark_id,
        r.split,
        r.source_format,
        c.n_total,
        c.n_valid,
        c.n_harness_errors,
        c.n_total - c.n_valid - c.n_harness_errors as n_skipped_other,
        c.successes,
        case when c.n_valid > 0 then c.successes / c.n_valid end
            as success_rate_errors_excluded,
        case when c.n_valid + c.n_harness_errors > 0
            then c.successes / (c.n_valid + c.n_harness_errors) end
            as success_rate_errors_as_failures
    from counts as c
    left join runs as r on r.run_id = c.run_id
)

select * from final
