-- Current rows of trace_files: the trace files a run's events were read from, each stored
-- once (its text whole), superseded with its run like the run's events.
-- An event's raw line is line `idx` of the file its sample names (samples.trace_path = path);
-- events.raw holds only grade events' lines (a trace's and a grader's) and, in a store written
-- before this table existed, every line.
-- Grain: one row per (run_id, path).
with source as (
    select * from raw_trace_files
),

dead as (
    select run_id, max(batch_seq) as dead_before
    from raw_tombstones
    where table_name = 'trace_files'
    group by run_id
),

final as (
    select s.*
    from source as s
    left join dead as d on d.run_id = s.run_id
    where d.dead_before is null or s.batch_seq >= d.dead_before
)

select * from final
