-- the LeRobot reader (ingest/formats/lerobot): the episodes of _lr_raw with their values
-- typed, their task and key, and the first thing wrong with each (bad = [field, why], null
-- when nothing is). A key given twice in one evaluation is wrong in its second episode.
WITH num AS (
    SELECT *,
           CASE WHEN checkpoint IS NULL THEN '' ELSE checkpoint || '.' END AS pre,
           CASE WHEN shape = 'per_episode' THEN 'default'
                WHEN json_type(task_group) = 'VARCHAR'
                     AND json_type(task_ref) IN ('VARCHAR', 'BIGINT', 'UBIGINT')
                THEN (task_group ->> '$') || '/' || (task_ref ->> '$') END AS task_id,
           CASE json_type(success)
               WHEN 'BOOLEAN' THEN CASE WHEN CAST(success AS BOOLEAN) THEN 1.0 ELSE 0.0 END
               WHEN 'BIGINT' THEN CAST(success AS DOUBLE)
               WHEN 'UBIGINT' THEN CAST(success AS DOUBLE)
               WHEN 'DOUBLE' THEN CAST(success AS DOUBLE) END AS success_v,
           CASE WHEN json_type(sum_reward) IN ('BIGINT', 'UBIGINT', 'DOUBLE')
                THEN CAST(sum_reward AS DOUBLE) END AS sum_v,
           CASE WHEN json_type(max_reward) IN ('BIGINT', 'UBIGINT', 'DOUBLE')
                THEN CAST(max_reward AS DOUBLE) END AS max_v,
           CASE WHEN shape = 'per_episode' THEN TRY_CAST(seed AS BIGINT) END AS own_seed
    FROM _lr_raw
), keyed AS (
    SELECT *,
           CASE WHEN shape = 'per_task' THEN pre || 'per_task[' || task_idx || ']'
                ELSE pre || 'per_episode[' || ep_idx || ']' END AS loc,
           coalesce(own_seed, ep_idx) AS seed_v,
           task_id || '#' || CAST(coalesce(own_seed, ep_idx) AS VARCHAR) AS key
    FROM num
), ranked AS (
    SELECT *, row_number() OVER (PARTITION BY file_idx, ev_idx, key
                                 ORDER BY task_idx, ep_idx) AS nth
    FROM keyed
)
SELECT *,
       CASE
           WHEN task_id IS NULL AND json_type(task_group) IS DISTINCT FROM 'VARCHAR'
           THEN [loc || '.task_group', 'expected a string, got ' || coalesce(lower(json_type(task_group)), 'nothing')]
           WHEN task_id IS NULL
           THEN [loc || '.task_id', 'expected an integer or a string, got ' || coalesce(lower(json_type(task_ref)), 'nothing')]
           WHEN shape = 'per_task' AND ep_idx = 0 AND n_sum IS NOT NULL AND n_sum <> n_success
           THEN [loc || '.metrics.sum_rewards', 'has ' || n_sum || ' values; successes has ' || n_success]
           WHEN shape = 'per_task' AND ep_idx = 0 AND n_max IS NOT NULL AND n_max <> n_success
           THEN [loc || '.metrics.max_rewards', 'has ' || n_max || ' values; successes has ' || n_success]
           WHEN success_v IS NULL OR success_v NOT IN (0.0, 1.0)
           THEN [CASE WHEN shape = 'per_task' THEN loc || '.metrics.successes[' || ep_idx || ']'
                      ELSE loc || '.success' END,
                 'expected true or false, got ' || coalesce(CAST(success AS VARCHAR), 'nothing')]
           WHEN sum_reward IS NOT NULL AND json_type(sum_reward) <> 'NULL' AND sum_v IS NULL
             OR NOT isfinite(sum_v)
           THEN [CASE WHEN shape = 'per_task' THEN loc || '.metrics.sum_rewards[' || ep_idx || ']'
                      ELSE loc || '.sum_reward' END,
                 'expected a finite number, got ' || CAST(sum_reward AS VARCHAR)]
           WHEN max_reward IS NOT NULL AND json_type(max_reward) <> 'NULL' AND max_v IS NULL
             OR NOT isfinite(max_v)
           THEN [CASE WHEN shape = 'per_task' THEN loc || '.metrics.max_rewards[' || ep_idx || ']'
                      ELSE loc || '.max_reward' END,
                 'expected a finite number, got ' || CAST(max_reward AS VARCHAR)]
           WHEN shape = 'per_episode' AND coalesce(json_type(seed), 'NULL') <> 'NULL'
                AND own_seed IS NULL
           THEN [loc || '.seed', 'expected an integer that fits in 64 bits, got ' || CAST(seed AS VARCHAR)]
           WHEN nth > 1
           THEN [loc, 'duplicate episode: its key ' || key || ' is already in this evaluation']
       END AS bad
FROM ranked
