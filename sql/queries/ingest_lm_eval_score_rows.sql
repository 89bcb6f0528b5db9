-- the lm-eval reader (ingest/formats/lm_eval): one score per (sample, metric, filter) its
-- samples file scores (_lm_covered), named '<metric>,<filter>' as the results file names it;
-- a non-finite value (the harness may write NaN) abstains; metadata carries the metric's
-- declared direction.
SELECT r.batch_idx AS file_idx, r.run_id, f.task || '#' || s.doc_id AS key, f.task AS task_id,
       s.doc_id AS seed, 1 AS epoch, f.task || '#' || s.doc_id AS episode_id,
       s.name || ',' || s.filter AS metric,
       CASE WHEN isfinite(s.value) THEN s.value END AS value, isfinite(s.value) AS valid,
       CASE WHEN NOT isfinite(s.value) THEN 'non-finite value: ' || CAST(s.value AS VARCHAR) END
           AS skip_reason,
       'evallog' AS source, 'imported' AS source_kind,
       CASE WHEN c.direction IS NOT NULL
            THEN CAST(json_object('direction', c.direction) AS VARCHAR) END AS metadata
FROM _lm_s AS s
JOIN _lm_sf AS f ON f.sf = s.file_idx
JOIN _lm_run AS r ON r.batch_idx = f.owner
JOIN _lm_covered AS c
    ON c.run_id = r.run_id AND c.task = f.task AND c.metric = s.name || ',' || s.filter
ORDER BY r.batch_idx, s.file_idx, s.line, metric
