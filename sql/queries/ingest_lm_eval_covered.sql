-- the lm-eval reader (ingest/formats/lm_eval): the (run, task, metric) its samples score:
-- a good samples file's numeric or boolean values of a metric the task config aggregates by
-- its mean (or names no aggregation for); the other figures come from the results file.
-- direction: the metric's as the results file declares it (higher_is_better), or null.
SELECT r.run_id, f.task, s.name || ',' || s.filter AS metric, any_value(g.direction) AS direction
FROM _lm_s AS s
JOIN _lm_sf AS f ON f.sf = s.file_idx
JOIN _lm_run AS r ON r.batch_idx = f.owner
LEFT JOIN _lm_f AS g
    ON g.file_idx = r.local_idx AND g.task = f.task AND g.metric = s.name || ',' || s.filter
WHERE NOT f.bad AND s.vt IN ('BOOLEAN', 'DOUBLE', 'BIGINT', 'UBIGINT')
  AND coalesce(g.aggregation, 'mean') = 'mean'
GROUP BY ALL
