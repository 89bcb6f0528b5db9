SELECT key, left(first(status ORDER BY epoch), $cut) AS status FROM samples
WHERE run_id = $run AND task_id = $task GROUP BY key
