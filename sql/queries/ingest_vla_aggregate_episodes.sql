-- the vla-eval export reader (ingest/formats/vla_eval/aggregate.py): one row per (episode,
-- metric) of the <benchmark>_aggregate.json documents in _vag (file_idx, raw): tasks[t]
-- .episodes[e] {{sid, eid, episode_id, metrics, steps, elapsed_sec, <context>, failure_reason,
-- failure_detail}}; the start state is the context's episode_idx, else episode_id. Values stay
-- JSON: the checks read their types.
WITH t AS (
    SELECT a.file_idx, CAST(t.key AS BIGINT) AS task_idx, t.value AS t
    FROM _vag AS a, json_each(a.raw, '$.tasks') AS t
    WHERE json_type(a.raw, '$.tasks') = 'ARRAY'
), e AS (
    SELECT t.file_idx, t.task_idx, t.t ->> '$.task' AS task, json_type(t.t, '$.task') AS task_type,
           CAST(e.key AS BIGINT) AS ep_idx, e.value AS e
    FROM t, json_each(t.t, '$.episodes') AS e
    WHERE json_type(t.t, '$.episodes') = 'ARRAY'
), m AS (
    SELECT *, CASE WHEN json_type(e, '$.metrics') = 'OBJECT'
                   THEN json_keys(e, '$.metrics') ELSE [] END AS names
    FROM e
)
SELECT file_idx, task_idx, ep_idx, task, task_type,
       coalesce(json_extract(e, '$.episode_idx'), json_extract(e, '$.episode_id')) AS start,
       json_extract(e, '$.episode_id') AS episode_ref, json_type(e, '$.metrics') AS metrics_type,
       e ->> '$.sid' AS sid, e ->> '$.eid' AS eid,
       e ->> '$.failure_reason' AS failure_reason, e ->> '$.failure_detail' AS failure_detail,
       json_extract(e, '$.steps') AS steps, json_extract(e, '$.elapsed_sec') AS elapsed_sec,
       unnest(CASE WHEN len(names) > 0 THEN names ELSE [NULL] END) AS metric,
       e
FROM m
