-- step 5: every (expected position, call) pair with the same name. Fields: cand (the table
-- made), exp, calls.
create temp table {cand} as
select x.run_id, x.episode_id, x.pos, c.cpos, x.eargs, c.cargs
from {exp} as x join {calls} as c
on c.run_id = x.run_id and c.episode_id = x.episode_id and c.cname = x.ename
