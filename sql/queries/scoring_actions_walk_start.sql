-- the sequence check's greedy walk: position 0 of every episode, matched at call 0; returns
-- the last position to walk to. Fields: walk (the table made), exp.
create temp table {walk} as select run_id, episode_id, 0 as pos, 0 as at
from {exp} group by run_id, episode_id;
select coalesce(max(pos), 0) from {exp}
