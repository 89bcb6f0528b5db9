-- the vla-eval export reader (ingest/formats/vla_eval/aggregate.py): each good episode's
-- metrics, steps and elapsed_sec; an episode with a failure_reason never reached an outcome
-- (the harness records success false for it): every value abstains with its reason, and the
-- run's errors convention (failure, vla-eval's) counts its success as a failure.
WITH ep AS (
    SELECT c.*, i.run_id FROM _vag_ep AS c JOIN _vag_ids AS i USING (file_idx)
), m AS (
    SELECT file_idx, run_id, task_idx, ep_idx, key, task, k, failure_reason, metric, value
    FROM ep WHERE metric IS NOT NULL
    UNION ALL
    SELECT DISTINCT file_idx, run_id, task_idx, ep_idx, key, task, k, failure_reason,
           unnest(['steps', 'elapsed_sec']), unnest([steps_v, elapsed_v])
    FROM ep
)
SELECT file_idx, run_id, key, task AS task_id, k AS seed, 1 AS epoch, key AS episode_id, metric,
       CASE WHEN failure_reason IS NULL THEN value END AS value,
       failure_reason IS NULL AND value IS NOT NULL AS valid,
       CASE WHEN failure_reason IS NOT NULL THEN 'harness error: ' || failure_reason
            WHEN value IS NULL THEN 'not recorded' END AS skip_reason,
       'evallog' AS source, 'imported' AS source_kind
FROM m
ORDER BY file_idx, task_idx, ep_idx, metric
