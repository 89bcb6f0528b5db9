-- the Every Eval Ever reader (ingest/formats/every_eval_ever): one row per
-- evaluation_results[j] of the aggregate documents in _eee_a (file_idx, raw): its task
-- (evaluation_name), metric (metric_config.metric_id, else 'score'), score, and the count
-- behind it: score_details.uncertainty.num_samples, else the number of
-- source_data.sample_ids (source_data.samples_number is the dataset's size, not a count of
-- what was evaluated); direction from metric_config.lower_is_better (maximize when it is
-- false); bad lists what is wrong with it.
-- Fields: checks (the field checks, compiled by ingest/_sqlcheck.py).
WITH d AS (
    SELECT file_idx, CAST(raw AS JSON) AS doc FROM _eee_a
), r AS (
    SELECT d.file_idx, CAST(e.key AS BIGINT) AS j, e.value AS r
    FROM d, json_each(d.doc, '$.evaluation_results') AS e
    WHERE json_type(d.doc, '$.evaluation_results') = 'ARRAY'
)
SELECT file_idx, j, r ->> '$.evaluation_name' AS task_id,
       coalesce(r ->> '$.metric_config.metric_id', 'score') AS metric,
       TRY_CAST(json_extract(r, '$.score_details.score') AS DOUBLE) AS value,
       coalesce(TRY_CAST(json_extract(r, '$.score_details.uncertainty.num_samples') AS BIGINT),
                CASE WHEN json_type(r, '$.source_data.sample_ids') = 'ARRAY'
                     THEN CAST(json_array_length(r, '$.source_data.sample_ids') AS BIGINT) END) AS n,
       CASE CAST(json_extract(r, '$.metric_config.lower_is_better') AS VARCHAR)
           WHEN 'true' THEN 'minimize' WHEN 'false' THEN 'maximize' END AS direction,
       list_concat({checks}, CASE
           WHEN json_type(r, '$.score_details.score') = 'DOUBLE'
                AND NOT isfinite(CAST(json_extract(r, '$.score_details.score') AS DOUBLE))
           THEN [struct_pack(field := 'score_details.score', error := 'non-finite number '
                   || (r ->> '$.score_details.score') || ': a score must be finite')]
           ELSE [] END) AS bad
FROM r
