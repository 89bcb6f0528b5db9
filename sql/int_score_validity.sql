-- Every preferred score row (one per run, key, epoch and metric: int_scores_preferred) with its
-- validity and skip reason decided once, the way
-- hylo_analytics.aggregate decides them: a row counts when its value is a real number and it
-- is not flagged invalid; otherwise it is skipped with its skip_reason (or abstained / nan /
-- invalid when none was written). Skipped rows keep a null value, so avg() never sees them.
with scores as (
    select * from int_scores_preferred
),

flagged as (
    select
        *,
        coalesce(value is not null and not isnan(value) and coalesce(valid, true), false)
            as is_valid
    from scores
),

final as (
    select
        run_id,
        key,
        task_id,
        seed,
        epoch,
        episode_id,
        metric,
        source,
        source_kind,
        case when is_valid then value end as value,
        is_valid,
        case
            when is_valid then null
            else coalesce(
                skip_reason,
                case
                    when value is null then 'abstained'
                    when isnan(value) then 'nan'
                    else 'invalid'
                end
            )
        end as skip_reason
    from flagged
)

select * from final
