-- the Every Eval Ever reader (ingest/formats/every_eval_ever): one row per aggregate that is
-- a run of its own (_eee_keep: good, its instances not there), its evaluation_results as
-- written the run's results, its figures' rows (_eee_samples) its samples.
-- Fields: format (the source format).
SELECT a.file_idx, 'eee:' || (a.raw ->> '$.evaluation_id') AS run_id,
       '{format}' AS source_format,
       (SELECT CASE WHEN count(DISTINCT d) = 1 THEN any_value(d) END
        FROM (SELECT unnest(json_extract_string(
                  a.raw, '$.evaluation_results[*].source_data.dataset_name')) AS d)) AS benchmark_id,
       a.raw ->> '$.model_info.id' AS agent_name,
       CAST(json_object('evaluation_results', json_extract(a.raw, '$.evaluation_results'))
           AS VARCHAR) AS results,
       'success' AS status,
       (SELECT count(*) FROM _eee_samples AS s WHERE s.file_idx = a.file_idx) AS n_samples,
       CAST(json_object('schema_version', a.raw ->> '$.schema_version',
                        'source_metadata', json_extract(a.raw, '$.source_metadata'),
                        'model_info', json_extract(a.raw, '$.model_info'),
                        'eval_library', json_extract(a.raw, '$.eval_library'),
                        'evaluation_timestamp', a.raw ->> '$.evaluation_timestamp',
                        'detailed_evaluation_results',
                        json_extract(a.raw, '$.detailed_evaluation_results'),
                        'agent_name_from', 'model_info.id') AS VARCHAR) AS extra
FROM _eee_a AS a JOIN _eee_keep AS k USING (file_idx)
ORDER BY a.file_idx
