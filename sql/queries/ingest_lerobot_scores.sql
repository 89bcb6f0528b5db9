-- the LeRobot reader (ingest/formats/lerobot): success, sum_reward and max_reward of every
-- episode of the good evaluations; a value the file does not record abstains.
WITH m AS (
    SELECT i.file_idx, i.run_id, e.ev_idx, e.task_idx, e.ep_idx, e.key, e.task_id,
           e.seed_v AS seed,
           unnest([['success', CAST(e.success_v AS VARCHAR)],
                   ['sum_reward', CAST(e.sum_v AS VARCHAR)],
                   ['max_reward', CAST(e.max_v AS VARCHAR)]]) AS m
    FROM _lr_ep AS e JOIN _lr_ids AS i USING (file_idx, ev_idx)
)
SELECT file_idx, run_id, key, task_id, seed, 1 AS epoch, key AS episode_id,
       m[1] AS metric, CAST(m[2] AS DOUBLE) AS value, m[2] IS NOT NULL AS valid,
       CASE WHEN m[2] IS NULL THEN 'not recorded' END AS skip_reason,
       'evallog' AS source, 'imported' AS source_kind
FROM m
ORDER BY file_idx, ev_idx, task_idx, ep_idx, metric
