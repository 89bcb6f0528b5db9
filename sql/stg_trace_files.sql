-- Current rows of trace_files: the trace files a run's events were read from, each stored
-- once (its text whole), superseded with its run like the run's events.
-- An event's raw line is line `idx` of the file its sample names (samples.trace_path = path);
-- events.raw holds only grade events' lines (a trace's and a grader's) and, in a store written
-- before this table existed, every line.
-- Grain: one row per (run_id, path).
with source as (
    select * from current_rows('trace_files')
)

select * from source
