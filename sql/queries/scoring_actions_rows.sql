-- the scorer's rows (RESULT_COLUMNS), one per episode: the value of its hits by the check
-- ($check, $mode), why it abstains, what failed. Fields: hit (the positions met, a select),
-- ep, exp, calls. $metric, $source, $version, $metadata: the scorer's.
with hit as ({hit}),
per as (
    select x.run_id, x.episode_id, count(*) as n, count(h.hit) as n_hit,
        min(x.pos) filter (where h.hit is null) as first_miss,
        arg_min(
            cast(to_json(x.ename) as varchar)
            || case when $check <> 'selection'  -- the arguments are part of what failed
                    then coalesce(' ' || cast(x.eargs as varchar), '') else '' end,
            x.pos
        ) filter (where h.hit is null) as miss_label,
        cast(to_json(list(x.ename order by x.pos)) as varchar) as wanted
    from {exp} as x left join hit as h
      on h.run_id = x.run_id and h.episode_id = x.episode_id and h.pos = x.pos
    group by x.run_id, x.episode_id
),
c as (
    select run_id, episode_id, count(*) as n_calls,
        cast(to_json(list(cname order by cpos)) as varchar) as called
    from {calls} group by run_id, episode_id
),
j as (
    select e.*, p.n, p.n_hit, p.first_miss, p.miss_label, p.wanted,
        coalesce(cc.n_calls, 0) as n_calls, coalesce(cc.called, '[]') as called
    from {ep} as e
    left join per as p on p.run_id = e.run_id and p.episode_id = e.episode_id
    left join c as cc on cc.run_id = e.run_id and cc.episode_id = e.episode_id
),
scored as (
    select *,
        case when $check = 'exact_sequence'
             then case when n_hit = n and n_calls = n then 1.0 else 0.0 end
             when $mode = 'fraction' then cast(n_hit / n as double)
             else cast(case when n_hit = n then 1 else 0 end as double)
        end as score,
        case when $check = 'exact_sequence'
             then case when not (n_hit = n and n_calls = n)
                       then 'called ' || called || ' != expected ' || wanted end
             when n_hit < n
             then 'expected action ' || first_miss || ' ' || miss_label || ' '
                  || case $check when 'sequence' then 'not called after the previous match'
                                 when 'arguments' then 'not called with matching arguments'
                                 else 'not called' end
                  || case when n - n_hit > 1 then ' (' || (n - n_hit) || ' of ' || n
                          || ' expected actions failed)' else '' end
        end as failed
    from j
)
select run_id, key, task_id, seed, epoch, episode_id,
    $metric as metric,
    case when why is null then score end as value,
    why is null as valid, why as skip_reason,
    case when why is null then failed end as explanation,
    $source as source, 'score' as source_kind,
    $version as scorer_version,
    $metadata as metadata,
    coalesce(starts_with(why, 'missing path') or starts_with(why, 'not a list')
             or starts_with(why, 'expected action'), false) as is_error
from scored
order by run_id, key, epoch
