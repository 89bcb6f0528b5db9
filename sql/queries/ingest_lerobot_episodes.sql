-- the LeRobot reader (ingest/formats/lerobot): one row per episode of every evaluation in
-- _lr_ev, both shapes: per_task[k].metrics lists (episode i of a task is index i of its
-- lists) and per_episode rows. Values stay JSON here: the checks read their types.
WITH pt AS (
    SELECT e.file_idx, e.ev_idx, e.checkpoint, CAST(t.key AS BIGINT) AS task_idx, t.value AS t
    FROM _lr_ev AS e, json_each(e.ev, '$.per_task') AS t
    WHERE json_type(e.ev, '$.per_task') = 'ARRAY'
), lists AS (
    SELECT *,
           CAST(json_extract(t, '$.metrics.successes') AS JSON[]) AS succ,
           CAST(json_extract(t, '$.metrics.sum_rewards') AS JSON[]) AS sumr,
           CAST(json_extract(t, '$.metrics.max_rewards') AS JSON[]) AS maxr,
           CASE WHEN json_type(t, '$.metrics.video_paths') = 'ARRAY'
                THEN CAST(json_extract(t, '$.metrics.video_paths') AS JSON[]) END AS videos
    FROM pt WHERE json_type(t, '$.metrics.successes') = 'ARRAY'
), per_task AS (
    SELECT *, unnest(range(len(succ))) AS i FROM lists
), per_episode AS (
    SELECT e.file_idx, e.ev_idx, e.checkpoint, CAST(p.key AS BIGINT) AS i, p.value AS p
    FROM _lr_ev AS e, json_each(e.ev, '$.per_episode') AS p
    WHERE json_type(e.ev, '$.per_episode') = 'ARRAY'
)
SELECT file_idx, ev_idx, checkpoint, 'per_task' AS shape, task_idx, i AS ep_idx,
       json_extract(t, '$.task_group') AS task_group, json_extract(t, '$.task_id') AS task_ref,
       succ[i + 1] AS success, sumr[i + 1] AS sum_reward, maxr[i + 1] AS max_reward,
       CAST(NULL AS JSON) AS seed, len(succ) AS n_success, len(sumr) AS n_sum,
       len(maxr) AS n_max, videos[i + 1] ->> '$' AS video_path
FROM per_task
UNION ALL
SELECT file_idx, ev_idx, checkpoint, 'per_episode', 0, i,
       CAST(NULL AS JSON), CAST(NULL AS JSON),
       json_extract(p, '$.success'), json_extract(p, '$.sum_reward'),
       json_extract(p, '$.max_reward'), json_extract(p, '$.seed'), NULL, NULL, NULL, NULL
FROM per_episode
