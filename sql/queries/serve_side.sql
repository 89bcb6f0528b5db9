-- one run at a time: an equality on run_id is pushed through the resolution views, a list is not
SELECT key, seed, metric, value, left(skip_reason, $cut) AS skip_reason,
       coalesce(errored, false) AS errored FROM int_key_scores
WHERE run_id = $run AND task_id = $task AND metric IN ($metric, 'steps', 'elapsed_sec')
