-- the vla-eval export reader (ingest/formats/vla_eval/aggregate.py): the episodes of _vag_raw
-- with their key and values typed, and the first thing wrong with each row (bad = [field,
-- why], null when nothing is).
WITH v AS (
    SELECT *,
           'tasks[' || task_idx || '].episodes[' || ep_idx || ']' AS loc,
           TRY_CAST(start AS BIGINT) AS k,
           json_extract(e, '$.metrics."' || replace(metric, '"', '\"') || '"') AS mv
    FROM _vag_raw
), typed AS (
    SELECT *,
           task || '#' || CAST(k AS VARCHAR) AS key,
           CASE json_type(mv) WHEN 'BOOLEAN' THEN CASE WHEN CAST(mv AS BOOLEAN) THEN 1.0 ELSE 0.0 END
                WHEN 'DOUBLE' THEN CAST(mv AS DOUBLE) WHEN 'BIGINT' THEN CAST(mv AS DOUBLE)
                WHEN 'UBIGINT' THEN CAST(mv AS DOUBLE) END AS value,
           CASE WHEN json_type(steps) IN ('BIGINT', 'UBIGINT', 'DOUBLE') THEN CAST(steps AS DOUBLE) END
               AS steps_v,
           CASE WHEN json_type(elapsed_sec) IN ('BIGINT', 'UBIGINT', 'DOUBLE')
                THEN CAST(elapsed_sec AS DOUBLE) END AS elapsed_v,
           dense_rank() OVER (PARTITION BY file_idx, task, k ORDER BY task_idx, ep_idx) AS nth
    FROM v
)
SELECT *,
       CASE
           WHEN task_type IS DISTINCT FROM 'VARCHAR'
           THEN ['tasks[' || task_idx || '].task', 'expected a string, got ' || coalesce(lower(task_type), 'nothing')]
           WHEN k IS NULL
           THEN [loc || '.episode_id', 'expected an integer start state, got ' || coalesce(CAST(start AS VARCHAR), 'nothing')]
           WHEN metrics_type IS DISTINCT FROM 'OBJECT' AND failure_reason IS NULL
           THEN [loc || '.metrics', 'expected an object, got ' || coalesce(lower(metrics_type), 'nothing')]
           WHEN metric IS NOT NULL AND coalesce(json_type(mv), 'NULL') <> 'NULL' AND value IS NULL
           THEN [loc || '.metrics.' || metric, 'expected a number or a boolean, got ' || lower(json_type(mv))]
           WHEN NOT isfinite(value)
           THEN [loc || '.metrics.' || metric, 'non-finite number ' || CAST(mv AS VARCHAR) || ': a value must be finite']
           WHEN coalesce(json_type(steps), 'NULL') <> 'NULL' AND steps_v IS NULL OR NOT isfinite(steps_v)
           THEN [loc || '.steps', 'expected a finite number, got ' || CAST(steps AS VARCHAR)]
           WHEN coalesce(json_type(elapsed_sec), 'NULL') <> 'NULL' AND elapsed_v IS NULL
                OR NOT isfinite(elapsed_v)
           THEN [loc || '.elapsed_sec', 'expected a finite number, got ' || CAST(elapsed_sec AS VARCHAR)]
           WHEN nth > 1
           THEN [loc || '.episode_id', 'duplicate episode: its key ' || key || ' is already in this file']
       END AS bad
FROM typed
