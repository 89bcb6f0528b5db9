-- the expected-actions scorer (scoring/_actions.py), step 1: one row per episode of the
-- records, with its expected list (ev) and why it abstains: no trace, a missing or malformed
-- expected list, no spans. Fields: ep (the table made), ev (the expected list's SQL),
-- records, runs (relations); $where names the list (its path, or 'actions').
create temp table {ep} as
with r as (select *, {ev} as ev from {records}),
sp as (
    select run_id, episode_id, count(*) as n_spans from stg_events
    where run_id in (select run_id from {runs}) and type = 'span'
    group by all
)
select r.run_id, r.key, r.task_id, r.seed, r.epoch, r.episode_id, r.ev,
    case when json_extract(r.record, '$.trace') is null
         then 'no trace (trace_status=' || coalesce(
             json_extract_string(r.record, '$.sample.trace_status'), 'none') || ')'
         when r.ev is null then 'missing path: ' || $where
         when json_type(r.ev) <> 'ARRAY' then 'not a list at ' || $where || ': '
             || left(cast(r.ev as varchar), 60)
         when json_array_length(r.ev) = 0 then 'no expected actions'
         when coalesce(sp.n_spans, 0) = 0 then 'no spans in the trace'
    end as why
from r left join sp on sp.run_id = r.run_id and sp.episode_id = r.episode_id
