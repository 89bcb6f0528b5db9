-- score rows from the grade events of the runs: the metric is the grade's name, the source
-- grade:<grader>, the last grade of a name per grader and episode counts; a boolean is 1/0,
-- a non-numeric value a skip reason (scoring/_builtin.py, grades_sql). Fields:
-- events_where, samples_where (the run filter on each side, or true), version (the grade
-- rows' scorer version, an SQL string literal).
with g as (
    select e.run_id, e.episode_id, e.idx, e.grader, e.name, e.explanation,
           json_extract(e.raw, '$.value') as v
    from stg_events as e
    where e.type = 'grade' and {events_where}
),
last as (
    select * from g
    qualify row_number() over (
        partition by run_id, episode_id, grader, name order by idx desc) = 1
),
typed as (
    select *,
        case when v is null or json_type(v) = 'NULL' then 'grader abstained'
             when json_type(v) not in ('BOOLEAN', 'BIGINT', 'UBIGINT', 'DOUBLE')
             then 'non-numeric grade value: ' || left(cast(v as varchar), 80) end as why
    from last
)
select s.run_id, s.key, s.task_id, s.seed, s.epoch, s.episode_id,
       coalesce(t.name, 'grade') as metric,
       cast(case when t.why is null then
           case when json_type(t.v) = 'BOOLEAN'
                then case when try_cast(t.v as boolean) then 1.0 else 0.0 end
                else try_cast(t.v as double) end
       end as double) as value,
       t.why is null as valid,
       t.why as skip_reason,
       t.explanation,
       'grade:' || coalesce(t.grader, 'unknown') as source,
       'observation' as source_kind,
       {version} as scorer_version,
       cast(null as varchar) as metadata,
       t.why is not null and t.why <> 'grader abstained' as is_error
from typed as t
join stg_samples as s on s.run_id = t.run_id and s.episode_id = t.episode_id
where {samples_where}
