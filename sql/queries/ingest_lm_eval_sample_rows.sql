-- the lm-eval reader (ingest/formats/lm_eval): one sample per (run, task, doc_id) of the good
-- samples files, keyed '<task>#<doc_id>', the first line's hashes and target in extra.
SELECT r.batch_idx AS file_idx, r.run_id, f.task || '#' || s.doc_id AS key, f.task AS task_id,
       s.doc_id AS seed, 1 AS epoch, f.task || '#' || s.doc_id AS episode_id,
       'scored' AS status, 'none' AS trace_status, arg_min(s.extra, s.line) AS extra
FROM _lm_s AS s
JOIN _lm_sf AS f ON f.sf = s.file_idx
JOIN _lm_run AS r ON r.batch_idx = f.owner
WHERE NOT f.bad
GROUP BY r.batch_idx, r.run_id, f.task, s.doc_id
ORDER BY r.batch_idx, min(s.file_idx), min(s.line)
