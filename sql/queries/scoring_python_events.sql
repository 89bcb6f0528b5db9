-- a Python scorer's trace inputs: each episode's event lines as written, in order. Fields:
-- events (the events with their raw lines, from the trace files kept once).
select e.run_id, e.episode_id, list(e.raw order by e.idx) as raws
from ({events}) as e
group by e.run_id, e.episode_id
