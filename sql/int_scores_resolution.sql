-- THE score resolution rule: one score per (run_id, key, epoch, metric), the value of metric
-- M for that episode, ranked over every current candidate score row. The store evaluates it
-- once per commit, for the runs the commit touched, and keeps the answer in the table
-- resolved_scores (read by int_scores_preferred, which every reader goes through: aggregate,
-- compare, policies, derivers, export, the report, charts and every mart_*), so one question
-- gets one answer and no question re-ranks the whole store. Read this view itself for what the
-- table cannot answer: one source only, or scores not committed yet (hylo_analytics.resolution
-- overrides stg_scores then). The rule (macro score_rank; docs/architecture.md states it):
--   1. a valid value beats an abstention (null, NaN or valid = false): an abstention never
--      hides evidence;
--   2. among values: score (re-scored from the trace) > derived > observation (a grader's
--      judgement) > imported (the log's own), then source name;
--   3. among abstentions: imported > observation > derived > score, then source name: the
--      log's own reason ("harness error: timeout") is kept over a re-scorer's "no trace".
-- value is null unless valid; skip_reason is set for every abstention ('abstained', 'nan' or
-- 'invalid' when the source gave none); errored is true for an abstention of an episode whose
-- sample status is 'error' (it counts as a failure in the errors-as-failures rate).
-- ambiguous: another source of the picked row's rank gives a different value. n_sources /
-- n_abstained count every candidate row, so nothing is hidden. n_key_epochs: the epochs of the
-- row's key with a score of its metric (int_key_scores passes a key of one epoch through
-- without grouping it: the common case, and the cost of every aggregate at scale).
-- Grain: one row per (run_id, key, epoch, metric); null allowed in key, epoch.
with scores as (
    select
        *,
        score_is_valid(value, valid) as is_valid
    from stg_scores
),

samples as (
    select run_id, key, epoch, status as sample_status from stg_samples
),

ranked as (
    select
        *,
        score_rank(is_valid, source_kind) as rank
    from scores
),

ordered as (
    select
        *,
        row_number() over (
            partition by run_id, key, epoch, metric order by rank, source
        ) as rn,
        count(*) over candidates as n_sources,
        count(*) filter (where not is_valid) over candidates as n_abstained
    from ranked
    window candidates as (partition by run_id, key, epoch, metric)
),

peers as (
    -- distinct values among the sources tied with the pick on rank
    select
        run_id, key, epoch, metric, rank,
        count(distinct source) as n_peer_sources,
        count(distinct value) filter (where is_valid) as n_peer_values
    from ranked
    group by run_id, key, epoch, metric, rank
),

picked as (
    select
        o.run_id,
        o.key,
        o.task_id,
        o.seed,
        o.epoch,
        o.episode_id,
        o.metric,
        case when o.is_valid then o.value end as value,
        o.is_valid as valid,
        case
            when o.is_valid then null
            else coalesce(
                o.skip_reason,
                case
                    when o.value is null then 'abstained'
                    when isnan(o.value) then 'nan'
                    else 'invalid'
                end
            )
        end as skip_reason,
        coalesce(not o.is_valid and s.sample_status = 'error', false) as errored,
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
        and p.key is not distinct from o.key
        and p.epoch is not distinct from o.epoch
        and p.metric = o.metric
        and p.rank = o.rank
    left join samples as s
        on s.run_id = o.run_id
        and s.key = o.key
        and s.epoch is not distinct from o.epoch
    where o.rn = 1
),

final as (
    select
        *,
        count(*) over (partition by run_id, key, metric) as n_key_epochs
    from picked
)

select * from final
