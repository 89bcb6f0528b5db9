-- the lm-eval reader (ingest/formats/lm_eval): one row per figure of the results documents
-- in _lm (file_idx, raw): each task's "<metric>,<filter>" value (its "_stderr" beside it) in
-- the current layout (results an object of tasks; a group's own row is left out, it is the
-- subtasks' figure), each record's one metric in the 2022 layout (results a list of
-- {{task_name, prompt_name, <metric>: value}}, task '<task_name>/<prompt_name>'). n is what
-- the task evaluated (n-samples.<task>.effective, else its sample_len); aggregation the
-- task config's for the metric; direction the file's higher_is_better.<task>.<metric>
-- (maximize when true).
WITH d AS (
    SELECT file_idx, CAST(raw AS JSON) AS doc FROM _lm
), groups AS (
    SELECT d.file_idx, g.key AS task FROM d, json_each(d.doc, '$.groups') AS g
    UNION
    SELECT d.file_idx, g.key FROM d, json_each(d.doc, '$.group_subtasks') AS g
), tasks AS (
    SELECT d.file_idx, d.doc, CAST(t.id AS BIGINT) AS ord, t.key AS task, t.value AS r
    FROM d, json_each(d.doc, '$.results') AS t
    WHERE json_type(d.doc, '$.results') = 'OBJECT'
      AND NOT EXISTS (SELECT 1 FROM groups AS g WHERE g.file_idx = d.file_idx AND g.task = t.key)
), current AS (
    SELECT t.file_idx, t.ord, t.task, k.key AS metric, k.value AS v,
           split_part(k.key, ',', 1) AS base,
           substr(k.key, strpos(k.key, ',') + 1) AS filter,
           json_extract(t.r, '$."' || replace(split_part(k.key, ',', 1), '"', '\"') || '_stderr,'
                        || replace(substr(k.key, strpos(k.key, ',') + 1), '"', '\"') || '"')
               AS stderr,
           coalesce(TRY_CAST(json_extract(t.doc, '$."n-samples"."' || replace(t.task, '"', '\"')
                                          || '".effective') AS BIGINT),
                    TRY_CAST(json_extract(t.r, '$.sample_len') AS BIGINT)) AS n,
           json_extract(t.doc, '$.configs."' || replace(t.task, '"', '\"') || '".metric_list')
               AS metric_list,
           CASE CAST(json_extract(t.doc, '$.higher_is_better."' || replace(t.task, '"', '\"')
                                  || '"."' || replace(split_part(k.key, ',', 1), '"', '\"')
                                  || '"') AS VARCHAR)
               WHEN 'true' THEN 'maximize' WHEN 'false' THEN 'minimize' END AS direction
    FROM tasks AS t, json_each(t.r) AS k
    WHERE json_type(t.r) = 'OBJECT' AND contains(k.key, ',')
      AND NOT ends_with(split_part(k.key, ',', 1), '_stderr')
), old AS (
    SELECT d.file_idx, CAST(e.id AS BIGINT) AS ord,
           (e.value ->> '$.task_name') || '/' || coalesce(e.value ->> '$.prompt_name', '') AS task,
           k.key AS metric, k.value AS v
    FROM d, json_each(d.doc, '$.results') AS e, json_each(e.value) AS k
    WHERE json_type(d.doc, '$.results') = 'ARRAY' AND json_type(e.value) = 'OBJECT'
      AND k.key NOT IN ('task_name', 'prompt_name', 'dataset_path', 'dataset_name', 'subset')
)
SELECT file_idx, ord, task, metric, base, filter, json_type(v) AS vt,
       CASE WHEN json_type(v) IN ('DOUBLE', 'BIGINT', 'UBIGINT') THEN CAST(v AS DOUBLE) END AS value,
       CAST(stderr AS VARCHAR) AS stderr, n,
       (SELECT any_value(m ->> '$.aggregation') FROM (SELECT unnest(CAST(metric_list AS JSON[])) AS m)
        WHERE m ->> '$.metric' = base) AS aggregation, direction
FROM current
UNION ALL
SELECT file_idx, ord, task, metric, metric, NULL, json_type(v),
       CASE WHEN json_type(v) IN ('DOUBLE', 'BIGINT', 'UBIGINT') THEN CAST(v AS DOUBLE) END,
       NULL, NULL, NULL, NULL
FROM old
