-- One page of an episode's trace events. {{long_fields}}: each long text field cut at $cut
-- characters in DuckDB, with its length (hylo_analytics.serve._data.LONG_FIELDS).
SELECT episode_id, idx, type, t, reward, terminated, truncated, success, latency_ms, value,
       {long_fields},
       count(*) OVER () AS n_matching
FROM events WHERE run_id = $run AND key = $key
ORDER BY episode_id, idx
LIMIT $limit OFFSET $offset
