-- the figures a harness published without their samples (ingest/_counted.py): _figures
-- (file_idx, run_id, task_id, metric, value, n, ord, direction: the metric's declared
-- direction or null) as rows. A rate of a known count n
-- (value * n a whole number k) becomes n "counted" rows, k of them 1 and the others 0, keyed
-- '<task>#counted:<i>@<run_id>' (never another run's key: nothing pairs them); any other
-- figure one "summary" row keyed '<task>#summary@<run_id>', its value the figure.
-- Fields: max_counted (the most rows one figure may become).
WITH f AS (
    SELECT *, round(value * n) AS k,
           n IS NOT NULL AND n BETWEEN 1 AND {max_counted} AND value BETWEEN 0 AND 1
               AND abs(value * n - round(value * n)) < 1e-6 AS counted
    FROM _figures
), rows AS (
    SELECT file_idx, run_id, task_id, metric, ord, 'counted' AS kind, CAST(k AS BIGINT) AS k, n,
           unnest(range(1, CAST(n AS BIGINT) + 1)) AS i, value, direction
    FROM f WHERE counted
    UNION ALL
    SELECT file_idx, run_id, task_id, metric, ord, 'summary', NULL, n, NULL, value, direction
    FROM f WHERE NOT counted
)
SELECT file_idx, run_id, task_id, metric, ord, kind, k, n, i, direction,
       CASE WHEN kind = 'counted' THEN task_id || '#counted:' || i || '@' || run_id
            ELSE task_id || '#summary@' || run_id END AS key,
       CASE WHEN kind = 'counted' THEN CASE WHEN i <= k THEN 1.0 ELSE 0.0 END
            WHEN isfinite(value) THEN value END AS value
FROM rows
