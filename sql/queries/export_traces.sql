-- Each trace file of run $run as its text: the stored event lines in order, one a line.
-- {{events}}: the run's events with their raw lines (hylo_analytics._traces.with_raw_sql)
SELECT s.trace_path, string_agg(e.raw, chr(10) ORDER BY e.idx) || chr(10)
FROM stg_samples AS s JOIN ({events}) AS e
  ON e.run_id = s.run_id AND e.key = s.key AND e.episode_id = s.episode_id
WHERE s.run_id = $run AND s.trace_path IS NOT NULL
GROUP BY s.trace_path
