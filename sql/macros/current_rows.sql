-- The tombstone filter, the table macro current_rows('<table>') (hylo_analytics._sql): the rows
-- of {{rows}} (raw_<table>) whose batch is not older than the newest run-wide (source-less)
-- tombstone of their run for {{table}}. A join on one number per run, not a correlated search
-- through every tombstone. Sourced tombstones (a re-score of one scorer, a re-run grader) cover
-- only their source's rows: stg_scores and stg_events add them. DuckDB runs it as a macro
-- ({{rows}} = query_table('raw_' || tbl)); Spark gets it inlined as a subquery.
select s.* from {rows} as s
left join (
    select run_id, max(batch_seq) as dead_before
    from raw_tombstones
    where table_name = {table} and source is null
    group by run_id
) as d on d.run_id = s.run_id
where d.dead_before is null or s.batch_seq >= d.dead_before
