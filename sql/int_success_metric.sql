-- The metric that is each run's success, for the success marts: 'success'; an inspect-robots
-- log names its per-trial outcome success_at_end (the operator's end-of-episode judgement),
-- which is its success when it has no 'success' ('success' sorts first).
-- Grain: one row per (run_id).
select s.run_id, min(s.metric) as metric
from int_score_stats as s
where s.level = 'run' and (s.metric = 'success' or (s.metric = 'success_at_end'
    and s.run_id in (select run_id from stg_runs where source_format like 'inspect-robots/%')))
group by s.run_id
