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
-- sample status is 'error' (under the errors policy 'failure' it counts as a failure).
-- ambiguous: another source of the picked row's rank gives a different value. n_sources /
-- n_abstained count every candidate row, so nothing is hidden. n_key_epochs: the epochs of the
-- row's key with a score of its metric (int_key_scores passes a key of one epoch through
-- without grouping it: the common case, and the cost of every aggregate at scale).
-- A run whose scores come from one source and one epoch value (a new run, as ingested) has one
-- candidate per episode and one epoch per key: its rows pass through without a group-by or a
-- window (the same values the general path gives them). Other runs: two hash aggregations,
-- per rank the candidate of the smallest source name (and the peers' distinct sources and
-- values), then per episode the smallest rank's.
-- Grain: one row per (run_id, key, epoch, metric); null allowed in key, epoch.
with scores as (
    select
        *,
        score_is_valid(value, valid) as is_valid
    from stg_scores
),

errored_samples as (
    -- only an abstention of an errored episode is errored: the join needs those samples only
    select run_id, key, epoch from stg_samples where status = 'error'
),

runs as (
    select
        run_id,
        count(distinct source) = 1
        and count(distinct coalesce(epoch, -9223372036854775808)) = 1 as plain
    from scores
    group by run_id
),

ranked as (
    select
        s.*,
        score_rank(s.is_valid, s.source_kind) as rank
    from scores as s
    inner join runs as r on r.run_id = s.run_id
    where not r.plain
),

plain as (
    -- one candidate per episode, one epoch per key
    select
        s.run_id,
        s.key,
        s.task_id,
        s.seed,
        s.epoch,
        s.episode_id,
        s.metric,
        s.value,
        s.is_valid,
        s.skip_reason,
        s.explanation,
        s.source,
        s.source_kind,
        s.scorer_version,
        s.metadata,
        cast(1 as bigint) as n_sources,
        cast(case when s.is_valid then 0 else 1 end as bigint) as n_abstained,
        false as ambiguous,
        cast(1 as bigint) as n_key_epochs
    from scores as s
    inner join runs as r on r.run_id = s.run_id
    where r.plain
),

per_rank as (
    -- the candidates of one rank: the pick among them (smallest source name), how many they
    -- are, and the distinct sources and values among them (ambiguous when both exceed one)
    select
        run_id,
        key,
        epoch,
        metric,
        rank,
        arg_min(
            {
                'task_id': task_id,
                'seed': seed,
                'episode_id': episode_id,
                'value': value,
                'is_valid': is_valid,
                'skip_reason': skip_reason,
                'explanation': explanation,
                'source': source,
                'source_kind': source_kind,
                'scorer_version': scorer_version,
                'metadata': metadata
            },
            source
        ) as pick,
        count(*) as n_rows,
        count(*) filter (where not is_valid) as n_invalid,
        count(distinct source) > 1 and count(distinct value) filter (where is_valid) > 1
            as ambiguous
    from ranked
    group by run_id, key, epoch, metric, rank
),

per_episode as (
    select
        run_id,
        key,
        epoch,
        metric,
        arg_min(pick, rank) as pick,
        arg_min(ambiguous, rank) as ambiguous,
        sum(n_rows) as n_sources,
        sum(n_invalid) as n_abstained
    from per_rank
    group by run_id, key, epoch, metric
),

general as (
    select
        o.run_id,
        o.key,
        o.pick.task_id as task_id,
        o.pick.seed as seed,
        o.epoch,
        o.pick.episode_id as episode_id,
        o.metric,
        o.pick.value as value,
        o.pick.is_valid as is_valid,
        o.pick.skip_reason as skip_reason,
        o.pick.explanation as explanation,
        o.pick.source as source,
        o.pick.source_kind as source_kind,
        o.pick.scorer_version as scorer_version,
        o.pick.metadata as metadata,
        cast(o.n_sources as bigint) as n_sources,
        cast(o.n_abstained as bigint) as n_abstained,
        coalesce(o.ambiguous, false) as ambiguous,
        count(*) over (partition by o.run_id, o.key, o.metric) as n_key_epochs
    from per_episode as o
),

picked as (
    select * from plain
    union all
    select * from general
),

final as (
    select
        p.run_id,
        p.key,
        p.task_id,
        p.seed,
        p.epoch,
        p.episode_id,
        p.metric,
        case when p.is_valid then p.value end as value,
        p.is_valid as valid,
        case
            when p.is_valid then null
            else coalesce(
                p.skip_reason,
                case
                    when p.value is null then 'abstained'
                    when isnan(p.value) then 'nan'
                    else 'invalid'
                end
            )
        end as skip_reason,
        coalesce(not p.is_valid and e.run_id is not null, false) as errored,
        p.explanation,
        p.source,
        p.source_kind,
        p.scorer_version,
        p.metadata,
        p.n_sources,
        p.n_abstained,
        p.ambiguous,
        p.n_key_epochs
    from picked as p
    left join errored_samples as e
        on e.run_id = p.run_id
        and e.key = p.key
        and e.epoch is not distinct from p.epoch
)

select * from final
