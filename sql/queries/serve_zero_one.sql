-- whether every valid success value of a run is 0 or 1: the rule by which Store.compare
-- decides that an errored abstention may count as a failure (read only under "failure")
SELECT coalesce(bool_and(value IN (0, 1)) FILTER (WHERE value IS NOT NULL), true) AS zero_one
FROM int_key_scores WHERE run_id = $run AND metric = $metric
