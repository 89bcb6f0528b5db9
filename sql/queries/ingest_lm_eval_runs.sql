-- the lm-eval reader (ingest/formats/lm_eval): one row per run (_lm_run): a results file
-- (its groups, else its tasks, as the benchmark; its figures as written its results) or an
-- orphan samples file (its task the benchmark).
-- Fields: results, samples (the two source formats).
SELECT r.batch_idx AS file_idx, r.run_id,
       CASE WHEN r.orphan_task IS NULL THEN '{results}' ELSE '{samples}' END AS source_format,
       coalesce(r.orphan_task,
                (SELECT string_agg(k, '+' ORDER BY k) FROM (SELECT unnest(json_keys(l.raw, '$.groups')) AS k)),
                (SELECT string_agg(DISTINCT k, '+' ORDER BY k)
                 FROM (SELECT unnest(json_extract_string(l.raw, '$.results[*].task_name')) AS k)),
                (SELECT string_agg(DISTINCT f.task, '+' ORDER BY f.task) FROM _lm_f AS f
                 WHERE f.file_idx = r.local_idx)) AS benchmark_id,
       r.agent AS agent_name, r.created,
       CASE WHEN l.raw IS NOT NULL THEN CAST(json_object(
           'results', json_extract(l.raw, '$.results'), 'groups', json_extract(l.raw, '$.groups'),
           'n-samples', json_extract(l.raw, '$."n-samples"'),
           'higher_is_better', json_extract(l.raw, '$.higher_is_better'),
           'versions', json_extract(l.raw, '$.versions'),
           'n-shot', json_extract(l.raw, '$."n-shot"')) AS VARCHAR) END AS results,
       'success' AS status,
       (SELECT count(*) FROM _lm_samples AS s WHERE s.run_id = r.run_id) AS n_samples,
       CAST(json_object(
           'agent_name_from', r.agent_from, 'config', json_extract(l.raw, '$.config'),
           'configs', json_extract(l.raw, '$.configs'), 'git_hash', l.raw ->> '$.git_hash',
           'lm_eval_version', l.raw ->> '$.lm_eval_version',
           'transformers_version', l.raw ->> '$.transformers_version',
           'date', json_extract(l.raw, '$.date'), 'model_source', l.raw ->> '$.model_source',
           'task_hashes', json_extract(l.raw, '$.task_hashes'),
           'chat_template_sha', l.raw ->> '$.chat_template_sha',
           'total_evaluation_time_seconds', l.raw ->> '$.total_evaluation_time_seconds')
           AS VARCHAR) AS extra
FROM _lm_run AS r LEFT JOIN _lm AS l ON l.file_idx = r.local_idx
ORDER BY r.batch_idx
