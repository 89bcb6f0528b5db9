-- the epochs of a run's key and what finds each one's sample in the log it came from
SELECT r.source_format, r.source_path, s.epoch,
       coalesce(json_extract_string(s.extra, '$.sample_id'),
                substr(s.key, strpos(s.key, '#') + 1)) AS sample_id
FROM samples AS s INNER JOIN runs AS r ON r.run_id = s.run_id
WHERE s.run_id = $run AND s.key = $key ORDER BY s.epoch LIMIT $limit
