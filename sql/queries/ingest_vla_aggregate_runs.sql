-- the vla-eval export reader (ingest/formats/vla_eval/aggregate.py): one row per good file
-- (_vag_ids): the benchmark, the file's own means and per-task figures as its results.
-- Fields: format (the source format).
WITH n AS (SELECT file_idx, count(DISTINCT (task_idx, ep_idx)) AS n FROM _vag_ep GROUP BY 1)
SELECT i.file_idx, i.run_id, '{format}' AS source_format, a.raw ->> '$.benchmark' AS benchmark_id,
       json_extract_string(a.raw, '$.config.subname') AS split,
       i.agent AS agent_name,
       CAST(json_object(
           'mean_success', json_extract(a.raw, '$.mean_success'),
           'num_episodes_total', json_extract(a.raw, '$.num_episodes_total'),
           'num_errors', json_extract(a.raw, '$.num_errors'),
           'metric_keys', json_extract(a.raw, '$.metric_keys'),
           'tasks', (SELECT list(json_object('task', t ->> '$.task',
                                             'num_episodes', json_extract(t, '$.num_episodes'),
                                             'num_errors', json_extract(t, '$.num_errors'),
                                             'avg_steps', json_extract(t, '$.avg_steps'),
                                             'mean_success', json_extract(t, '$.mean_success')))
                     FROM (SELECT unnest(CAST(json_extract(a.raw, '$.tasks') AS JSON[])) AS t)))
           AS VARCHAR) AS results,
       CASE WHEN CAST(json_extract(a.raw, '$.partial') AS BOOLEAN) THEN 'partial'
            ELSE 'success' END AS status,
       a.raw ->> '$.created_at' AS created,
       coalesce(n.n, 0) AS n_samples,
       CAST(json_object('mode', a.raw ->> '$.mode', 'harness_version', a.raw ->> '$.harness_version',
                        'eval_id', a.raw ->> '$.eval_id', 'config', json_extract(a.raw, '$.config'),
                        'server_info', json_extract(a.raw, '$.server_info'),
                        'render', json_extract(a.raw, '$.render'),
                        'shard', json_extract(a.raw, '$.shard'),
                        'partial', json_extract(a.raw, '$.partial'),
                        'seed', json_extract(a.raw, '$.seed'),
                        'agent_name_from', i.agent_from) AS VARCHAR) AS extra
FROM _vag_ids AS i JOIN _vag AS a USING (file_idx) LEFT JOIN n USING (file_idx)
ORDER BY i.file_idx
