-- The values a ranking pairs, one row per (run, key) of one metric, as numbers: the hash of
-- the run id and of the key (compare._rank_store maps them back to the policy, suite and key,
-- having chosen for each the hash function, DuckDB's hash or MD5's lower 64 bits, under
-- which no two of the runs or keys share a code), the key's value reduced over its
-- epochs, how many of them are valid, how many rows it has and how many of them errored.
-- First the errors policy, as Store.compare pairs a key: an errored abstention of the runs in
-- $fill (those whose policy is 'failure' and whose metric is 0/1: compare.ranking decides it
-- by the rule of compare._prepare and int_paired) is a failure, 0.0. The reduction is the
-- fields' aggregate, abstentions left out (a mean is a sum and its count, so the runs of one
-- policy are reduced together afterwards, as one key's epochs). A key of one epoch passes
-- through ungrouped (as int_key_scores does): only keys of several epochs are grouped. No
-- join leaves DuckDB to guess which side is small. A key that is null pairs with nothing.
with filled as not materialized (
    select
        run_id,
        key,
        n_key_epochs,
        errored,
        case
            when value is null and errored and list_contains($fill, run_id) then 0.0
            else value
        end as value
    from {scores}
    where key is not null
),

single as (
    select
        {run_hash}(run_id) as run,
        {key_hash}(key) as key,
        value,
        cast(value is not null as integer) as n_valid,
        cast(1 as integer) as n_rows,
        cast(value is null and errored as integer) as n_errored
    from filled
    where n_key_epochs = 1
),

several as (
    select
        {run_hash}(run_id) as run,
        {key_hash}(key) as key,
        {reducer}(value) as value,
        cast(count(value) as integer) as n_valid,
        cast(count(*) as integer) as n_rows,
        cast(count(*) filter (where value is null and errored) as integer) as n_errored
    from filled
    where n_key_epochs > 1
    group by run_id, key
),

final as (
    select * from single
    union all
    select * from several
)

select * from final
