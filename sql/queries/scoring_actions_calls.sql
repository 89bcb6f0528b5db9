-- step 4: the calls, one row per span of kind $kind (any kind when null), in trace order
-- (cpos from 1). Fields: calls (the table made), spans (the span events with their lines).
create temp table {calls} as
select run_id, episode_id,
    row_number() over (partition by run_id, episode_id order by idx) as cpos,
    raw ->> '$.name' as cname, raw -> '$.attributes.arguments' as cargs
from ({spans})
where $kind is null or raw ->> '$.kind' = $kind
