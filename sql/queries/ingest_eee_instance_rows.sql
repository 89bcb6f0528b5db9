-- the Every Eval Ever reader (ingest/formats/every_eval_ever): the score rows of the good
-- instance files (_eee_i joined to _eee_ids): score, is_correct, token counts and latency
-- where the lines record them; an instance with an error abstains with it.
WITH i AS (
    SELECT i.*, d.run_id, i.evaluation_name || '#' || i.sample_id AS key
    FROM _eee_i AS i JOIN _eee_ids AS d USING (file_idx)
), m AS (
    SELECT *, unnest([
        struct_pack(metric := 'score', v := score, has := has_score, outcome := true),
        struct_pack(metric := 'is_correct', v := is_correct, has := has_correct, outcome := true),
        struct_pack(metric := 'llm.tokens.input', v := tokens_in, has := tokens_in IS NOT NULL, outcome := false),
        struct_pack(metric := 'llm.tokens.output', v := tokens_out, has := tokens_out IS NOT NULL, outcome := false),
        struct_pack(metric := 'latency_ms', v := latency_ms, has := latency_ms IS NOT NULL, outcome := false)
    ]) AS m
    FROM i
)
SELECT file_idx, run_id, key, evaluation_name AS task_id, coalesce(TRY_CAST(sample_id AS BIGINT), line - 1) AS seed,
       1 AS epoch, key AS episode_id, m.metric AS metric,
       CASE WHEN error IS NULL OR NOT m.outcome THEN m.v END AS value,
       (error IS NULL OR NOT m.outcome) AND m.v IS NOT NULL AS valid,
       CASE WHEN error IS NOT NULL AND m.outcome THEN 'sample error: ' || error
            WHEN m.v IS NULL THEN 'not recorded' END AS skip_reason,
       'evallog' AS source, 'imported' AS source_kind
FROM m WHERE m.has OR error IS NOT NULL AND m.outcome
ORDER BY file_idx, line, metric
