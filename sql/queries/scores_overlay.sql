-- stg_scores as it would read after committing the rows of relation {{pending}}: a commit
-- tombstones each (run, source) it writes, so the pending rows replace every stored row of
-- their (run, source) (hylo_analytics._sql.scores_overlay).
select * from stg_scores as s
where not exists (
    select 1 from {pending} as p where p.run_id = s.run_id and p.source = s.source
)
union all by name
select * from {pending}
