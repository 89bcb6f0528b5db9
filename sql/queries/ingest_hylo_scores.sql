-- the validating path's score rows: one per (sample, metric) any sample of the log reports,
-- a metric a sample omits an abstention; booleans count 1/0, a non-numeric value a skip
-- reason. Fields: numeric (the JSON types read as numbers, an SQL list).
WITH smp AS (
    SELECT file_idx, sample_idx, run_id, key, task_id, seed, epoch, scores, status,
           coalesce(episode_id, key || CASE WHEN epoch > 1 THEN '@' || CAST(epoch AS VARCHAR) ELSE '' END) AS episode_id
    FROM _ok WHERE json_type(scores) = 'OBJECT'
), ent AS (
    SELECT * EXCLUDE (scores),
           unnest(map_entries(json_transform(scores, '"MAP(VARCHAR, JSON)"'))) AS me
    FROM smp
), val AS (
    SELECT * EXCLUDE (me), me.key AS metric,
           CASE WHEN json_type(me.value) = 'OBJECT' THEN json_extract(me.value, '$.value')
                ELSE me.value END AS v,
           CASE WHEN json_type(me.value) = 'OBJECT' THEN me.value->>'$.explanation' END AS explanation,
           CASE WHEN json_type(me.value) = 'OBJECT' THEN me.value->>'$.skip_reason' END AS given_reason
    FROM ent
), unreported AS (
    -- a metric some sample of the log reports is an abstention where another omits it
    SELECT s.* EXCLUDE (scores), m.metric, NULL::JSON AS v, NULL AS explanation,
           NULL AS given_reason
    FROM smp AS s
    JOIN (SELECT DISTINCT file_idx, metric FROM val) AS m USING (file_idx)
    ANTI JOIN val AS x
        ON x.file_idx = s.file_idx AND x.sample_idx = s.sample_idx AND x.metric = m.metric
), allv AS (
    SELECT * FROM val UNION ALL BY NAME SELECT * FROM unreported
)
SELECT file_idx, run_id, key, task_id, seed, epoch, episode_id, metric,
       CASE WHEN json_type(v) = 'BOOLEAN' THEN CASE WHEN CAST(v AS BOOLEAN) THEN 1.0 ELSE 0.0 END
            WHEN json_type(v) IN {numeric} THEN CAST(v AS DOUBLE) END AS value,
       coalesce(json_type(v) IN {numeric}, false) AS valid,
       -- an abstention's reason as the log gives it ({{value, skip_reason}}: how the
       -- exporter keeps one), else the reader's: errored, abstained, non-numeric
       CASE WHEN json_type(v) IN {numeric} THEN NULL
            WHEN given_reason IS NOT NULL THEN given_reason
            WHEN (v IS NULL OR json_type(v) = 'NULL') AND status = 'error'
            THEN 'episode errored'
            WHEN v IS NULL OR json_type(v) = 'NULL' THEN 'abstained'
            ELSE 'non-numeric value: ' || left(CAST(v AS VARCHAR), 80) END AS skip_reason,
       explanation,
       'evallog' AS source,
       'imported' AS source_kind
FROM allv
