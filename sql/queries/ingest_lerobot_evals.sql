-- the LeRobot reader (ingest/formats/lerobot): one row per evaluation of every document in
-- _lr (file_idx, raw): the document itself when it holds per_task or per_episode, else each
-- of its members that does (a file of several checkpoints: "eval_results_400": {{...}}).
WITH d AS (
    SELECT file_idx, CAST(raw AS JSON) AS doc FROM _lr
), top AS (
    SELECT file_idx, 0 AS ev_idx, CAST(NULL AS VARCHAR) AS checkpoint, doc AS ev FROM d
    WHERE json_type(doc, '$.per_task') IS NOT NULL OR json_type(doc, '$.per_episode') IS NOT NULL
), nested AS (
    SELECT d.file_idx, CAST(j.id AS BIGINT) AS ev_idx, j.key AS checkpoint, j.value AS ev
    FROM d, json_each(d.doc) AS j
    WHERE d.file_idx NOT IN (SELECT file_idx FROM top) AND j.type = 'OBJECT'
      AND (json_type(j.value, '$.per_task') IS NOT NULL
           OR json_type(j.value, '$.per_episode') IS NOT NULL)
)
SELECT * FROM top
UNION ALL
SELECT * FROM nested
