-- the hylo reader's validating path (ingest/_hylo_checked.py): one row per good log, from
-- the parsed top-level members (_top) and its good samples (_ok); a log in _bad is left out.
-- Fields: v02_run (the member of a rewritten v0.2 log holding its run fields).
SELECT file_idx, run_id->>'$' AS run_id,
       version->>'$' AS source_format,
       benchmark->>'$.id' AS benchmark_id,
       benchmark->>'$.version' AS benchmark_version,
       benchmark->>'$.digest' AS benchmark_digest,
       benchmark->>'$.split' AS split,
       CAST(json_extract(benchmark, '$.requires_privileged') AS BOOLEAN) AS requires_privileged,
       CAST(json_extract(benchmark, '$.episodes_per_task') AS BIGINT) AS episodes_per_task,
       CASE WHEN json_type(benchmark, '$.max_steps') = 'OBJECT'
            THEN CAST(json_extract(benchmark, '$.max_steps') AS VARCHAR) END AS max_steps,
       CASE WHEN json_type(benchmark, '$.upstream') = 'OBJECT'
            THEN CAST(json_extract(benchmark, '$.upstream') AS VARCHAR) END
           AS benchmark_upstream,
       agent->>'$.name' AS agent_name,
       agent->>'$.version' AS agent_version,
       CAST(json_extract(agent, '$.components') AS VARCHAR) AS agent_components,
       parent_run_id->>'$' AS parent_run_id,
       CAST(results AS VARCHAR) AS results,
       coalesce(extra->>'$."{v02_run}".status',
                CASE WHEN json_type(top_status) = 'VARCHAR' THEN top_status->>'$' END)
           AS status,
       coalesce(extra->>'$."{v02_run}".created',
                CASE WHEN json_type(top_created) = 'VARCHAR' THEN top_created->>'$' END)
           AS created,
       CASE WHEN json_type(top_errors_policy) = 'VARCHAR'
            THEN top_errors_policy->>'$' END AS errors_policy,
       coalesce(n.n, 0) AS n_samples,
       CASE WHEN json_merge_patch(extra, '{{"{v02_run}": null}}') <> '{{}}'
            THEN json_merge_patch(extra, '{{"{v02_run}": null}}') END AS extra
FROM _top
LEFT JOIN (SELECT file_idx, count(*) AS n FROM _ok GROUP BY file_idx) AS n USING (file_idx)
WHERE file_idx NOT IN (SELECT file_idx FROM _bad)
ORDER BY file_idx
