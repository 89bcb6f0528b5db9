-- one step of the walk: position $p matches at the earliest matching call after position
-- $p - 1's, over every episode at once. Fields: walk, matched.
insert into {walk}
select w.run_id, w.episode_id, $p, min(m.cpos)
from {walk} as w join {matched} as m
  on m.run_id = w.run_id and m.episode_id = w.episode_id
 and m.pos = $p and m.cpos > w.at
where w.pos = $p - 1
group by w.run_id, w.episode_id
