-- one score per (key, epoch, metric): the one score resolution. A score is its value, or
-- {{value, explanation?, skip_reason?}} when it has an explanation or an abstention whose
-- reason is not the one the reader derives ('episode errored' for an errored sample,
-- else 'abstained')
-- {{preferred}}: the resolved scores of $runs (hylo_analytics.resolution.preferred_query)
WITH p AS ({preferred}), s AS (
    SELECT p.key, p.epoch, p.metric, p.value, p.explanation,
           CASE WHEN p.value IS NULL AND p.skip_reason IS DISTINCT FROM
                     CASE WHEN st.status = 'error' THEN 'episode errored' ELSE 'abstained' END
                THEN p.skip_reason END AS why
    FROM p LEFT JOIN (SELECT key, epoch, status FROM stg_samples WHERE run_id = $run) AS st
        ON st.key = p.key AND st.epoch = p.epoch
)
SELECT key, epoch,
       '{{' || string_agg(to_json(metric) || ':' || CASE
            WHEN explanation IS NULL AND why IS NULL
            THEN coalesce(CAST(to_json(value) AS VARCHAR), 'null')
            ELSE '{{"value":' || coalesce(CAST(to_json(value) AS VARCHAR), 'null')
                 || coalesce(',"explanation":' || CAST(to_json(explanation) AS VARCHAR), '')
                 || coalesce(',"skip_reason":' || CAST(to_json(why) AS VARCHAR), '') || '}}' END,
            ',' ORDER BY metric) || '}}' AS scores
FROM s GROUP BY key, epoch
