-- One score per (run_id, key, epoch, metric), picked from every current source by precedence:
--   1. a row with a value beats an abstention (an abstention never hides evidence: the
--      scorer abstaining on a sample without a trace must not hide the EvalLog's value);
--   2. then by source_kind: score (re-scored from the trace) > derived > observation
--      (grades: VLM judge, operator) > imported (the EvalLog's own scores) > anything else;
--   3. then by source name, so the pick is deterministic.
-- ambiguous is true when another source of the picked row's kind (and validity) gives a
-- different value. n_sources / n_abstained count every candidate, so nothing is hidden.
with scores as (
    select * from stg_scores
),

ranked as (
    select
        *,
        case source_kind
            when 'score' then 1
            when 'derived' then 2
            when 'observation' then 3
            when 'imported' then 4
            else 5
        end as kind_rank,
        case when value is not null then 0 else 1 end as abstain_rank
    from scores
),

ordered as (
    select
        *,
        row_number() over (
            partition by run_id, key, epoch, metric
            order by abstain_rank, kind_rank, source
        ) as rn,
        count(*) over (partition by run_id, key, epoch, metric) as n_sources,
        count(*) over (partition by run_id, key, epoch, metric) - count(value) over (
            partition by run_id, key, epoch, metric
        ) as n_abstained
    from ranked
),

peers as (
    -- distinct values among the sources tied with the pick on (validity, kind)
    select
        run_id,
        key,
        epoch,
        metric,
        abstain_rank,
        kind_rank,
        count(distinct source) as n_peer_sources,
        count(distinct value) as n_peer_values
    from ranked
    group by run_id, key, epoch, metric, abstain_rank, kind_rank
),

final as (
    select
        o.run_id,
        o.key,
        o.task_id,
        o.seed,
        o.epoch,
        o.episode_id,
        o.metric,
        o.value,
        o.valid,
        o.skip_reason,
        o.explanation,
        o.source,
        o.source_kind,
        o.scorer_version,
        o.metadata,
        o.n_sources,
        o.n_abstained,
        coalesce(p.n_peer_sources > 1 and p.n_peer_values > 1, false) as ambiguous
    from ordered as o
    left join peers as p
        on p.run_id = o.run_id
        and p.key = o.key
        and p.epoch = o.epoch
        and p.metric = o.metric
        and p.abstain_rank = o.abstain_rank
        and p.kind_rank = o.kind_rank
    where o.rn = 1
)

select * from final
