-- the candidate pairs that match: the names (already) and, when the check uses them, the
-- arguments (a pair found equal in step 6, or no arguments expected). A subquery. Fields:
-- cand, ok (the equal pairs: a, b), names_only (true or false).
(select m.* from {cand} as m
 where {names_only}
    or m.eargs is null or json_type(m.eargs) = 'NULL'
    or exists (select 1 from {ok} as q where q.a = cast(m.eargs as varchar)
                                       and q.b = cast(m.cargs as varchar)))
