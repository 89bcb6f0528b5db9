-- step 3: a malformed expected action is an error for its episode, named by position
-- ($shape: what an action must be). Fields: ep, exp.
update {ep} set why = b.msg
from (select run_id, episode_id, 'expected action ' || min(pos) || ' is not ' || $shape as msg
      from {exp} where ename is null group by all) as b
where b.run_id = {ep}.run_id and b.episode_id = {ep}.episode_id
