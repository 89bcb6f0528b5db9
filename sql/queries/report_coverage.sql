-- The coverage section: each run's resolved rows of the pair, scored or by skip reason.
select
    run_id as run,
    metric,
    case when value is not null then 'scored'
         else coalesce(skip_reason, 'no reason given') end as reason,
    count(*) as n
from int_scores_preferred
where run_id in ($candidate, $parent)
group by all
order by run, metric, reason
