-- the errored keys of a run's success (one run at a time: the equality is pushed down)
SELECT count(*) FILTER (WHERE errored) AS n_errors FROM int_key_scores
WHERE run_id = $run AND metric = $metric
