-- the lm-eval reader (ingest/formats/lm_eval): one row per (line, metric) of the
-- --log_samples files in _lm_lines (file_idx, line, raw): the line's doc_id and filter,
-- each metric it names (its "metrics" list, else every field that is not one of a sample's
-- own) and that metric's value, typed: a number or a boolean is a per-sample score, a list
-- (a corpus metric's [gold, predicted] pair) is not one; bad is what is wrong with the line.
-- Fields: checks (the field checks, compiled by ingest/_sqlcheck.py).
WITH l AS (
    SELECT file_idx, line, raw, {checks} AS bad,
           CASE WHEN json_type(raw, '$.metrics') = 'ARRAY'
                THEN json_extract_string(raw, '$.metrics[*]')
                ELSE list_filter(json_keys(raw), lambda k: k NOT IN (
                    'doc_id', 'doc', 'target', 'arguments', 'resps', 'filtered_resps', 'filter',
                    'metrics', 'doc_hash', 'prompt_hash', 'target_hash')) END AS names
    FROM _lm_lines WHERE raw IS NOT NULL
), m AS (
    SELECT *, unnest(CASE WHEN len(names) > 0 THEN names ELSE [NULL] END) AS name FROM l
)
SELECT file_idx, line, bad, TRY_CAST(json_extract(raw, '$.doc_id') AS BIGINT) AS doc_id,
       coalesce(raw ->> '$.filter', 'none') AS filter, name,
       json_type(json_extract(raw, '$."' || replace(name, '"', '\"') || '"')) AS vt,
       CASE json_type(json_extract(raw, '$."' || replace(name, '"', '\"') || '"'))
           WHEN 'BOOLEAN' THEN CASE WHEN CAST(json_extract(raw, '$."' || replace(name, '"', '\"')
                                                              || '"') AS BOOLEAN) THEN 1.0 ELSE 0.0 END
           WHEN 'DOUBLE' THEN CAST(json_extract(raw, '$."' || replace(name, '"', '\"') || '"') AS DOUBLE)
           WHEN 'BIGINT' THEN CAST(json_extract(raw, '$."' || replace(name, '"', '\"') || '"') AS DOUBLE)
           WHEN 'UBIGINT' THEN CAST(json_extract(raw, '$."' || replace(name, '"', '\"') || '"') AS DOUBLE)
       END AS value,
       CAST(json_object('doc_hash', raw ->> '$.doc_hash', 'prompt_hash', raw ->> '$.prompt_hash',
                        'target_hash', raw ->> '$.target_hash',
                        'target', json_extract(raw, '$.target')) AS VARCHAR) AS extra
FROM m
