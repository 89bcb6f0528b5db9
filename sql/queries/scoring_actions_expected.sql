-- step 2: one row per expected action of each episode that does not abstain (pos from 1):
-- its name, and its arguments when it is an object. Fields: exp (the table made), ep.
create temp table {exp} as
select run_id, episode_id, pos, e,
    case when json_type(e) = 'VARCHAR' then e ->> '$' else e ->> '$.name' end as ename,
    case when json_type(e) = 'OBJECT' then e -> '$.arguments' end as eargs
from (select run_id, episode_id, unnest(cast(ev as json[])) as e,
             generate_subscripts(cast(ev as json[]), 1) as pos
      from {ep} where why is null)
