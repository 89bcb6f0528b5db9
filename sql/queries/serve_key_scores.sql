-- Every metric of one run's $key (int_key_scores; one run a query: the equality on run_id is
-- pushed through the resolution views, a list is not).
SELECT run_id, task_id, metric, value, left(skip_reason, $cut) AS skip_reason
FROM int_key_scores
WHERE run_id = $run AND key = $key
ORDER BY metric
LIMIT $limit
