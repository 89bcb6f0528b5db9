-- The stored sample rows of a run's episode at $key (every epoch), each text cut at $cut
-- characters in DuckDB, with the length of extra (whether the page links to the whole).
SELECT episode_id, epoch, left(status, $cut) AS status, trace_status,
       left(extra, $cut) AS extra, length(extra) AS extra_chars
FROM samples
WHERE run_id = $run AND key = $key
ORDER BY epoch, episode_id
LIMIT $limit
