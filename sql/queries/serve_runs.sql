SELECT run_id, left(agent_name, $cut) AS agent_name, left(agent_version, $cut) AS agent_version,
       left(benchmark_id, $cut) AS benchmark_id, left(split, $cut) AS split,
       left(source_format, $cut) AS source_format, n_samples, n_tasks, n_errors, n_traces,
       ingested_at, count(*) OVER () AS n_matching
FROM mart_runs
WHERE $q IS NULL OR concat_ws(' ', run_id, agent_name, agent_version, benchmark_id, split,
                              source_format) ILIKE '%' || $q || '%'
