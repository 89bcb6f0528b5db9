-- The links of many runs' flipped keys in one scan (compare.flips, past FEW_RUNS runs: one
-- query a run reads the samples once a run). Field: wanted, a registered relation of
-- (run_id, key), the pairs to link. One row per (run_id, key): its epochs and episode ids
-- in epoch order, the Inspect sample id, the run's source file and the episodes' statuses.
SELECT s.run_id, s.key,
       list(s.epoch ORDER BY s.epoch, s.episode_id) AS epochs,
       list(s.episode_id ORDER BY s.epoch, s.episode_id) AS episode_ids,
       min(json_extract_string(s.extra, '$.sample_id')) AS sample_id,
       any_value(r.source_path) AS path,
       string_agg(DISTINCT s.status, ',' ORDER BY s.status) AS status
FROM samples AS s
INNER JOIN {wanted} AS w ON w.run_id = s.run_id AND w.key = s.key
INNER JOIN runs AS r ON r.run_id = s.run_id
GROUP BY s.run_id, s.key
