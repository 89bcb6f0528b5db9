-- The report's metric for its pair ($candidate, $parent): how many resolved values, and how
-- many not 0 or 1 (the report compares 0/1 metrics only).
select
    count(*) as n,
    count(*) filter (where value is not null and value not in (0, 1)) as n_not_binary
from int_scores_preferred
where metric = $metric and run_id in ($candidate, $parent)
