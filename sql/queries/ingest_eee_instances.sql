-- the Every Eval Ever reader (ingest/formats/every_eval_ever): one row per instance line of
-- _eee_lines (file_idx, line, raw), its fields typed and what is wrong with it (bad: a list
-- of field / error structs, empty when nothing is). Schema 0.2.0 and 0.2.2 lines alike.
-- Fields: checks (the field checks, compiled by ingest/_sqlcheck.py).
WITH t AS (
    SELECT file_idx, line, raw,
           json_extract(raw, '$.evaluation.score') AS score_j,
           json_extract(raw, '$.evaluation.is_correct') AS correct_j,
           json_extract(raw, '$.performance.latency_ms') AS latency_j
    FROM _eee_lines WHERE raw IS NOT NULL
)
SELECT file_idx, line,
       raw ->> '$.evaluation_id' AS evaluation_id, raw ->> '$.model_id' AS model_id,
       raw ->> '$.evaluation_name' AS evaluation_name,
       raw ->> '$.schema_version' AS schema_version,
       CASE json_type(raw, '$.sample_id') WHEN 'VARCHAR' THEN raw ->> '$.sample_id'
            ELSE CAST(json_extract(raw, '$.sample_id') AS VARCHAR) END AS sample_id,
       CASE json_type(score_j) WHEN 'BOOLEAN' THEN CAST(CAST(score_j AS BOOLEAN) AS DOUBLE)
            WHEN 'NULL' THEN NULL ELSE TRY_CAST(score_j AS DOUBLE) END AS score,
       score_j IS NOT NULL AS has_score,
       CAST(CAST(correct_j AS BOOLEAN) AS DOUBLE) AS is_correct,
       correct_j IS NOT NULL AS has_correct,
       TRY_CAST(json_extract(raw, '$.token_usage.input_tokens') AS DOUBLE) AS tokens_in,
       TRY_CAST(json_extract(raw, '$.token_usage.output_tokens') AS DOUBLE) AS tokens_out,
       TRY_CAST(latency_j AS DOUBLE) AS latency_ms,
       CASE WHEN coalesce(json_type(raw, '$.error'), 'NULL') <> 'NULL'
            THEN coalesce(raw ->> '$.error', 'error') END AS error,
       json_object('sample_hash', raw ->> '$.sample_hash',
                   'interaction_type', raw ->> '$.interaction_type',
                   'reference', json_extract(raw, '$.input.reference'),
                   'stop_reason', json_extract(raw, '$.metadata.stop_reason')) AS extra,
       list_concat({checks}, CASE
           WHEN json_type(score_j) = 'DOUBLE' AND NOT isfinite(CAST(score_j AS DOUBLE))
           THEN [struct_pack(field := 'evaluation.score', error := 'non-finite number '
                   || CAST(score_j AS VARCHAR) || ': a value must be finite (or null)')]
           WHEN json_type(latency_j) = 'DOUBLE' AND NOT isfinite(CAST(latency_j AS DOUBLE))
           THEN [struct_pack(field := 'performance.latency_ms', error := 'non-finite number '
                   || CAST(latency_j AS VARCHAR) || ': a value must be finite (or null)')]
           ELSE [] END) AS bad
FROM t
