-- the LeRobot reader (ingest/formats/lerobot): one row per good evaluation (_lr_ids), with
-- its task groups as the benchmark and the file's own aggregates as its results.
-- Fields: format (the source format).
WITH n AS (
    SELECT file_idx, ev_idx, count(*) AS n,
           string_agg(DISTINCT task_group ->> '$', '+' ORDER BY task_group ->> '$') AS groups
    FROM _lr_ep GROUP BY file_idx, ev_idx
)
SELECT i.file_idx, i.run_id, '{format}' AS source_format, n.groups AS benchmark_id,
       i.agent AS agent_name, i.version AS agent_version,
       CAST(json_object('overall', json_extract(e.ev, '$.overall'),
                        'aggregated', json_extract(e.ev, '$.aggregated'),
                        'per_group', json_extract(e.ev, '$.per_group')) AS VARCHAR) AS results,
       'success' AS status, coalesce(n.n, 0) AS n_samples,
       CAST(json_object('agent_name_from', i.agent_from, 'checkpoint', e.checkpoint,
                        'run_config', json_extract(e.ev, '$.run_config'),
                        'shape', CASE WHEN json_type(e.ev, '$.per_task') IS NOT NULL
                                      THEN 'per_task' ELSE 'per_episode' END) AS VARCHAR)
           AS extra
FROM _lr_ids AS i JOIN _lr_ev AS e USING (file_idx, ev_idx) LEFT JOIN n USING (file_idx, ev_idx)
ORDER BY i.file_idx, i.ev_idx
